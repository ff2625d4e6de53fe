@testable import ArborSQLite
import CSQLite
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Runs raw SQL against a database file, as another program (or a saboteur) would.
func rawSQLite(_ path: String, _ sql: String, blobs: [[UInt8]] = []) throws {
    var handle: OpaquePointer?
    guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let handle else {
        throw ArborError(.io, "cannot open \(path) with raw sqlite3")
    }
    defer { sqlite3_close_v2(handle) }
    sqlite3_busy_timeout(handle, 5_000)
    var statement: OpaquePointer?
    guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
        throw ArborError(.engine, "raw sqlite3: \(String(cString: sqlite3_errmsg(handle)))")
    }
    defer { sqlite3_finalize(statement) }
    for (index, blob) in blobs.enumerated() {
        _ = blob.withUnsafeBytes { sqlite3_bind_blob(statement, Int32(index + 1), $0.baseAddress, Int32($0.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self)) }
    }
    while true {
        let result = sqlite3_step(statement)
        if result == SQLITE_DONE { break }
        guard result == SQLITE_ROW else { throw ArborError(.engine, "raw sqlite3: \(String(cString: sqlite3_errmsg(handle)))") }
    }
}

/// A path under which nothing can be created. As root, `chmod 0555` does not stop writes, so
/// root gets a path under a regular file instead (ENOTDIR); otherwise a read-only folder.
func unwritableFolder() throws -> (path: String, cleanup: () -> Void) {
    if getuid() == 0 {
        let file = temporaryPath("plain-file")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: file))
        return (file, { removeItem(file) })
    }
    let folder = temporaryPath("read-only")
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    chmod(folder, 0o555)
    return (folder, { chmod(folder, 0o755); removeItem(folder) })
}

func randomBytes(_ count: Int) -> Data {
    var generator = SeededGenerator(seed: 42)
    return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
}

/// The SQLite adapter: a single file, that refuses what is not its own and reports damage.
@Suite struct SQLiteBackendTests {
    func withPath(_ body: (String) async throws -> Void) async throws {
        let path = temporaryPath("sqlite-store")
        defer { for suffix in ["", "-wal", "-shm", "-journal"] { removeItem(path + suffix) } }
        try await body(path)
    }

    func fresh(_ path: String) throws -> Store {
        Store(backend: try SQLiteBackend.open(.init(path: path)), configuration: .init(nodeCacheCapacity: 0))
    }



    /// One batch larger than the checkpoint interval grows the write-ahead log past it; once
    /// checkpointed, the next write cuts the log back to the limit, while the store stays open
    /// (SQLite keeps a log at its largest until the last connection closes, without one).
    @Test func theLogIsCutBackAfterABatchLargerThanItsLimit() async throws {
        try await withPath { path in
            let backend = try SQLiteBackend.create(.init(path: path))
            let objects = (0..<80).map { index -> [UInt8] in
                var bytes = [UInt8](repeating: UInt8(index), count: 1 << 20)
                bytes[0] = 0xFF
                return bytes
            }
            try await backend.put(objects.map { (Hash.of($0), $0) })
            let logBytes = { ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0 }
            #expect(logBytes() > SQLiteBackend.logSizeLimit, "the batch went through the log")
            let small: [UInt8] = [1, 2, 3]
            try await backend.put([(Hash.of(small), small)])
            #expect(logBytes() <= SQLiteBackend.logSizeLimit, "the log is \(logBytes()) bytes")
            let read = try await backend.get([Hash.of(objects[79]), Hash.of(small)])
            #expect(read[Hash.of(objects[79])] == objects[79] && read[Hash.of(small)] == small)
            try await backend.close()
        }
    }

    @Test func missingAndUnwritableFolders() throws {
        let missing = "/nonexistent-\(UUID())/store.sqlite"
        #expect { try SQLiteBackend.create(.init(path: missing)) } throws: { error in
            (error as? ArborError)?.code == .notFound && "\(error)".contains(missing) && (error as? ArborError)?.backend == "sqlite"
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
        #expect { try SQLiteBackend.open(.init(path: missing)) } throws: { ($0 as? ArborError)?.code == .notFound }

        let (folder, cleanup) = try unwritableFolder()
        defer { cleanup() }
        let path = folder + "/store.sqlite"
        // As root, the path runs through a file (ENOTDIR); otherwise a folder this user may not write.
        #expect { try SQLiteBackend.create(.init(path: path)) } throws: { error in
            guard let error = error as? ArborError, "\(error)".contains(path) else { return false }
            return getuid() == 0 ? error.code == .notFound && error.message.contains("is a file, not a folder") : error.code == .permissionDenied
        }
        #expect(!FileManager.default.fileExists(atPath: path), "a failed create leaves nothing behind")
    }

    /// What a create killed before its schema landed leaves (an empty file, or a database in WAL
    /// mode with no tables) is no store yet: opening says so (not found), and a create or a
    /// migration takes it over, so running the command again finishes the job.
    @Test func anInterruptedCreateIsFinishedByTheNext() async throws {
        for walHeader in [false, true] {
            let path = temporaryPath("unfinished") + ".sqlite"
            defer { for suffix in ["", "-wal", "-shm"] { removeItem(path + suffix) } }
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            if walHeader {
                var db: OpaquePointer?
                #expect(sqlite3_open(path, &db) == SQLITE_OK)
                #expect(sqlite3_exec(db, "PRAGMA journal_mode = WAL", nil, nil, nil) == SQLITE_OK)
                sqlite3_close(db)
            }
            #expect { try SQLiteBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .notFound }
            let store = Store(backend: try SQLiteBackend.create(.init(path: path)))
            let version = try await store.save(Task(id: "t", title: "kept", done: false))
            try await store.close()
            #expect(try await Store(backend: try SQLiteBackend.open(.init(path: path))).head()?.id == version.id)
            // A database with anything in it is not taken over.
            #expect { try SQLiteBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
        }
        let foreign = temporaryPath("foreign") + ".sqlite"
        defer { removeItem(foreign) }
        var db: OpaquePointer?
        #expect(sqlite3_open(foreign, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "CREATE TABLE mine (x)", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        #expect { try SQLiteBackend.create(.init(path: foreign)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
        #expect { try SQLiteBackend.open(.init(path: foreign)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
    }

    @Test func filesOfOtherKindsAreRefused() async throws {
        try await withPath { path in
            // Random bytes: not a SQLite database at all.
            try randomBytes(8192).write(to: URL(fileURLWithPath: path))
            #expect { try SQLiteBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains(path) && "\(error)".contains("not a SQLite database")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == randomBytes(8192), "the file is left as it was")
            removeItem(path)

            // A SQLite database of another program.
            try rawSQLite(path, "CREATE TABLE contacts (name TEXT, phone TEXT)")
            #expect { try SQLiteBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains("not an Arbor store")
            }
            #expect { try SQLiteBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            try rawSQLite(path, "INSERT INTO contacts VALUES ('still', 'here')")
            removeItem(path)

            // A folder is not a database file.
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            #expect { try SQLiteBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
            removeItem(path)
        }
    }

    @Test func newerFormatVersionIsRefused() async throws {
        try await withPath { path in
            try await SQLiteBackend.create(.init(path: path)).close()
            try rawSQLite(path, "UPDATE arbor_meta SET value = '4' WHERE key = 'version'")
            #expect { try SQLiteBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains("version 4")
            }
            // 0, and 2: the development layout of deltas in a table of their own.
            for version in ["0", "2"] {
                try rawSQLite(path, "UPDATE arbor_meta SET value = '\(version)' WHERE key = 'version'")
                #expect { try SQLiteBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
            }
            try rawSQLite(path, "UPDATE arbor_meta SET value = 'something-else' WHERE key = 'format'")
            #expect { try SQLiteBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
        }
    }

    /// Stores created before objects moved to a rowid table keep a `WITHOUT ROWID` table keyed by
    /// the hash; every statement names the hash only, so they open and work as before.
    @Test func storesWithTheEarlierObjectsTableStillWork() async throws {
        try await withPath { path in
            try await SQLiteBackend.create(.init(path: path)).close()
            try rawSQLite(path, "DROP TABLE objects")
            try rawSQLite(path, "CREATE TABLE objects (hash BLOB PRIMARY KEY, bytes BLOB NOT NULL) WITHOUT ROWID")
            let store = try fresh(path)
            var changes = ChangeSet()
            for number in 0..<300 { try changes.save(Task(id: "t\(number)", title: "task \(number)", done: false)) }
            try await store.commit(changes)
            try await store.save(Task(id: "t7", title: "task 7", done: true))
            try await store.close()

            let reopened = try fresh(path)
            #expect(try await reopened.values(Task.self).count == 300)
            #expect(try await reopened.value(Task.self, id: "t7")?.done == true)
            #expect(try await reopened.verify().isIntact)
            try await reopened.close()
        }
    }

    @Test func corruptObjectIsNamed() async throws {
        try await withPath { path in
            let store = Store(backend: try SQLiteBackend.create(.init(path: path)))
            let version = try await store.save(Task(id: "t", title: "hello", done: false))
            try await store.close()
            // Overwrite the index root's bytes behind Arbor's back.
            try rawSQLite(path, "UPDATE objects SET bytes = ?1 WHERE hash = ?2", blobs: [Array("tampered".utf8), version.root.bytes])
            await #expect { try await fresh(path).value(Task.self, id: "t") } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains(version.root.hex)
            }
        }
    }

    @Test func storesOfTheSameBytesOnSQLiteAndMemoryAgree() async throws {
        try await withPath { path in
            let sqlite = Store(backend: try SQLiteBackend.create(.init(path: path)), configuration: .init(replica: "r", clock: { Date(timeIntervalSince1970: 1) }))
            let memory = Store(backend: MemoryBackend(), configuration: .init(replica: "r", clock: { Date(timeIntervalSince1970: 1) }))
            let a = try await sqlite.save(Task(id: "t", title: "same", done: false))
            let b = try await memory.save(Task(id: "t", title: "same", done: false))
            #expect(a.id == b.id)
            #expect(try await sqlite.backend.allHashes() == memory.backend.allHashes())
        }
    }

    /// The writing connection caches 32 MB of pages unless told otherwise, on create and on open;
    /// sizes below 1 KiB or beyond SQLite's 32-bit count are clamped (not turned into 0, which
    /// SQLite would read from an overflowing number); a store writes and reads the same with
    /// SQLite's smallest cache.
    @Test func theWritersPageCacheIsConfigured() async throws {
        try await withPath { path in
            let created = try SQLiteBackend.create(.init(path: path))
            #expect(try await created.effectiveWriterCacheSize() == 32 << 20)
            try await created.close()
            let huge = try SQLiteBackend.open(.init(path: path, writerCacheSize: .max))
            #expect(try await huge.effectiveWriterCacheSize() == Int(Int32.max) * 1024)
            try await huge.close()
            let small = try SQLiteBackend.open(.init(path: path, writerCacheSize: -5))
            #expect(try await small.effectiveWriterCacheSize() == 1024)
            let objects = (0..<200).map { index in
                let bytes = Array("object \(index) ".utf8) + [UInt8](repeating: UInt8(index % 251), count: 5_000)
                return (hash: Hash.of(bytes), bytes: bytes)
            }
            try await small.put(objects)
            #expect(try await small.get(objects.map(\.hash)).count == objects.count)
            try await small.close()
            let reopened = try SQLiteBackend.open(.init(path: path, writerCacheSize: 1 << 20))
            #expect(try await reopened.effectiveWriterCacheSize() == 1 << 20)
            #expect(try await reopened.contains(objects.map(\.hash)).count == objects.count)
            try await reopened.close()
        }
    }

    /// A memory map is off unless asked for, applies to the connection that reads objects, and
    /// reads the same objects as `pread` does (of a file written without it).
    @Test func aMemoryMapIsOptInAndReadsTheSameObjects() async throws {
        try await withPath { path in
            let objects = (0..<500).map { index in
                let bytes = Array("object \(index) ".utf8) + [UInt8](repeating: UInt8(index % 251), count: 3_000)
                return (hash: Hash.of(bytes), bytes: bytes)
            }
            let plain = try SQLiteBackend.create(.init(path: path))
            try await plain.put(objects)
            #expect(try plain.effectiveMemoryMapSize() == 0)
            try await plain.close()

            let mapped = try SQLiteBackend.open(.init(path: path, memoryMapSize: 64 << 20))
            #expect(try mapped.effectiveMemoryMapSize() == 64 << 20)
            let read = try await mapped.get(objects.map(\.hash))
            #expect(read.count == objects.count)
            #expect(objects.allSatisfy { read[$0.hash] == $0.bytes })
            #expect(try await mapped.get([objects[7].hash]) == [objects[7].hash: objects[7].bytes], "a single read, without a transaction")
            let more = (hash: Hash.of(Array("one more".utf8)), bytes: Array("one more".utf8))
            try await mapped.put([more])
            #expect(try await mapped.contains([more.hash, objects[0].hash]) == [more.hash, objects[0].hash])
            try await mapped.close()
        }
    }

    @Test func aReadDoesNotWaitForAnotherThreadsReadAndCloseClosesEveryConnection() async throws {
        try await withPath { path in
            let backend = try SQLiteBackend.create(.init(path: path))
            let objects = (0..<3).map { index in (hash: Hash.of(Array("object \(index)".utf8)), bytes: Array("object \(index)".utf8)) }
            try await backend.put(objects)
            // Threads of their own, not the Swift pool's: one holds a reading connection (inside
            // an in-place read) until released; meanwhile another reads.
            let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), read = DispatchSemaphore(value: 0)
            let lent = Mutex<[[UInt8]?]>([])
            Thread {
                let bytes = try? backend.withObjectBytes(objects[0].hash) { bytes in
                    holding.signal()
                    release.wait()
                    return bytes.map { [UInt8]($0) }
                }
                lent.withLock { $0.append(bytes ?? nil) }
            }.start()
            try #require(holding.wait(timeout: .now() + 20) == .success, "the first read never started")
            Thread {
                let bytes = try? backend.withObjectBytes(objects[1].hash) { $0.map { [UInt8]($0) } }
                lent.withLock { $0.append(bytes ?? nil) }
                read.signal()
            }.start()
            // With one reading connection the second read would wait for the release: time out.
            let finished = read.wait(timeout: .now() + 20) == .success
            release.signal()
            if !finished { read.wait() }
            #expect(finished, "a read waited for another thread's read to end")
            while lent.withLock({ $0.count }) < 2 { try await _Concurrency.Task.sleep(for: .milliseconds(1)) }
            #expect(lent.withLock { $0 } == [objects[1].bytes, objects[0].bytes])
            try await backend.close()
            await #expect(throws: ArborError.self) { try await backend.get([objects[1].hash]) }
            #expect(backend.readers.count == SQLiteBackend.readerLimit)
            for (index, reader) in backend.readers.enumerated() {
                #expect(reader.state.withLock { $0.isClosed && $0.connection == nil }, "reading connection \(index) is closed")
            }
            #expect(throws: ArborError.self) { try backend.withObjectBytes(objects[2].hash) { _ in () } }
        }
    }
}
