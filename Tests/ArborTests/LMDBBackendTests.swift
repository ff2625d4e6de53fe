@testable import ArborLMDB
import CLMDB
import Foundation
import Testing
@testable import Arbor

/// Puts `value` at `key` in the named database `database` (`nil`: the main one) of the LMDB
/// environment at `path`, with raw LMDB calls, as another program (or a saboteur) would. The
/// environment must not be open in this process (LMDB forbids opening one twice).
func rawLMDBPut(_ path: String, database: String?, key: [UInt8], value: [UInt8]) throws {
    var env: OpaquePointer?
    guard mdb_env_create(&env) == 0, let env else { throw ArborError(.engine, "mdb_env_create failed") }
    defer { mdb_env_close(env) }
    mdb_env_set_maxdbs(env, 8)
    mdb_env_set_mapsize(env, 16 << 20)
    var code = mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600)
    guard code == 0 else { throw ArborError(.engine, "mdb_env_open: \(String(cString: mdb_strerror(code)))") }
    var txn: OpaquePointer?
    code = mdb_txn_begin(env, nil, 0, &txn)
    guard code == 0, let txn else { throw ArborError(.engine, "mdb_txn_begin: \(String(cString: mdb_strerror(code)))") }
    var dbi: MDB_dbi = 0
    code = mdb_dbi_open(txn, database, UInt32(MDB_CREATE), &dbi)
    guard code == 0 else {
        mdb_txn_abort(txn)
        throw ArborError(.engine, "mdb_dbi_open: \(String(cString: mdb_strerror(code)))")
    }
    var keyBytes = key
    var valueBytes = value
    code = keyBytes.withUnsafeMutableBytes { k in
        valueBytes.withUnsafeMutableBytes { v in
            var keyValue = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var dataValue = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
            return mdb_put(txn, dbi, &keyValue, &dataValue, 0)
        }
    }
    guard code == 0 else {
        mdb_txn_abort(txn)
        throw ArborError(.engine, "mdb_put: \(String(cString: mdb_strerror(code)))")
    }
    code = mdb_txn_commit(txn)
    guard code == 0 else { throw ArborError(.engine, "mdb_txn_commit: \(String(cString: mdb_strerror(code)))") }
}

#if os(Linux)
private let isLinux = true
#else
private let isLinux = false
#endif

/// The LMDB adapter: a folder with LMDB's files, that refuses what is not its own, reports
/// damage and grows its map instead of failing.
@Suite struct LMDBBackendTests {
    func withPath(_ body: (String) async throws -> Void) async throws {
        let path = temporaryPath("lmdb-store")
        defer { removeItem(path) }
        try await body(path)
    }

    func fresh(_ path: String) throws -> Store {
        Store(backend: try LMDBBackend.open(.init(path: path)), configuration: .init(nodeCacheCapacity: 0))
    }


    @Test func twoBackendsOnOneFolderShareTheEnvironment() async throws {
        try await withPath { path in
            let first = try LMDBBackend.create(.init(path: path))
            let second = try LMDBBackend.open(.init(path: path))
            #expect(try await first.compareAndSwap(ref: "heads", expected: nil, new: Hash.of([1])))
            #expect(try await second.ref("heads") == Hash.of([1]))
            try await first.close()
            // The environment stays open for the second backend.
            #expect(try await second.ref("heads") == Hash.of([1]))
            await #expect { try await first.refs() } throws: { ($0 as? ArborError)?.code == .closed }
            try await second.close()
        }
    }


    /// One environment per folder in a process, also when the folder is reached after a move
    /// or by two creators at once: LMDB forbids opening an environment twice in one process (a
    /// second open resets the lock file the first one relies on).
    @Test func aMovedFolderOrARacingCreatorSharesTheOpenEnvironment() async throws {
        try await withPath { path in
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            let outcomes = await withTaskGroup(of: Result<LMDBBackend, ArborError>.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        do { return .success(try LMDBBackend.create(.init(path: path))) } catch { return .failure(error as! ArborError) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let created = outcomes.compactMap { try? $0.get() }
            #expect(created.count == 1)
            for case .failure(let error) in outcomes { #expect(error.code == .alreadyExists, "\(error)") }
            let first = try #require(created.first)
            #expect(try await first.compareAndSwap(ref: "heads", expected: nil, new: Hash.of([2])))

            let moved = path + "-moved"
            defer { removeItem(moved) }
            try FileManager.default.moveItem(atPath: path, toPath: moved)
            let second = try LMDBBackend.open(.init(path: moved))
            #expect(try await second.ref("heads") == Hash.of([2]))
            try await first.close()
            #expect(try await second.compareAndSwap(ref: "heads", expected: Hash.of([2]), new: Hash.of([3])))
            try await second.close()
            let reopened = try LMDBBackend.open(.init(path: moved))
            #expect(try await reopened.ref("heads") == Hash.of([3]))
            try await reopened.close()
        }
    }

    /// Failures whose LMDB message leaves the cause unsaid say it: a reader table full of live
    /// readers, a reader lock held by a process of the same id in another PID namespace, and an
    /// environment LMDB stopped using after a failed write.
    @Test func failuresWithAKnownCauseSayIt() {
        let message = { (call: String, code: Int32) in LMDBFailure(call: call, code: code).arborError(path: "/s").message }
        #expect(message("mdb_txn_begin", MDB_READERS_FULL).contains("every reader slot of the store is taken"))
        #expect(message("mdb_txn_begin", MDB_READERS_FULL).contains("500 for Arbor"))
        #expect(message("mdb_txn_begin", EAGAIN).contains("PID namespaces"))
        #expect(!message("mdb_put", EAGAIN).contains("PID namespaces"))
        #expect(message("mdb_txn_begin", MDB_PANIC).contains("open it again"))
    }

    @Test func missingAndUnwritableFolders() throws {
        let missing = "/nonexistent-\(UUID())/store"
        #expect { try LMDBBackend.create(.init(path: missing)) } throws: { error in
            (error as? ArborError)?.code == .notFound && "\(error)".contains(missing) && (error as? ArborError)?.backend == "lmdb"
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
        #expect { try LMDBBackend.open(.init(path: missing)) } throws: { ($0 as? ArborError)?.code == .notFound }

        let (folder, cleanup) = try unwritableFolder()
        defer { cleanup() }
        let path = folder + "/store"
        // As root, the path runs through a file (ENOTDIR); otherwise a folder this user may not write.
        #expect { try LMDBBackend.create(.init(path: path)) } throws: { error in
            guard let error = error as? ArborError, "\(error)".contains(path) else { return false }
            return getuid() == 0 ? error.code == .notFound && error.message.contains("is a file, not a folder") : error.code == .permissionDenied
        }
        #expect(!FileManager.default.fileExists(atPath: path), "a failed create leaves nothing behind")

        // An empty folder is no store.
        let empty = temporaryPath("lmdb-empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        defer { removeItem(empty) }
        #expect { try LMDBBackend.open(.init(path: empty)) } throws: { ($0 as? ArborError)?.code == .notFound }
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
    }

    /// What a create killed before its first commit leaves (a lock file; a data file of its
    /// meta pages alone) is no store yet: opening says so (not found), and a create or a
    /// migration takes it over, so running the command again finishes the job. (An empty data
    /// file is a store cut short: ``aDataFileCutShortIsRefusedAtOpenNotACrash()``.)
    @Test func anInterruptedCreateIsFinishedByTheNext() async throws {
        for leftover in ["lock file", "meta pages", "pages of a transaction never committed"] {
            let path = temporaryPath("unfinished-lmdb")
            defer { removeItem(path) }
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            switch leftover {
            case "lock file":
                #expect(FileManager.default.createFile(atPath: path + "/lock.mdb", contents: nil))
            default:
                // A raw environment opened and closed with nothing written: its two meta pages.
                var env: OpaquePointer?
                #expect(mdb_env_create(&env) == 0)
                #expect(mdb_env_open(env, path, 0, 0o600) == 0)
                mdb_env_close(env)
                if leftover != "meta pages" {
                    // A commit writes its pages before the meta page that counts them.
                    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path + "/data.mdb"))
                    try handle.seekToEnd()
                    try handle.write(contentsOf: Data(repeating: 0x5A, count: 40_960))
                    try handle.close()
                }
            }
            if leftover != "lock file" {
                #expect { try LMDBBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .notFound }
            }
            let store = Store(backend: try LMDBBackend.create(.init(path: path)))
            let version = try await store.save(Task(id: "t", title: "kept", done: false))
            try await store.close()
            #expect(try await Store(backend: try LMDBBackend.open(.init(path: path))).head()?.id == version.id, "\(leftover)")
            #expect { try LMDBBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
        }
    }

    @Test func foldersOfOtherKindsAreRefused() async throws {
        try await withPath { path in
            // Random bytes where data.mdb should be: not an LMDB environment.
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            try randomBytes(16384).write(to: URL(fileURLWithPath: path + "/data.mdb"))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains(path)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb")) == randomBytes(16384), "the file is left as it was")
            #expect(!FileManager.default.fileExists(atPath: path + "/lock.mdb"), "no lock file is left behind")
            #expect { try LMDBBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            removeItem(path)

            // An LMDB environment of another program: a plain main database, then a named one.
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            try rawLMDBPut(path, database: nil, key: Array("meta".utf8), value: Array("not a database".utf8))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains("not an Arbor store")
            }
            removeItem(path)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            try rawLMDBPut(path, database: "contacts", key: Array("ann".utf8), value: Array("555".utf8))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains("not an Arbor store")
            }
            #expect { try LMDBBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            removeItem(path)

            // A file is not an environment folder.
            try Data("x".utf8).write(to: URL(fileURLWithPath: path))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
            #expect { try LMDBBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
        }
    }

    @Test func newerFormatVersionIsRefused() async throws {
        try await withPath { path in
            try await LMDBBackend.create(.init(path: path)).close()
            try rawLMDBPut(path, database: "meta", key: Array("version".utf8), value: Array("3".utf8))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains("version 3")
            }
            try rawLMDBPut(path, database: "meta", key: Array("version".utf8), value: Array("0".utf8))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
            // Version 2 keeps deltas in a database of its own; without it, the store is damaged.
            try rawLMDBPut(path, database: "meta", key: Array("version".utf8), value: Array("2".utf8))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains("deltas database")
            }
            try rawLMDBPut(path, database: "meta", key: Array("format".utf8), value: Array("something-else".utf8))
            #expect { try LMDBBackend.open(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
        }
    }

    @Test func corruptObjectIsNamed() async throws {
        try await withPath { path in
            let store = Store(backend: try LMDBBackend.create(.init(path: path)))
            let version = try await store.save(Task(id: "t", title: "hello", done: false))
            try await store.close()
            try rawLMDBPut(path, database: "objects", key: version.root.bytes, value: Array("tampered".utf8))
            let reopened = try fresh(path)
            await #expect { try await reopened.value(Task.self, id: "t") } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains(version.root.hex)
            }
            try await reopened.close()
        }
    }

    @Test func aTinyMapGrowsInsteadOfFailing() async throws {
        try await withPath { path in
            let initial = 64 * 1024
            let backend = try LMDBBackend.create(.init(path: path, synchronous: false, initialMapSize: initial))
            let store = Store(backend: backend)
            // About 4 MB of objects: 64 times the initial map.
            let objects = (0..<4_000).map { index -> (hash: Hash, bytes: [UInt8]) in
                let bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 1_000) + withUnsafeBytes(of: index) { Array($0) }
                return (Hash.of(bytes), bytes)
            }
            try await backend.put(objects)
            var changes = ChangeSet()
            for index in 0..<2_000 { try changes.save(Person(id: "p\(index)", name: String(repeating: "n", count: 200))) }
            try await store.commit(changes)
            #expect(backend.mapSize > 4_000_000, "the map grew from \(initial) to \(backend.mapSize) bytes")
            let fetched = try await backend.get(objects.map(\.hash))
            #expect(fetched.count == objects.count && objects.allSatisfy { fetched[$0.hash] == $0.bytes })
            #expect(try await store.values(Person.self).count == 2_000)
            try await store.close()
            // The grown store opens again with the configured (small) initial size.
            let reopened = try LMDBBackend.open(.init(path: path, initialMapSize: initial))
            #expect(try await reopened.get(objects.map(\.hash)).count == objects.count)
            try await reopened.close()
        }
    }

    /// A map at its configured maximum refuses the batch whole, says so, and keeps what was
    /// stored; opened with a larger maximum, the same batch lands.
    @Test func aMapFullAtItsMaximumRefusesTheBatchAndKeepsTheStore() async throws {
        try await withPath { path in
            let maximum = 1 << 20
            let backend = try LMDBBackend.create(.init(path: path, synchronous: false, initialMapSize: 256 * 1024, maximumMapSize: maximum))
            let store = Store(backend: backend)
            var first = ChangeSet()
            for index in 0..<100 { try first.save(Person(id: "p\(index)", name: "first")) }
            let kept = try await store.commit(first)
            let large = (0..<2_000).map { index -> (hash: Hash, bytes: [UInt8]) in
                let bytes = [UInt8](repeating: 7, count: 1_000) + withUnsafeBytes(of: index) { Array($0) }
                return (Hash.of(bytes), bytes)
            }
            await #expect {
                try await backend.put(large)
            } throws: { error in
                let error = error as? ArborError
                return error?.code == .io && error?.message.contains("full at its maximum size of \(maximum) bytes") == true
                    && error?.backend == "lmdb"
            }
            #expect(backend.mapSize == maximum)
            // The refused batch left nothing; the commit before it is whole.
            #expect(try await backend.contains(large.map(\.hash)).isEmpty)
            #expect(try await store.heads().map(\.id) == [kept.id])
            #expect(try await store.values(Person.self).count == 100)
            #expect(try await store.verify().isIntact)
            try await store.close()

            let larger = try LMDBBackend.open(.init(path: path, maximumMapSize: 16 << 20))
            try await larger.put(large)
            #expect(try await larger.contains(large.map(\.hash)).count == large.count)
            try await larger.close()
        }
    }

    /// LMDB reads through a memory map: a read past the end of a data file that was cut short
    /// used to kill the process with SIGBUS. Now the open refuses it, names the file and reads
    /// nothing; an emptied file is not mistaken for a new environment (and written to).
    @Test func aDataFileCutShortIsRefusedAtOpenNotACrash() async throws {
        try await withPath { path in
            let store = Store(backend: try LMDBBackend.create(.init(path: path)))
            var changes = ChangeSet()
            for index in 0..<2_000 { try changes.save(Person(id: "p\(index)", name: String(repeating: "n", count: 200))) }
            try await store.commit(changes)
            try await store.close()
            let dataFile = path + "/data.mdb"
            let length = try #require(try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int)
            for cut in [length / 2, 12_288, 0] {
                #expect(truncate(dataFile, off_t(cut)) == 0)
                #expect { try LMDBBackend.open(.init(path: path)) } throws: {
                    isArborError($0, .corruptObject, mentioning: dataFile, cut == 0 ? "empty" : "cut short")
                }
                #expect(try FileManager.default.attributesOfItem(atPath: dataFile)[.size] as? Int == cut, "the file was left as it was")
            }
        }
    }

    /// LMDB trusts a leaf node's data size: damage that makes it run past the end of the file
    /// used to kill the process with SIGBUS when the value was copied out of the map. Now every
    /// read (a batch, a value lent in place, an enumeration) says the file is damaged. Linux
    /// only: the map is found through /proc/self/maps (README), and elsewhere the read crashes.
    @Test(.enabled(if: isLinux)) func aValueThatRunsPastTheFileIsAnErrorNotACrash() async throws {
        try await withPath { path in
            let backend = try LMDBBackend.create(.init(path: path))
            var generator = SeededGenerator(seed: 7)
            let bytes = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let hash = Hash.of(bytes)
            try await backend.put([(hash, bytes)])
            try await backend.close()

            // The value's leaf node: data size (two UInt16, low first), flags (F_BIGDATA, its
            // bytes in overflow pages), key size (32), then the key, the hash. Raising the high
            // half of the size makes the value about 2 GB long.
            let dataFile = path + "/data.mdb"
            var file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dataFile)))
            let node = [UInt8(20_000 & 0xff), UInt8(20_000 >> 8), 0, 0, 1, 0, 32, 0] + hash.bytes
            let at = try #require((0...(file.count - node.count)).first { file[$0..<$0 + node.count].elementsEqual(node) })
            file[at + 2] = 0xff
            file[at + 3] = 0x7f
            try Data(file).write(to: URL(fileURLWithPath: dataFile))

            let damaged = try LMDBBackend.open(.init(path: path))
            await #expect { try await damaged.get([hash]) } throws: { isArborError($0, .corruptObject, mentioning: "runs past", path) }
            #expect { try damaged.withObjectBytes(hash) { $0?.count } } throws: { isArborError($0, .corruptObject, mentioning: "runs past", path) }
            await #expect { try await damaged.enumerateObjects(batchSize: 10) { _ in } } throws: { isArborError($0, .corruptObject, mentioning: "runs past", path) }
            try await damaged.close()
            // Writes read stored values too: putting the object again into a store that keeps
            // deltas reads what is stored under its hash, inside the write transaction.
            let writing = try LMDBBackend.open(.init(path: path, restatesReplacedNodes: true))
            await #expect { try await writing.put([(hash, bytes)]) } throws: { isArborError($0, .corruptObject, mentioning: "runs past", path) }
            try await writing.close()
        }
    }
}
