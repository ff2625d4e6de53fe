import Arbor
import ArborPostgres
import Foundation

/// Arbor on PostgreSQL against the raw engine, side by side on one server:
/// - raw floor: `records` rows (32-byte random key, 100-byte value) by one `COPY … (FORMAT binary)`
///   into a plain table with a primary key, then `reads` random point reads in batches of 1,000
///   (`k = ANY($1)`);
/// - Arbor: `records` records committed in commits of `commitSize` through the Store API, then
///   `reads` random point reads at the head in batches of 1,000 (`Snapshot.records(_:)`);
/// - the object write paths compared: `INSERT … SELECT FROM unnest($1, $2)` (what the adapter
///   does) against COPY into a temporary table followed by `INSERT … SELECT`.
///
/// Each part runs in a database of its own, created on the server of `url` and dropped afterwards.
struct PostgresBenchmark {
    var records: Int
    var commitSize = 10_000
    var reads = 100_000
    var readBatch = 1_000

    func run(url: String) async throws {
        let admin = try PostgresSession(url: url)
        print("postgres: server \(admin.redactedURL), \(records) records, commits of \(commitSize), \(reads) point reads in batches of \(readBatch)")
        let suffix = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        let rawDatabase = "arbor_bench_raw_\(suffix)", arborDatabase = "arbor_bench_store_\(suffix)"
        try admin.execute("CREATE DATABASE \(rawDatabase)")
        try admin.execute("CREATE DATABASE \(arborDatabase)")
        defer {
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(rawDatabase) WITH (FORCE)")
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(arborDatabase) WITH (FORCE)")
        }
        let raw = try rawFloor(url: Self.url(url, database: rawDatabase))
        // The raw phase's WAL is flushed now, not by a checkpoint that lands in Arbor's commits.
        Self.checkpoint(admin)
        let arbor = try await arborRun(url: Self.url(url, database: arborDatabase))
        print(String(format: "ratio   Arbor/raw: write %.2fx (target 1.5x; %.2fx against COPYs of %d rows), point reads %.2fx (target 2x), size on disk %.2fx (target 2x)",
                     arbor.write / raw.write, arbor.write / raw.batchedWrite, commitSize, arbor.read / raw.read, Double(arbor.bytes) / Double(raw.bytes)))
        try writePaths(url: Self.url(url, database: rawDatabase))
    }

    /// A `CHECKPOINT` between phases, so that one phase's WAL is not flushed during the next; it
    /// needs a superuser or `pg_checkpoint`, and without them the run says so and goes on.
    static func checkpoint(_ session: PostgresSession, sayingWhenRefused: Bool = true) {
        do {
            try session.execute("CHECKPOINT")
        } catch {
            if sayingWhenRefused { print("note: no CHECKPOINT between phases (\(error)); a checkpoint may land in the next phase") }
        }
    }

    static func url(_ url: String, database: String) -> String {
        var components = URLComponents(string: url)!
        components.path = "/" + database
        return components.string!
    }

    static func megabytes(_ bytes: Int64) -> String { String(format: "%.1f MB", Double(bytes) / 1_048_576) }

    func rawFloor(url: String) throws -> (write: Double, read: Double, bytes: Int64, batchedWrite: Double) {
        let session = try PostgresSession(url: url)
        try session.execute("CREATE TABLE raw (k bytea PRIMARY KEY, v bytea NOT NULL)")
        try session.execute("CREATE TABLE raw_batched (k bytea PRIMARY KEY, v bytea NOT NULL)")
        var generator = SystemRandomNumberGenerator()
        var keys = [[UInt8]]()
        keys.reserveCapacity(records)
        for _ in 0..<records { keys.append((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
        let value = [UInt8](repeating: 0x61, count: 100)

        // PGCOPY binary: signature, flags, header extension; per row the field count and each
        // field's length and bytes; -1 at the end. Sent in chunks of about 1 MB, built before
        // the timer starts, as Arbor's values are made before they are committed.
        func copyChunks(_ rows: ArraySlice<[UInt8]>) -> [[UInt8]] {
            var chunks = [[UInt8]]()
            var chunk: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
            for key in rows {
                chunk += [0, 2, 0, 0, 0, 32]
                chunk += key
                chunk += [0, 0, 0, 100]
                chunk += value
                if chunk.count >= 1 << 20 { chunks.append(chunk); chunk.removeAll(keepingCapacity: true) }
            }
            chunk += [0xFF, 0xFF]
            chunks.append(chunk)
            return chunks
        }
        // The same rows in COPYs of `commitSize` rows, each its own transaction, as Arbor commits.
        let batches = stride(from: 0, to: keys.count, by: commitSize).map { copyChunks(keys[$0..<min($0 + commitSize, keys.count)]) }
        let batchedStart = ContinuousClock.now
        for chunks in batches { try session.copyIn("COPY raw_batched (k, v) FROM STDIN WITH (FORMAT binary)", chunks: chunks) }
        let batchedWrite = (ContinuousClock.now - batchedStart).seconds
        try session.execute("DROP TABLE raw_batched")
        Self.checkpoint(session, sayingWhenRefused: false)

        let chunks = copyChunks(keys[...])
        let start = ContinuousClock.now
        try session.copyIn("COPY raw (k, v) FROM STDIN WITH (FORMAT binary)", chunks: chunks)
        let write = (ContinuousClock.now - start).seconds

        let readStart = ContinuousClock.now
        // A key picked twice in one batch is one row: each batch must return its distinct keys.
        var found = 0, distinct = 0
        var remaining = reads
        while remaining > 0 {
            let batch = (0..<min(readBatch, remaining)).map { _ in keys[Int.random(in: 0..<keys.count, using: &generator)] }
            found += try session.execute("SELECT k, v FROM raw WHERE k = ANY($1::bytea[])", [.byteaArray(batch)]).count
            distinct += Set(batch).count
            remaining -= batch.count
        }
        let read = (ContinuousClock.now - readStart).seconds
        guard found == distinct else { throw ArborError(.engine, "raw reads found \(found) of \(distinct) keys") }
        try session.execute("VACUUM ANALYZE raw")
        let bytes = try session.execute("SELECT pg_total_relation_size('raw')").integer(0, 0) ?? 0
        print(String(format: "raw     COPY binary %9d rows: %8.3f s  %10.0f rows/s (in COPYs of %d rows: %.3f s)", records, write, Double(records) / write, commitSize, batchedWrite))
        print(String(format: "raw     %9d point reads (batches of %d): %8.3f s  %10.0f reads/s", reads, readBatch, read, Double(reads) / read))
        print("raw     size on disk: \(Self.megabytes(bytes))")
        return (write, read, bytes, batchedWrite)
    }

    func arborRun(url: String) async throws -> (write: Double, read: Double, bytes: Int64) {
        let backend = try await PostgresBackend.create(.init(url: url))
        let store = Store(backend: backend, configuration: .init(replica: "bench"))
        let items = CommitBenchmark.items(records)
        let (write, head) = try await CommitBenchmark.commit(items, in: store, batch: commitSize)

        // A fresh store object, so that the node cache starts cold like the raw side's reads.
        let reader = Store(backend: backend, configuration: .init(replica: "bench"))
        var generator = SystemRandomNumberGenerator()
        let readStart = ContinuousClock.now
        let snapshot = try await reader.snapshot(at: head.id)
        var found = 0, distinct = 0
        var remaining = reads
        while remaining > 0 {
            let keys = CommitBenchmark.randomKeys(min(readBatch, remaining), of: items, using: &generator)
            found += try await snapshot.records(keys).count
            distinct += Set(keys).count
            remaining -= keys.count
        }
        let read = (ContinuousClock.now - readStart).seconds
        guard found == distinct else { throw ArborError(.engine, "Arbor reads found \(found) of \(distinct) records") }

        let session = try PostgresSession(url: url)
        try session.execute("VACUUM ANALYZE arbor_objects")
        let bytes = try session.execute(
            "SELECT pg_total_relation_size('arbor_objects') + pg_total_relation_size('arbor_refs') + pg_total_relation_size('arbor_meta')"
        ).integer(0, 0) ?? 0
        let objects = try session.execute("SELECT count(*) FROM arbor_objects").integer(0, 0) ?? 0
        print(String(format: "arbor   commit %9d records in commits of %d: %8.3f s  %10.0f records/s", records, commitSize, write, Double(records) / write))
        print(String(format: "arbor   %9d point reads at the head (batches of %d): %8.3f s  %10.0f reads/s", reads, readBatch, read, Double(reads) / read))
        print("arbor   size on disk: \(Self.megabytes(bytes)) (\(objects) objects, all versions)")
        try await store.close()
        return (write, read, bytes)
    }

    /// The two ways to write a batch of objects that may exist already, measured on the same data.
    func writePaths(url: String) throws {
        let session = try PostgresSession(url: url)
        let count = min(records, 100_000), batch = 10_000
        let objects = (0..<count).map { index -> (hash: Hash, bytes: [UInt8]) in
            let bytes = Array("object \(index) with some payload to make it about a hundred bytes long, like an index entry".utf8)
            return (Hash.of(bytes), bytes)
        }.sorted { $0.hash < $1.hash }
        var results = [String]()
        for path in ["unnest", "copy"] {
            try session.execute("DROP TABLE IF EXISTS objects_\(path)")
            try session.execute("CREATE TABLE objects_\(path) (hash bytea PRIMARY KEY, bytes bytea NOT NULL)")
            let start = ContinuousClock.now
            // Every batch twice: the second time all objects exist (the idempotent case).
            for round in 0..<2 {
                for offset in stride(from: 0, to: count, by: batch) {
                    let slice = objects[offset..<min(offset + batch, count)]
                    if path == "unnest" {
                        try session.execute(
                            "INSERT INTO objects_unnest (hash, bytes) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (hash) DO NOTHING",
                            [.byteaArray(slice.map(\.hash.bytes)), .byteaArray(slice.map(\.bytes))])
                    } else {
                        var data: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]
                        for object in slice {
                            data += [0, 2, 0, 0, 0, 32]
                            object.hash.append(to: &data)
                            withUnsafeBytes(of: Int32(object.bytes.count).bigEndian) { data += $0 }
                            data += object.bytes
                        }
                        data += [0xFF, 0xFF]
                        try session.execute("BEGIN")
                        try session.execute("CREATE TEMPORARY TABLE incoming (hash bytea, bytes bytea) ON COMMIT DROP")
                        try session.copyIn("COPY incoming (hash, bytes) FROM STDIN WITH (FORMAT binary)", chunks: [data])
                        try session.execute("INSERT INTO objects_copy (hash, bytes) SELECT hash, bytes FROM incoming ORDER BY hash ON CONFLICT (hash) DO NOTHING")
                        try session.execute("COMMIT")
                    }
                }
                _ = round
            }
            let seconds = (ContinuousClock.now - start).seconds
            results.append(String(format: "%@ %.3f s", path, seconds))
        }
        print("object batch writes (\(count) objects of ~100 bytes in batches of \(batch), each batch written twice): " + results.joined(separator: ", "))
    }
}
