import Arbor
import ArborConformance
import ArgumentParser
import Foundation
import Synchronization

/// `arbor conformance URL [URL …] [--only CASE …] [--json]`: runs the conformance suite on
/// scratch stores.
public struct ConformanceCommand: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "conformance",
        abstract: "Run the adapter conformance suite on scratch stores.",
        discussion: """
            Each URL names a new or empty scratch store: the suite fills it, wipes it after every case and leaves \
            it empty; a store that holds anything is refused. Prints a table per store: case, result (pass, FAIL, \
            n/a: the adapter lacks a capability the case needs) and time, with the expected and actual outcome \
            of each failure. With several URLs, the pair matrix follows: exchange, sync and migration from each \
            store to each other one, checking identical hashes. With --json: {"succeeded", "stores": [STORE], \
            "pairs": [STORE]}, each STORE {"url" (for a pair "SOURCE → TARGET"), "capabilities", "passed", \
            "failed", "notApplicable", "milliseconds", "cases": [{"id", "result": "passed" | "failed" | \
            "notApplicable", "milliseconds", "message", "expected", "actual", "reason"}]}, absent members left \
            out. On a terminal, a line on standard error shows how many cases have run. Exits with 1 when a case failed. Ctrl-C stops the run once the case running has ended and \
            wiped its stores (status 130, no report); a second Ctrl-C stops it at once.
            """)

    @Argument(help: ArgumentHelp(
        "Scratch stores: memory:, json:PATH, sqlite:PATH, lmdb:PATH or postgres://user:password@host:port/database.",
        valueName: "url"))
    public var urls: [String]

    @Option(parsing: .upToNextOption, help: ArgumentHelp(
        "Only these cases or groups (contract, store, merge, exchange, matrix), such as contract.refs-racing or matrix.sync.",
        valueName: "case"))
    public var only: [String] = []

    @OptionGroup public var format: OutputOptions

    public init() {}

    public func validate() throws {
        if urls.isEmpty { throw ValidationError("give at least one store URL") }
    }

    static let stoppingMessage: StaticString = "\nstopping: the case running ends and its scratch stores are wiped; Ctrl-C again to stop at once (a scratch store may then hold that case's data, and be refused by the next run)\n"
    static let stoppedAtOnceMessage: StaticString = "\ninterrupted: a scratch store may hold the data of the case that was running; empty it, or give a new one, before the next run\n"

    public func run() async throws {
        // In a task of its own, so that Ctrl-C can cancel it: the case running ends, its stores
        // are wiped (the suite's cleanup runs outside the cancelled task), and nothing more runs.
        let work = Task { () async throws -> (succeeded: Bool, text: String) in
            var text = ""
            let succeeded = try await execute(&text)
            return (succeeded, text)
        }
        let watch = Interruption.cancelOnInterrupt(work, saying: Self.stoppingMessage, thenSaying: Self.stoppedAtOnceMessage)
        defer { watch.cancel() }
        let outcome = await work.result
        var errors = StandardStream.error
        switch outcome {
        case .success(let (succeeded, text)):
            let output = StandardStream.output()
            output.write(text)
            output.flush()
            if !succeeded { throw ExitCode.failure }
        case .failure where work.isCancelled:
            print("interrupted: the scratch stores were left empty; no report, since not every case ran", to: &errors)
            throw ExitCode(130)
        case .failure(let error):
            print("error: \((error as? ArborError)?.description ?? String(describing: error))", to: &errors)
            throw ExitCode.failure
        }
    }

    /// Runs the suite on every store, writes the tables (or the JSON document) to `output` and
    /// returns whether every case passed or was not applicable. Throws, before running anything,
    /// for a malformed URL, an unknown case or a store that is not empty. No output and no error
    /// shows a password of a URL.
    public func execute(_ output: inout some TextOutputStream) async throws -> Bool {
        do {
            return try await runSuites(&output)
        } catch {
            // Every argument's, not only the URLs': `--only` takes the words after it, a URL too.
            throw (urls + only + CommandLine.arguments.dropFirst()).reduce(error) { StoreLocation.redactingSecrets(of: $1, in: $0) }
        }
    }

    private func runSuites(_ output: inout some TextOutputStream) async throws -> Bool {
        let (suiteCases, matrixCases) = try selection()
        let stores = try urls.map { ScratchStore(location: try StoreLocation(parsing: $0)) }
        try Self.refuseSharedStores(stores.map(\.location))
        for store in stores { try await store.prepare() }
        // On a terminal, a line on standard error says how far the run is: it takes minutes.
        let bar = ProgressBar(label: "conformance")
        defer { bar.finish() }
        var reports = [ConformanceReport]()
        if let suiteCases {
            let total = try ConformanceSuite.cases(only: suiteCases).count
            for store in stores {
                let tally = RunTally(name: redacted(store.location.redacted), total: total, unit: "cases")
                reports.append(try await ConformanceSuite(adapter: store.adapter).run(only: suiteCases) { result in
                    if case .failed = result.outcome { bar.show(tally.add(failed: true, last: result.caseID)) } else {
                        bar.show(tally.add(failed: false, last: result.caseID))
                    }
                })
            }
        }
        var pairs = [ConformanceReport]()
        if !matrixCases.isEmpty && stores.count >= 2 {
            let tally = RunTally(name: "matrix", total: stores.count * (stores.count - 1), unit: "pairs")
            pairs = try await ConformanceMatrix(adapters: stores.map(\.adapter)).run(only: matrixCases) { report in
                bar.show(tally.add(failed: !report.succeeded, last: redacted(report.adapter)))
            }
        }
        bar.finish()
        // Secrets are taken out of the JSON document's strings, not out of its text: a short
        // password would otherwise also match digits of numbers, or parts of member names.
        let text = format.json
            ? redacted(Rendering.json(reports, pairs: pairs)).serialized(pretty: true)
            : redacted((reports.map { $0.table() } + (pairs.isEmpty ? [] : [Rendering.matrix(pairs, stores: stores.map(\.location.redacted))])).joined(separator: "\n\n"))
        print(text, to: &output)
        return (reports + pairs).allSatisfy(\.succeeded)
    }

    /// Refuses two locations that name one store (one file or folder, under any scheme; one
    /// PostgreSQL database as one role): the matrix would exchange a store with itself, and its
    /// failures would be blamed on the adapter.
    static func refuseSharedStores(_ locations: [StoreLocation]) throws {
        var seen = [String: String]()
        for location in locations {
            let identity: String? = switch location {
            case .memory: nil
            case .json(let path), .sqlite(let path), .lmdb(let path):
                "file " + URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
            case .postgres: location.redacted
            }
            guard let identity else { continue }
            if let first = seen[identity] {
                throw ArborError(.invalidInput, "\(first) and \(location.redacted) name one store: give each scratch store once")
            }
            seen[identity] = location.redacted
        }
    }

    /// What `--only` selects: the suite's cases (`[]`: all; `nil`: none) and the matrix's (ids;
    /// all without `--only`). Throws for a name that is no case or group.
    private func selection() throws -> (suite: [String]?, matrix: [String]) {
        if only.isEmpty { return ([], ConformancePairCase.all.map(\.id)) }
        let matrixNames = only.filter { $0.hasPrefix("matrix") }
        let suite = only.filter { !$0.hasPrefix("matrix") }
        let matrix = matrixNames.isEmpty ? [] : try ConformanceMatrix.cases(only: matrixNames).map(\.id)
        _ = try ConformanceSuite.cases(only: suite)
        if suite.isEmpty && urls.count < 2 {
            throw ArborError(.invalidInput, "the matrix cases run on pairs of stores: give at least two URLs")
        }
        return (suite.isEmpty ? nil : suite, matrix)
    }

    /// `text` without the secrets of any of the URLs.
    func redacted(_ text: String) -> String {
        urls.reduce(text) { StoreLocation.redactingSecrets(of: $1, in: $0) }
    }

    /// `document` with every string (and member name) ``redacted(_:)``.
    func redacted(_ document: JSONValue) -> JSONValue {
        switch document {
        case .string(let text): .string(redacted(text))
        case .array(let elements): .array(elements.map(redacted))
        case .object(let members): .object(members.map { (redacted($0.key), redacted($0.value)) })
        case .null, .bool, .number: document
        }
    }
}

/// How far one store's suite (or the matrix) has run, for the progress line.
final class RunTally: Sendable {
    private let name: String
    private let total: Int
    private let unit: String
    private let counts = Mutex((done: 0, failed: 0))

    init(name: String, total: Int, unit: String) {
        (self.name, self.total, self.unit) = (name, total, unit)
    }

    /// Counts one more result and returns the progress line: `sqlite:/tmp/s.sqlite  12/52 cases, 1 failed; last contract.enumerate`.
    func add(failed: Bool, last: String) -> String {
        let (done, failures) = counts.withLock { counts in
            counts.done += 1
            if failed { counts.failed += 1 }
            return (counts.done, counts.failed)
        }
        return "\(Rendering.printable(name))  \(done)/\(total) \(unit), \(failures) failed; last \(Rendering.printable(last))"
    }
}
