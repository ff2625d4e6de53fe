import Arbor
import ArborCLI
import ArborPostgres
import Foundation
import Synchronization

/// Migration and exchange between engines, in one run:
///
/// - Migration: a store of `records` records (~100 bytes each, committed in commits of `commitSize`,
///   all history kept) is built on each source engine, then migrated to every other engine in a
///   child process (`migrate-child`), which reports its own peak memory (`ru_maxrss`). The
///   anchor is a blind copy of the same objects between the same two engines in another child
///   (`copy-child`: enumerate every object of the source with its bytes, put it into the target;
///   no walk, no hash checks, no verification): the floor of moving those bytes through the adapters.
///   Printed: records/s of the copy and of copy + verification, objects, bytes, peak memory,
///   and the migrate/blind-copy ratio.
/// - Exchange: 100 records changed on a store of 10,000 and of `records` records, then
///   exchanged to its copy; printed: seconds, objects copied and the rounds of existence checks,
///   and the ratio; then the same exchange once more, now in sync, with every request to either
///   store counted.
///
/// The JSON engine writes one file per object (with fsync), so it is measured at `jsonRecords`.
struct TransferBenchmark {
    var records: Int
    var jsonRecords: Int
    static let defaultCommitSize = 100_000
    var commitSize = defaultCommitSize
    var engines: [String]
    var postgresURL: String?
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-transfer-\(UUID().uuidString)").path

    /// A fresh store location of `engine` and a cleanup.
    func makeLocation(_ engine: String, _ name: String) throws -> (url: String, cleanup: () -> Void) {
        if engine == "postgres" {
            guard let base = postgresURL else { throw ArborError(.invalidInput, "postgres needs ARBOR_BENCH_POSTGRES_URL") }
            // A generated identifier, never data.
            let database = "arbor_bench_\(name)_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
            try PostgresSession(url: base).execute("CREATE DATABASE \(database)")
            return (PostgresBenchmark.url(base, database: database), { _ = try? PostgresSession(url: base).execute("DROP DATABASE IF EXISTS \(database) WITH (FORCE)") })
        }
        let path = "\(folder)/\(name)-\(UUID().uuidString.prefix(8))"
        let url = engine == "sqlite" ? "sqlite:\(path).sqlite" : "\(engine):\(path)"
        return (url, { for suffix in ["", ".sqlite", ".sqlite-wal", ".sqlite-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } })
    }

    static func open(_ url: String, create: Bool) throws -> Store {
        Store(backend: try openBackend(try StoreLocation(parsing: url), create: create), configuration: .init(replica: "bench"))
    }

    func run() async throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        print("transfer: \(records) records (JSON: \(jsonRecords)), commits of \(commitSize), all history; engines: \(engines.joined(separator: ", "))")
        var cleanups = [() -> Void]()
        defer { for cleanup in cleanups { cleanup() } }

        // Sources: built through the Store API on each engine; JSON pairs use smaller stores,
        // and the JSON source is a migrated copy of one.
        var sources = [String: (url: String, records: Int)]()
        var smallSources = [String: (url: String, records: Int)]()
        func build(_ engine: String, _ count: Int, _ name: String) async throws -> String {
            let (url, cleanup) = try makeLocation(engine, name)
            cleanups.append(cleanup)
            let store = try Self.open(url, create: true)
            let (seconds, _) = try await CommitBenchmark.commit(CommitBenchmark.items(count), in: store, batch: commitSize)
            try await store.close()
            print(String(format: "built   %-8@ source: %d records in commits of %d in %.1f s", engine, count, commitSize, seconds))
            return url
        }
        for engine in engines where engine != "json" {
            sources[engine] = (try await build(engine, records, "source"), records)
            if engines.contains("json") { smallSources[engine] = (try await build(engine, jsonRecords, "small"), jsonRecords) }
        }
        if let seed = smallSources.keys.sorted().first {
            let (url, cleanup) = try makeLocation("json", "source")
            cleanups.append(cleanup)
            _ = try await child(["migrate-child", smallSources[seed]!.url, url])
            smallSources["json"] = (url, jsonRecords)
        }

        print("migrate FROM -> TO        records  copy rec/s  +verify rec/s  objects      MB  peak MB (anon)  blind copy s  migrate/blind")
        var copies = [String: (engine: String, url: String)]()
        for from in engines {
            for to in engines where to != from {
                guard let source = from == "json" || to == "json" ? smallSources[from] : sources[from] else { continue }
                let (target, cleanup) = try makeLocation(to, "target")
                let migrated = try await child(["migrate-child", source.url, target])
                let (blindTarget, blindCleanup) = try makeLocation(to, "blind")
                let blind = try await child(["copy-child", source.url, blindTarget])
                blindCleanup()
                // Keep one copy per source for the exchange below; the disk holds only so many.
                let keep = copies[from] == nil && to != "json" && source.records == records
                if keep { cleanups.append(cleanup) } else { cleanup() }
                let copySeconds = migrated["copySeconds"] ?? 0, verifySeconds = migrated["verifySeconds"] ?? 0
                let count = Double(source.records)
                print(String(format: "%-8@ -> %-8@ %9d  %10.0f  %13.0f  %7.0f  %6.1f  %7.0f (%4.0f)  %12.2f  %12.2fx",
                             from, to, source.records, count / copySeconds, count / (copySeconds + verifySeconds),
                             migrated["objects"] ?? 0, (migrated["bytes"] ?? 0) / 1e6, migrated["peakMB"] ?? 0, migrated["peakAnonMB"] ?? 0,
                             blind["seconds"] ?? 0, copySeconds / max(blind["seconds"] ?? 1, 1e-9)))
                if keep { copies[from] = (to, target) }
            }
        }
        print("target: at least 100,000 records/s between sqlite, lmdb and postgres; peak memory under 256 MB")
        print("(peak MB: the child's VmHWM, which counts the source's and target's memory-mapped LMDB pages; anon: heap and stacks only)")

        // Exchange of 100 changes at 10,000 records and at `records`, from each source engine
        // to the engine its kept copy is on.
        for (from, large) in copies.filter({ $0.key != "json" }).sorted(by: { $0.key < $1.key }) {
            let (smallSource, sourceCleanup) = try makeLocation(from, "small")
            let (smallTarget, targetCleanup) = try makeLocation(large.engine, "smallcopy")
            cleanups += [sourceCleanup, targetCleanup]
            let seed = try Self.open(smallSource, create: true)
            _ = try await CommitBenchmark.commit(CommitBenchmark.items(10_000), in: seed, batch: 10_000)
            try await seed.migrate(to: try Self.open(smallTarget, create: true), verify: false)
            try await seed.close()
            // A first exchange each, so both targets are in the same steady state (SQLite, for
            // one, checkpoints the WAL a migration left on its first write after opening).
            // Then the median of five.
            _ = try await exchangeAfterChanges(from: smallSource, to: smallTarget, changes: 100, round: 0)
            _ = try await exchangeAfterChanges(from: sources[from]!.url, to: large.url, changes: 100, round: 0)
            var smallRuns = [ExchangeReport](), bigRuns = [ExchangeReport]()
            for round in 1...5 {
                smallRuns.append(try await exchangeAfterChanges(from: smallSource, to: smallTarget, changes: 100, round: round))
                bigRuns.append(try await exchangeAfterChanges(from: sources[from]!.url, to: large.url, changes: 100, round: round))
            }
            print("exchange seconds, n = 10,000: \(smallRuns.map { String(format: "%.3f", $0.seconds) }.joined(separator: " ")); n = \(records): \(bigRuns.map { String(format: "%.3f", $0.seconds) }.joined(separator: " "))")
            let small = smallRuns.sorted { $0.seconds < $1.seconds }[2]
            let big = bigRuns.sorted { $0.seconds < $1.seconds }[2]
            print(String(format: "exchange 100 changes %@ -> %@: n = 10,000: %.3f s, %d objects, %d rounds of existence checks; n = %d: %.3f s, %d objects, %d rounds; ratio %.2fx (target 1.5x)",
                         from, large.engine, small.seconds, small.objects, small.rounds, records, big.seconds, big.objects, big.rounds, big.seconds / small.seconds))
            // Where the difference goes: the target's one write transaction, whose cost per
            // object grows with the size of the engine's files, against the objects ratio.
            print(String(format: "  of which the target's writes: %.3f s and %.3f s (%.2fx); objects %.2fx",
                         small.writeSeconds, big.writeSeconds, big.writeSeconds / max(small.writeSeconds, 1e-9),
                         Double(big.objects) / Double(max(small.objects, 1))))
            try await inSyncCheck(from: sources[from]!.url, to: large.url, label: "\(from) -> \(large.engine), n = \(records)")
        }
    }

    /// Exchanges between two stores already in sync, every request to either counted.
    private func inSyncCheck(from: String, to: String, label: String) async throws {
        let sourceBackend = RequestCountingBackend(try await openBackend(try StoreLocation(parsing: from), create: false))
        let targetBackend = RequestCountingBackend(try await openBackend(try StoreLocation(parsing: to), create: false))
        let source = Store(backend: sourceBackend, configuration: .init(replica: "bench"))
        let target = Store(backend: targetBackend, configuration: .init(replica: "bench"))
        let report = try await source.exchange(to: target)
        try await source.close()
        try await target.close()
        guard report.alreadyInSync, report.objects == 0 else {
            throw ArborError(.engine, "benchmark check failed: the stores were not found in sync (\(report.objects) objects copied)")
        }
        print(String(format: "exchange in sync %@: %.4f s, %d requests to the source (%@), %d to the target (%@): one round",
                     label, report.seconds, sourceBackend.total, sourceBackend.summary, targetBackend.total, targetBackend.summary))
    }

    /// Commits `changes` random updates to the store at `from` and exchanges them to `to`.
    /// `changes` distinct records each get a value of this `round`'s own, so every change is one.
    private func exchangeAfterChanges(from: String, to: String, changes: Int, round: Int) async throws -> ExchangeReport {
        let source = try Self.open(from, create: false)
        let target = try Self.open(to, create: false)
        var generator = SystemRandomNumberGenerator()
        let count = Int(try await source.head()?.recordCount ?? 0)
        let items = CommitBenchmark.items(count)
        var picked = Set<Int>()
        while picked.count < min(changes, items.count) { picked.insert(Int.random(in: 0..<items.count, using: &generator)) }
        var changeSet = ChangeSet()
        for index in picked {
            var item = items[index]
            item.count = -1 - round
            try changeSet.save(item)
        }
        try await source.commit(changeSet)
        let report = try await source.exchange(to: target)
        try await source.close()
        try await target.close()
        return report
    }

    /// Runs this benchmark binary as a child with `arguments`; returns the numbers it printed.
    func child(_ arguments: [String]) async throws -> [String: Double] {
        settleWrites()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ArborError(.engine, "\(arguments[0]) failed with status \(process.terminationStatus)")
        }
        var numbers = [String: Double]()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "=")
            if parts.count == 2, let value = Double(parts[1]) { numbers[String(parts[0])] = value }
        }
        return numbers
    }

    /// Puts the file system's dirty pages on disk before a measured step starts, so that no
    /// step pays for the write-back of the gigabyte the step before it wrote.
    func settleWrites() {
        sync()
    }

    /// `migrate-child FROM TO`: migrates with verification and prints `key=value` lines.
    static func migrateChild(_ from: String, _ to: String) async throws {
        let sampler = AnonymousMemorySampler()
        let source = try open(from, create: false)
        let target = try open(to, create: true)
        let report = try await source.migrate(to: target)
        try await source.close()
        try await target.close()
        print("copySeconds=\(report.copySeconds)\nverifySeconds=\(report.verifySeconds)\nobjects=\(report.exchange.objects)")
        print("bytes=\(report.exchange.bytes)\npeakMB=\(peakMegabytes())\npeakAnonMB=\(sampler.peakMegabytes)")
    }

    /// `copy-child FROM TO`: copies every object blindly, then the refs; prints `key=value` lines.
    static func copyChild(_ from: String, _ to: String) async throws {
        let source = try open(from, create: false).backend
        let target = try open(to, create: true).backend
        let start = ContinuousClock.now
        // The source's fastest read of everything: its objects in the order it keeps them.
        try await source.enumerateObjects(batchSize: 2_000) { objects in try await target.put(objects) }
        for (name, hash) in try await source.refs() { _ = try await target.compareAndSwap(ref: name, expected: nil, new: hash) }
        print("seconds=\((ContinuousClock.now - start).seconds)\npeakMB=\(peakMegabytes())")
        try await source.close()
        try await target.close()
    }

    /// A status field of this process in megabytes (`VmHWM`, `RssAnon`, …), or -1.
    static func statusMegabytes(_ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return -1 }
        return kilobytes / 1024
    }

    /// This process's peak resident memory, from `VmHWM` in /proc/self/status: the high-water
    /// mark of its own address space. (`getrusage`'s `ru_maxrss` survives `exec` on Linux, so a
    /// child would report its parent's peak.)
    static func peakMegabytes() -> Double { statusMegabytes("VmHWM") }
}

/// Samples this process's anonymous resident memory (`RssAnon`: heap and stacks, not the pages of
/// memory-mapped files such as an LMDB environment) every 10 ms on a thread of its own.
final class AnonymousMemorySampler: Sendable {
    private let peak = Mutex(0.0)

    init() {
        Thread.detachNewThread { [self] in
            while true {
                let current = TransferBenchmark.statusMegabytes("RssAnon")
                self.peak.withLock { $0 = max($0, current) }
                usleep(10_000)
            }
        }
    }

    var peakMegabytes: Double { peak.withLock { $0 } }

    /// Starts a new peak from the current figure.
    func reset() { peak.withLock { $0 = TransferBenchmark.statusMegabytes("RssAnon") } }

    /// Lets the process settle, starts a new peak, and returns the figure it starts from: what
    /// a measurement's peak is taken above.
    func resetToBaseline() -> Double {
        usleep(50_000)
        reset()
        return TransferBenchmark.statusMegabytes("RssAnon")
    }
}
