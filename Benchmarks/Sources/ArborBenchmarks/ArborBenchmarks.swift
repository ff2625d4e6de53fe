import Arbor
import ArborJSON
import Foundation

@main
struct ArborBenchmarks {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        // Children of the transfer benchmark, run in a process of their own to measure its memory.
        if arguments.count == 3, ["migrate-child", "copy-child", "build", "verify-child", "gc-child", "repair-child"].contains(arguments[0]) {
            do {
                if arguments[0] == "repair-child" { try await IntegrityBenchmark.repairChild(arguments[1], from: arguments[2]); exit(0) }
                if arguments[0] == "verify-child" { try await IntegrityBenchmark.verifyChild(arguments[1]); exit(0) }
                if arguments[0] == "gc-child" { try await IntegrityBenchmark.gcChild(arguments[1]); exit(0) }
                if arguments[0] == "build", let count = Int(arguments[2]) {
                    // `build URL RECORDS`: a store to profile with, as the transfer benchmark builds it.
                    let store = try TransferBenchmark.open(arguments[1], create: true)
                    _ = try await CommitBenchmark.commit(CommitBenchmark.items(count), in: store, batch: TransferBenchmark.defaultCommitSize)
                    try await store.close()
                } else if arguments[0] == "migrate-child" {
                    try await TransferBenchmark.migrateChild(arguments[1], arguments[2])
                } else {
                    try await TransferBenchmark.copyChild(arguments[1], arguments[2])
                }
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("error: \(error)\n".utf8))
                exit(1)
            }
        }
        var records = 100_000
        let recordsGiven = arguments.contains("--records")
        var batch = 1_000
        var changes = 100
        if let index = arguments.firstIndex(of: "--changes"), index + 1 < arguments.count, let value = Int(arguments[index + 1]) {
            changes = value
            arguments.removeSubrange(index...(index + 1))
        }
        if let index = arguments.firstIndex(of: "--records"), index + 1 < arguments.count, let value = Int(arguments[index + 1]) {
            records = value
            arguments.removeSubrange(index...(index + 1))
        }
        if let index = arguments.firstIndex(of: "--batch"), index + 1 < arguments.count, let value = Int(arguments[index + 1]) {
            batch = value
            arguments.removeSubrange(index...(index + 1))
        }
        var adapters = ["memory", "json"]
        if let index = arguments.firstIndex(of: "--adapters"), index + 1 < arguments.count {
            adapters = arguments[index + 1].split(separator: ",").map(String.init)
            arguments.removeSubrange(index...(index + 1))
        }
        var reads = 100_000
        if let index = arguments.firstIndex(of: "--reads"), index + 1 < arguments.count, let value = Int(arguments[index + 1]) {
            reads = value
            arguments.removeSubrange(index...(index + 1))
        }
        var jsonRecords = 100_000
        if let index = arguments.firstIndex(of: "--json-records"), index + 1 < arguments.count, let value = Int(arguments[index + 1]) {
            jsonRecords = value
            arguments.removeSubrange(index...(index + 1))
        }
        var readStore: String?
        if let index = arguments.firstIndex(of: "--store"), index + 1 < arguments.count {
            readStore = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        var readTasks: String?
        if let index = arguments.firstIndex(of: "--tasks"), index + 1 < arguments.count {
            readTasks = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        var orderedIDs = false
        if let index = arguments.firstIndex(of: "--ids") {
            guard index + 1 < arguments.count, ["ordered", "random"].contains(arguments[index + 1]) else {
                print("--ids takes ordered or random")
                exit(2)
            }
            orderedIDs = arguments[index + 1] == "ordered"
            arguments.removeSubrange(index...(index + 1))
        }
        let buildReadStore = arguments.contains("--build")
        arguments.removeAll { $0 == "--build" }
        let conflicting = arguments.contains("--conflicts")
        arguments.removeAll { $0 == "--conflicts" }
        let suites = arguments.isEmpty ? ["commit"] : arguments
        do {
            for suite in suites {
                switch suite {
                case "phases":
                    try await PhaseProbe.run(records: records, batch: batch, orderedIDs: orderedIDs)
                case "commit":
                    let benchmark = CommitBenchmark(records: records, batch: batch)
                    var seconds = [String: Double]()
                    if adapters.contains("memory") {
                        seconds["memory"] = try await benchmark.run(on: MemoryBackend(), label: "memory")
                    }
                    if adapters.contains("json") {
                        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-bench-\(UUID().uuidString)").path
                        defer { try? FileManager.default.removeItem(atPath: folder) }
                        seconds["json"] = try await benchmark.run(on: try JSONBackend.create(.init(path: folder)), label: "json")
                    }
                    if let memory = seconds["memory"] {
                        let scaled = memory * 100_000 / Double(records)
                        print(String(format: "target: memory under 2 s per 100,000 records -> %@ (%.2f s per 100,000)", scaled < 2 ? "met" : "missed", scaled))
                        if let json = seconds["json"] { print(String(format: "json/memory ratio: %.1fx", json / memory)) }
                    }
                case "postgres":
                    guard let url = ProcessInfo.processInfo.environment["ARBOR_BENCH_POSTGRES_URL"], !url.isEmpty else {
                        print("the postgres benchmark needs ARBOR_BENCH_POSTGRES_URL=postgres://user:password@host:port/database; for a throwaway server: eval \"$(bash scripts/postgres-fixture.sh start)\" and use $ARBOR_TEST_POSTGRES_URL")
                        exit(2)
                    }
                    try await PostgresBenchmark(records: records, reads: reads).run(url: url)
                case "merge":
                    for engine in adapters == ["memory", "json"] ? ["memory"] : adapters {
                        // `--records N --changes K`: one store of N records, K changes a side.
                        try await MergeBenchmark(
                            sizes: recordsGiven ? [records] : [10_000, 1_000_000], changes: changes, engine: engine,
                            conflicting: conflicting).run()
                    }
                case "sync":
                    try await SyncBenchmark().run()
                case "heads":
                    try await HeadsBenchmark(heads: records).run()
                case "history":
                    for engine in adapters == ["memory", "json"] ? ["sqlite"] : adapters {
                        guard ["sqlite", "lmdb", "json", "postgres"].contains(engine) else {
                            print("history runs on sqlite, lmdb, json and postgres (with ARBOR_BENCH_POSTGRES_URL)")
                            exit(2)
                        }
                        try await HistoryBenchmark(versions: records, engine: engine).run()
                    }
                case "transfer":
                    try await transferBenchmark(adapters: adapters, records: records, jsonRecords: jsonRecords, batch: batch).run()
                case "integrity":
                    try await IntegrityBenchmark(transfer: transferBenchmark(adapters: adapters, records: records, jsonRecords: jsonRecords, batch: batch)).run()
                case "reads":
                    // `reads --store URL [--build]`: --build makes the store first; later runs read it.
                    guard let readStore else {
                        print("reads needs --store URL (and --build the first time)")
                        exit(2)
                    }
                    let tasks = max(readTasks.flatMap { Int($0) } ?? 1, 1)
                    try await ReadBenchmark(url: readStore, records: records, reads: reads, build: buildReadStore, tasks: tasks).run()
                case "import":
                    // `import --records N --batch B [--adapters ...] [--ids ordered]`: one commit of all with B = N.
                    let engines = adapters == ["memory", "json"] ? ["sqlite", "lmdb"] : adapters
                    try await ImportBenchmark(records: records, batch: batch, engines: engines, orderedIDs: orderedIDs).run()
                case "compaction":
                    // `compaction --records N [--adapters sqlite,lmdb]`: a whole history kept as deltas after the fact.
                    let engines = adapters == ["memory", "json"] ? ["sqlite", "lmdb"] : adapters
                    try await CompactionBenchmark(records: records, engines: engines).run()
                case "engines":
                    let engines = adapters == ["memory", "json"] ? ["sqlite", "lmdb"] : adapters
                    try await EngineBenchmark(records: records, reads: reads, orderedIDs: orderedIDs).run(engines: engines)
                default:
                    print("unknown benchmark \(suite); available: commit, phases, engines, compaction, import, reads, merge, sync, history, heads, postgres, transfer, integrity")
                    exit(2)
                }
            }
        } catch {
            print("error: \(error)")
            exit(1)
        }
    }

    /// The transfer (and integrity) benchmark's setup: SQLite, LMDB, PostgreSQL when
    /// ARBOR_BENCH_POSTGRES_URL is set, and JSON, unless `--adapters` names others.
    static func transferBenchmark(adapters: [String], records: Int, jsonRecords: Int, batch: Int) -> TransferBenchmark {
        let postgres = ProcessInfo.processInfo.environment["ARBOR_BENCH_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
        var engines = adapters == ["memory", "json"] ? ["sqlite", "lmdb", "json"] : adapters
        if postgres != nil && adapters == ["memory", "json"] { engines.insert("postgres", at: 2) }
        var benchmark = TransferBenchmark(records: records, jsonRecords: min(records, jsonRecords), engines: engines, postgresURL: postgres)
        if CommandLine.arguments.contains("--batch") { benchmark.commitSize = batch }
        return benchmark
    }
}
