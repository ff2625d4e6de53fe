import Arbor
@testable import ArborCLI
import ArborConformance
import Foundation
import Testing

/// `arbor conformance` on real scratch stores. The suite itself runs in full on every adapter in
/// ArborConformanceTests; here a few cases of each group show the command's work, serialized to
/// keep the load on the machine low.
@Suite(.serialized) struct ConformanceCommandTests {
    /// A few cases of every group, and a pair case.
    static let sample = ["contract.refs-racing", "contract.persistence", "store.commit-read", "merge.children", "exchange.to-reference", "matrix.sync"]

    func conformance(_ arguments: String...) async throws -> (output: String, succeeded: Bool) {
        try await conformance(arguments)
    }

    func conformance(_ arguments: [String]) async throws -> (output: String, succeeded: Bool) {
        let command = try #require(try ArborCommand.parseAsRoot(["conformance"] + arguments) as? ConformanceCommand)
        var output = ""
        let succeeded = try await command.execute(&output)
        return (output, succeeded)
    }

    func withFolder(_ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-conformance-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body(folder.path)
    }

    /// The objects and refs the store at `url` holds.
    func contents(_ url: String) async throws -> (objects: Int, refs: Int) {
        let backend = try await openBackend(try StoreLocation(parsing: url), create: false)
        let contents = (try await backend.allHashes().count, try await backend.refs().count)
        try await backend.close()
        return contents
    }

    @Test func parsesStoresCasesAndFormat() throws {
        let command = try #require(try ArborCommand.parseAsRoot(
            ["conformance", "memory:", "json:/tmp/x", "--only", "contract", "store.diff-log", "--json"]) as? ConformanceCommand)
        #expect(command.urls == ["memory:", "json:/tmp/x"])
        #expect(command.only == ["contract", "store.diff-log"])
        #expect(command.format.json)
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["conformance"]) }
    }

    /// `--only` takes every word after it, so a URL put last is read as a case name, which the
    /// error for an unknown case quotes: without its password.
    @Test func aURLTakenForACaseNameIsQuotedWithoutItsPassword() async throws {
        let command = try #require(try ArborCommand.parseAsRoot(
            ["conformance", "memory:", "--only", "contract", "postgres://arbor:S3cret-case-pw@127.0.0.1:1/db"]) as? ConformanceCommand)
        var output = ""
        do {
            _ = try await command.execute(&output)
            Issue.record("expected an unknown case")
        } catch {
            #expect("\(error)".contains("127.0.0.1") && !"\(error)".contains("S3cret-case-pw"), "\(error)")
        }
    }

    @Test func runsOnAnLMDBStoreAndMemoryAndLeavesTheStoreEmpty() async throws {
        try await withFolder { folder in
            let url = "lmdb:\(folder)/store"
            let (output, succeeded) = try await conformance([url, "memory:", "--only"] + Self.sample)
            #expect(succeeded)
            let rows = lines(output).filter { line in ConformanceCase.Group.allCases.contains { line.hasPrefix($0.rawValue + ".") } }
            #expect(rows.count == 2 * 5)
            #expect(rows.allSatisfy { $0.contains(" pass ") || $0.contains(" n/a ") }, "\(output)")
            #expect(output.contains("5 passed, 0 failed, 0 not applicable on \(url) in "))
            #expect(output.contains("4 passed, 0 failed, 1 not applicable on memory: in "))
            #expect(output.contains("the adapter lacks reopen"))
            // The pair matrix: the store to memory: and back.
            #expect(lines(output).contains { $0.hasPrefix(url) && $0.hasSuffix("1 pass") })
            #expect(output.contains("pair matrix: 2 passed, 0 failed on 2 ordered pairs in "))
            let left = try await contents(url)
            #expect(left.objects == 0 && left.refs == 0)
        }
    }

    /// Ctrl-C stops a run: the case running ends and its scratch stores are wiped, no report is
    /// printed, the status is 130, and the stores are accepted as empty by the next run.
    @Test func ctrlCStopsTheRunAndLeavesTheStoresEmpty() async throws {
        try await withFolder { folder in
            let urls = ["sqlite:\(folder)/a", "json:\(folder)/b"]
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try ChildProcess.executable("arbor"))
            process.arguments = ["conformance"] + urls
            let (output, errors) = (Pipe(), Pipe())
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            // A moment into the run (the whole takes tens of seconds).
            _ = try await ChildProcess.interruptOnceHandled(process)
            let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 130, "\(said)")
            #expect(said.contains("stopping:") && said.contains("interrupted: the scratch stores were left empty"), "\(said)")
            #expect(printed.isEmpty, "\(printed)")
            for url in urls {
                let left = try await contents(url)
                #expect(left.objects == 0 && left.refs == 0, "\(url): \(left)")
            }
            #expect(try await conformance(urls + ["--only", "contract.delete"]).succeeded)
        }
    }

    @Test func printsJSONForSelectedCases() async throws {
        try await withFolder { folder in
            let (output, succeeded) = try await conformance("sqlite:\(folder)/store.sqlite", "--only", "contract.refs-racing", "merge", "--json")
            #expect(succeeded)
            let document = try JSONValue.parse(output)
            #expect(document["succeeded"] == .bool(true))
            let store = try #require(document["stores"]?.elements.first)
            #expect(store["url"] == .string("sqlite:\(folder)/store.sqlite"))
            #expect(store["capabilities"] == .array([.string("reopen"), .string("multiProcess"), .string("largeObjects")]))
            #expect(store["failed"] == .number("0"))
            let cases = store["cases"]?.elements ?? []
            #expect(cases.first?["id"] == .string("contract.refs-racing"))
            #expect(cases.count == 1 + ConformanceCase.all.filter { $0.group == .merge }.count)
            #expect(cases.allSatisfy { $0["result"] == .string("passed") && $0["milliseconds"] != nil })
        }
    }

    /// One store given twice (one file under two spellings or schemes) is refused before
    /// anything runs: the matrix would exchange it with itself and blame the adapter.
    @Test func oneStoreGivenTwiceIsRefused() async throws {
        try await withFolder { folder in
            for second in ["sqlite:\(folder)/./s", "json:\(folder)/s"] {
                await #expect {
                    _ = try await conformance("sqlite:\(folder)/s", second, "--only", "matrix.exchange")
                } throws: { error in
                    (error as? ArborError)?.code == .invalidInput && (error as? ArborError)?.message.contains("name one store") == true
                }
            }
            #expect(!FileManager.default.fileExists(atPath: "\(folder)/s"))
        }
    }

    @Test func runsTheMatrixAloneAsJSON() async throws {
        try await withFolder { folder in
            let (output, succeeded) = try await conformance("memory:", "json:\(folder)/j", "--only", "matrix.exchange", "--json")
            #expect(succeeded)
            let document = try JSONValue.parse(output)
            #expect(document["stores"] == .array([]))
            let pairs = document["pairs"]?.elements ?? []
            #expect(pairs.map { $0["url"] } == [.string("memory: → json:\(folder)/j"), .string("json:\(folder)/j → memory:")])
            #expect(pairs.allSatisfy { $0["cases"]?.elements.map { $0["id"] } == [.string("matrix.exchange")] && $0["failed"] == .number("0") })
        }
        await #expect { _ = try await conformance("memory:", "--only", "matrix") } throws: { ($0 as? ArborError)?.code == .invalidInput }
    }

    /// A URL's secret is taken out of the report's strings, not out of its text: a secret of
    /// one digit (here a `password=` in a JSON store's path, which the redaction treats as one)
    /// left the JSON report unparseable, its numbers cut by `***`.
    @Test func aShortSecretLeavesTheJSONReportValid() async throws {
        try await withFolder { folder in
            let url = "json:\(folder)/j?password=1"
            let (output, succeeded) = try await conformance("memory:", url, "--only", "matrix.exchange", "--json")
            #expect(succeeded)
            let document = try JSONValue.parse(output)
            #expect(document["pairs"]?.elements.count == 2)
            #expect(!output.contains("password=1"))
        }
    }

    @Test func refusesAStoreThatIsNotEmpty() async throws {
        try await withJSONStore { url in
            _ = try await arbor("put", url, "Task", "1", #"{"title": "keep me"}"#)
            let command = try #require(try ArborCommand.parseAsRoot(["conformance", url]) as? ConformanceCommand)
            var output = ""
            await #expect { _ = try await command.execute(&output) } throws: { error in
                (error as? ArborError)?.code == .invalidInput && "\(error)".contains("is not empty")
            }
            #expect(output.isEmpty)
            #expect(try await contents(url).refs == 1, "the store is left as it was")
        }
        // Objects without refs (an interrupted exchange's) are refused too.
        try await withJSONStore { url in
            let backend = try await openBackend(try StoreLocation(parsing: url), create: false)
            try await backend.put([(Hash.of([1, 2, 3]), [1, 2, 3])])
            try await backend.close()
            let command = try #require(try ArborCommand.parseAsRoot(["conformance", url]) as? ConformanceCommand)
            var output = ""
            await #expect { _ = try await command.execute(&output) } throws: { error in
                "\(error)".contains("is not empty (it holds objects and 0 refs)")
            }
            #expect(try await contents(url) == (1, 0))
        }
    }

    @Test func unknownCasesAndUnreachableServersFailWithoutShowingPasswords() async throws {
        let command = try #require(try ArborCommand.parseAsRoot(["conformance", "memory:", "--only", "nope"]) as? ConformanceCommand)
        var output = ""
        await #expect { _ = try await command.execute(&output) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        let url = "postgres://user:s3cret-pw@127.0.0.1:1/nothing?connect_timeout=2"
        let unreachable = try #require(try ArborCommand.parseAsRoot(["conformance", url]) as? ConformanceCommand)
        await #expect { _ = try await unreachable.execute(&output) } throws: { !"\($0)".contains("s3cret-pw") }
    }
}

/// The progress line `arbor conformance` shows on a terminal.
@Suite struct ConformanceProgressTests {
    @Test func theLineCountsCasesAndFailuresAndNamesTheLastCase() {
        let tally = RunTally(name: "sqlite:/tmp/s.sqlite", total: 3, unit: "cases")
        #expect(tally.add(failed: false, last: "contract.put") == "sqlite:/tmp/s.sqlite  1/3 cases, 0 failed; last contract.put")
        #expect(tally.add(failed: true, last: "contract.delete") == "sqlite:/tmp/s.sqlite  2/3 cases, 1 failed; last contract.delete")
        // A name another program chose cannot move the cursor or retitle the terminal.
        #expect(!RunTally(name: "memory:", total: 1, unit: "pairs").add(failed: false, last: "a\u{1B}]0;x\u{7}").contains("\u{1B}"))
    }
}
