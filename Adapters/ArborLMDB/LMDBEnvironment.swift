#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Arbor
import CLMDB
import Dispatch
import Synchronization

// The raw LMDB (and libc) calls of the adapter. Nothing else in ArborLMDB touches `mdb_*`:
// every failure leaves this file as an `ArborError` naming the engine, the C call, the
// environment's folder and `mdb_strerror`'s message.

/// A failed LMDB call, before it becomes an ``ArborError`` (the write loop looks at the code
/// to grow the map and retry).
struct LMDBFailure: Error {
    let call: String
    let code: Int32
    /// What went wrong, when Arbor found it rather than LMDB (`mdb_strerror` otherwise).
    var detail: String? = nil

    var message: String { detail ?? String(cString: mdb_strerror(code)) }

    func arborError(path: String) -> ArborError {
        let kind: ArborError.Code =
            switch code {
            case MDB_INVALID, MDB_VERSION_MISMATCH, MDB_INCOMPATIBLE: .unsupportedFormat
            case MDB_CORRUPTED, MDB_PAGE_NOTFOUND: .corruptObject
            case ENOENT, ENOTDIR: .notFound
            case EACCES, EPERM, EROFS: .permissionDenied
            case EIO, ENOSPC, EDQUOT, MDB_MAP_FULL: .io
            default: .engine
            }
        return ArborError(kind, "\(call) on \(path) failed: \(message) (code \(code))\(diskFullHint(path: path))\(causeHint)", backend: "lmdb")
    }

    /// What LMDB's message leaves unsaid, where the cause is known.
    private var causeHint: String {
        switch code {
        case MDB_READERS_FULL:
            // Dead processes' slots were freed and the read tried again before this.
            "; every reader slot of the store is taken by a process reading it now (the process that first opened the store set how many: \(LMDBEnvironment.maximumReaders) for Arbor, 126 for most other LMDB programs): read from fewer threads or processes at once"
        case EAGAIN where call == "mdb_txn_begin":
            // LMDB locks the byte of the lock file at the reader's process id.
            "; another process with this process's id holds its reader lock: processes in different PID namespaces (containers) cannot share an LMDB store"
        case MDB_PANIC:
            "; LMDB stopped using this store in this process after a write failed: close every store of this folder in this process and open it again"
        default:
            ""
        }
    }

    /// LMDB reports a short write, which is how a full disk shows, as `EIO`: say so when the
    /// disk holding `path` has no room left, so the message names the cause.
    private func diskFullHint(path: String) -> String {
        guard code == EIO || code == ENOSPC || code == EDQUOT else { return "" }
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return "" }
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        // Less than a megabyte: nothing a batch could still be written into.
        guard code != EIO || free < 1 << 20 else { return "" }
        return "; the disk is full (\(free) bytes free): free some space and run it again"
    }
}

/// `open(2)`, by a name that the static `open` of ``LMDBEnvironment`` does not hide.
private func openFile(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }

/// `close(2)`, likewise.
private func closeFile(_ descriptor: Int32) { close(descriptor) }

@inline(__always)
private func check(_ call: String, _ code: Int32) throws(LMDBFailure) {
    if code != 0 { throw LMDBFailure(call: call, code: code) }
}

/// A reader-writer lock (`pthread_rwlock_t`): many holders of the shared side, or one of the
/// exclusive side.
///
/// `@unchecked Sendable`: the lock lives at a fixed heap address for the object's lifetime and
/// pthread read-write locks are made to be used from any thread.
final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deinitialize(count: 1)
        lock.deallocate()
    }

    func withShared<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withExclusive<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// One open LMDB environment (`MDB_env*`) with the Arbor databases, shared by every
/// ``LMDBBackend`` of this process that opened the same folder (LMDB forbids opening one
/// environment twice in a process: closing the second would drop the first's file locks).
///
/// Concurrency (why `@unchecked Sendable` is safe):
/// - `env` is only read under `lock` (shared side) and only changed (map resize, close) under its
///   exclusive side, so no transaction is ever active in this process while the map is remapped,
///   as `mdb_env_set_mapsize` requires.
/// - Every transaction, read or write, runs inside one synchronous closure on one thread, holding
///   the shared side. The environment is opened `MDB_NOTLS`, so read transactions are not tied to
///   thread-local reader slots and Swift tasks may hop threads between calls.
/// - Writers of this process take turns through `writer` (LMDB's own lock file makes writers of
///   other processes wait too); a writer that must grow the map holds `writer`, so growth and
///   the retry happen without a second writer in between.
/// - The `meta`, `objects` and `refs` handles (`MDB_dbi`) are opened once, before the object is
///   shared, and never change. The `deltas` handle may be opened later (a store another process
///   upgraded): it sits behind a mutex, every `mdb_dbi_open` after sharing holds
///   `databaseOpening` (LMDB lets one transaction of a process at a time open databases), and a
///   transaction uses the handle only if it read it before it began.
final class LMDBEnvironment: @unchecked Sendable {
    let path: String
    private var env: OpaquePointer?
    private let lock = ReadWriteLock()
    private let writer = Mutex(())
    /// Where ``writeOffPool(_:_:)`` runs writes.
    private let writeQueue = DispatchQueue(label: "arbor.lmdb.writer")
    private let maximumMapSize: Int
    private(set) var objects: MDB_dbi = 0
    private(set) var refs: MDB_dbi = 0
    private(set) var meta: MDB_dbi = 0
    /// The `deltas` database (format version 2), once this process has opened it: at open, or
    /// when a read or a write finds another process made it.
    private let deltaHandles = Mutex<DeltaIndex?>(nil)
    /// Held while a shared environment opens a database: LMDB lets one transaction of a process
    /// at a time call `mdb_dbi_open`.
    private let databaseOpening = Mutex(())
    /// Where `data.mdb` is mapped in this process, or `nil` where that cannot be known (only
    /// Linux tells, in /proc/self/maps). Changed with the map, under `lock`'s exclusive side.
    private var mapped: MappedFile?
    /// LMDB's page size for this environment.
    private var pageSize = 4096
    /// Why `env` was closed under the backends still using it: a remap that failed half-way
    /// (``remap(to:_:)``). Set under `lock`'s exclusive side.
    private var unusable: ArborError?

    /// Opened on a read-only file system (`MDB_RDONLY | MDB_NOLOCK`): every write throws.
    let isReadOnly: Bool
    /// Whether commits flush (opened without `MDB_NOSYNC`): set by the backend that opened the
    /// environment, which the later ones of this process share.
    let isSynchronous: Bool

    private init(path: String, env: OpaquePointer, maximumMapSize: Int, readOnly: Bool, synchronous: Bool) {
        self.path = path
        self.env = env
        self.maximumMapSize = maximumMapSize
        self.isReadOnly = readOnly
        self.isSynchronous = synchronous
    }

    deinit { if let env { mdb_env_close(env) } }

    // MARK: Files

    /// The identity of a folder (device and inode), or `nil` if it does not exist.
    struct FolderID: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    enum PathKind { case missing, folder(FolderID), other }

    static func kind(of path: String) -> PathKind {
        var info = stat()
        guard stat(path, &info) == 0 else { return .missing }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return .other }
        return .folder(FolderID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }

    static func fileExists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    /// Why the store in the folder `path` cannot be opened for want of its `data.mdb`: missing
    /// (``ArborError/Code/notFound``), or in a folder this user may not read
    /// (``ArborError/Code/permissionDenied``), which is not the same; `nil` if it is there.
    static func dataFileProblem(in path: String) -> ArborError? {
        var info = stat()
        guard stat(path + "/data.mdb", &info) != 0 else { return nil }
        let code = errno
        if code == ENOENT || code == ENOTDIR {
            return ArborError(.notFound, "no store at \(path): data.mdb is missing", backend: "lmdb", operation: "open")
        }
        let kind: ArborError.Code = code == EACCES || code == EPERM ? .permissionDenied : .io
        return ArborError(kind, "cannot read the store at \(path): \(String(cString: strerror(code))) (does it belong to another user?)", backend: "lmdb", operation: "open")
    }

    /// Whether `path` is on a file system mounted read-only (`false` if that cannot be told).
    static func isOnReadOnlyFileSystem(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) == 0 && (UInt(info.f_flag) & UInt(ST_RDONLY)) != 0
    }

    /// The id of another process that has the environment in `path` open, or `nil` (none, or
    /// it cannot be told): every process that opens it holds a lock on byte 0 of `lock.mdb`
    /// (shared once open).
    static func processWithTheStoreOpen(_ path: String) -> pid_t? {
        FileLockProbe.process(holdingByte: 0, of: path + "/lock.mdb")
    }

    /// The length of the file at `path` in bytes, or `nil` if it cannot be read.
    static func fileLength(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Whether the folder at `path` holds what a create killed before its first commit leaves:
    /// `lock.mdb` alone, or with a `data.mdb` whose newest meta page records an empty main
    /// database: no named database was ever committed (the create's one transaction may have
    /// written pages before it was killed, but not the meta page that would count them). An
    /// empty `data.mdb` is not taken for one: it is what a store cut short to nothing looks like,
    /// and is reported as such.
    static func holdsUnfinishedCreate(_ path: String) -> Bool {
        guard let names = entries(of: path).map(Set.init), !names.isEmpty, names.isSubset(of: ["data.mdb", "lock.mdb"]) else { return false }
        guard names.contains("data.mdb") else { return true }
        guard let length = fileLength(path + "/data.mdb"), length > 0,
              let meta = LMDBMeta.newest(in: path + "/data.mdb")
        else { return false }
        return meta.mainRoot == nil
    }

    /// Whether the folder at `path` can be read and holds nothing.
    static func isEmptyFolder(_ path: String) -> Bool {
        entries(of: path)?.isEmpty ?? false
    }

    /// The names in the folder at `path`, without `.` and `..`; `nil` if it cannot be read.
    private static func entries(of path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names = [String]()
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Creates the store's folder (mode 0700). Its parent must exist.
    static func makeFolder(_ path: String) throws {
        guard mkdir(path, 0o700) == 0 else {
            let code = errno
            let reason = String(cString: strerror(code))
            switch code {
            case ENOENT:
                throw ArborError(.notFound, "cannot create \(path): its parent folder does not exist (\(reason))", backend: "lmdb", operation: "create")
            case ENOTDIR:
                throw ArborError(.notFound, "cannot create \(path): a part of its path is a file, not a folder (\(reason))", backend: "lmdb", operation: "create")
            case EACCES, EPERM, EROFS:
                throw ArborError(.permissionDenied, "cannot create \(path): \(reason)", backend: "lmdb", operation: "create")
            case EEXIST:
                throw ArborError(.alreadyExists, "\(path) already exists; it was left untouched", backend: "lmdb", operation: "create")
            default:
                throw ArborError(.io, "cannot create \(path): \(reason)", backend: "lmdb", operation: "create")
            }
        }
    }

    static func removeFolder(_ path: String) { rmdir(path) }

    /// Removes `names` from the folder `path` (and with `folder`, the folder, if that leaves it
    /// empty), unless a process has the environment there open.
    ///
    /// An open environment holds a shared lock on the first byte of `lock.mdb`, so an exclusive
    /// one is had only while none is open; it is held while the files go. Removing a lock file
    /// that another process uses would let the next one make a second, and two lock tables let
    /// two writers into one B-tree at once. This process must have no environment open there
    /// either: closing the descriptor drops every lock the process holds on the file.
    static func removeUnused(_ names: [String], in path: String, folder: Bool = false) {
        let descriptor = openFile(path + "/lock.mdb", O_RDWR | O_CLOEXEC)
        if descriptor >= 0 {
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            lock.l_start = 0
            lock.l_len = 1
            defer { closeFile(descriptor) }
            guard fcntl(descriptor, F_SETLK, &lock) == 0 else { return }
            for name in names { unlink(path + "/" + name) }
        } else {
            guard errno == ENOENT else { return }
            for name in names where name != "lock.mdb" { unlink(path + "/" + name) }
        }
        if folder { rmdir(path) }
    }

    // MARK: Opening and closing

    /// Opens (with `create`, creates) the environment in the folder `path`, which must exist,
    /// and the `meta`, `objects` and `refs` databases. `check` reads the format marker in
    /// a read transaction (open) or writes it in the creating write transaction (create).
    ///
    /// With `readOnly` (a folder on a read-only file system), LMDB opens it `MDB_RDONLY` and
    /// without its lock file (`MDB_NOLOCK`), which it could neither create nor write there;
    /// without locks is safe because nothing can write to such a file system, unless the store
    /// is written through another mount: one another process has open is refused.
    static func open(
        path: String, create: Bool, mapSize: Int, maximumMapSize: Int, synchronous: Bool, readOnly: Bool = false,
        marker: (LMDBTransaction, MDB_dbi) throws -> Void
    ) throws -> LMDBEnvironment {
        var handle: OpaquePointer?
        do {
            try check("mdb_env_create", mdb_env_create(&handle))
        } catch {
            throw error.arborError(path: path)
        }
        guard let handle else {
            throw ArborError(.engine, "mdb_env_create returned no environment", backend: "lmdb")
        }
        let hadLockFile = fileExists(path + "/lock.mdb")
        // Without locks, a reader's snapshot pins nothing: a writer of another mount (a
        // container's `:ro` volume of a live store) reuses the pages it reads.
        if readOnly, let process = processWithTheStoreOpen(path) {
            mdb_env_close(handle)
            throw ArborError(
                .permissionDenied,
                "\(path) is on a read-only file system, but \(FileLockProbe.describe(process)) has the store open, and may write it through another mount, over pages a reader here would be reading: open it where it can be written, or read a copy (mdb_copy)",
                backend: "lmdb", operation: "open")
        }
        var removesLockFile = false
        do {
            try check("mdb_env_set_maxdbs", mdb_env_set_maxdbs(handle, 8))
            // Taken by the process that creates the lock file; later ones adopt its table.
            try check("mdb_env_set_maxreaders", mdb_env_set_maxreaders(handle, UInt32(maximumReaders)))
            try check("mdb_env_set_mapsize", mdb_env_set_mapsize(handle, roundedToPages(mapSize)))
            let flags = UInt32(MDB_NOTLS) | (synchronous ? 0 : UInt32(MDB_NOSYNC)) | (readOnly ? UInt32(MDB_RDONLY | MDB_NOLOCK) : 0)
            if !readOnly { try reserveLockFile(in: path) }
            let opened = mdb_env_open(handle, path, flags, 0o600)
            // Not a data file any LMDB can open, so nobody uses the lock file this made there.
            removesLockFile = !create && !hadLockFile && (opened == MDB_INVALID || opened == MDB_VERSION_MISMATCH)
            try check("mdb_env_open", opened)
            // Free the reader slots of processes that died inside a read transaction.
            var dead: Int32 = 0
            try check("mdb_reader_check", mdb_reader_check(handle, &dead))
        } catch {
            mdb_env_close(handle)
            if removesLockFile { removeUnused(["lock.mdb"], in: path) }
            throw error.arborError(path: path)
        }
        let environment = LMDBEnvironment(path: path, env: handle, maximumMapSize: maximumMapSize, readOnly: readOnly, synchronous: synchronous)
        // On failure from here on, `environment`'s deinit closes the handle.
        environment.locateMap()
        try environment.checkDataFileLength()
        if create {
            try environment.write("create") { txn in
                let meta = try txn.openDatabase("meta", create: true)
                try marker(txn, meta)
                environment.meta = meta
                environment.objects = try txn.openDatabase("objects", create: true)
                environment.refs = try txn.openDatabase("refs", create: true)
            }
        } else {
            try environment.read("open") { txn in
                let meta: MDB_dbi
                do { meta = try txn.openDatabase("meta", create: false) } catch let failure as LMDBFailure where failure.code == MDB_NOTFOUND || failure.code == MDB_INCOMPATIBLE {
                    throw ArborError(.unsupportedFormat, "\(path) is an LMDB environment, but not an Arbor store (it has no meta database)", backend: "lmdb", operation: "open")
                }
                try marker(txn, meta)
                environment.meta = meta
                do {
                    environment.objects = try txn.openDatabase("objects", create: false)
                    environment.refs = try txn.openDatabase("refs", create: false)
                } catch let failure as LMDBFailure where failure.code == MDB_NOTFOUND {
                    throw ArborError(.corruptObject, "\(path) has an Arbor marker but lacks its objects or refs database", backend: "lmdb", operation: "open")
                }
                // Committing (not aborting) the read transaction keeps the database handles.
                try txn.commitReadOnly()
            }
        }
        return environment
    }

    /// Throws ``ArborError/Code/corruptObject`` if `data.mdb` was cut short: LMDB reads the file
    /// through a memory map, and touching a page past the end of a truncated file (a copy cut
    /// short, a restore onto a full disk) raises SIGBUS, which kills the process on its first
    /// read instead of failing it.
    ///
    /// A valid file can end before the last page its newest meta page counts, but only by pages
    /// a transaction took and freed again without writing them (LMDB's loose pages); those are
    /// all in LMDB's free list. So a short file must have the free list's root inside it, and
    /// every page it lacks must be in that list. The meta page is read with `pread` (not
    /// through the map), and the free list only when its root is a leaf inside the file, so
    /// the check itself cannot touch a missing page. A free list of more than one level cannot
    /// be read safely: such a file is let through, as before.
    private func checkDataFileLength() throws {
        guard let env else { return }
        var statistics = MDB_stat()
        mdb_env_stat(env, &statistics)
        pageSize = Int(statistics.ms_psize)
        let file = path + "/data.mdb"
        var tries = 0
        while true {
            // The meta page before the length: a writer of another process writes its pages
            // before the meta page that counts them, so a length read afterwards covers what it counts.
            guard let meta = LMDBMeta.newest(in: file, pageSize: pageSize), let length = Self.fileLength(file) else { return }
            guard let page = try pageBeyondTheEnd(of: length, counted: meta) else { return }
            tries += 1
            // Another process's commit between reading the meta page and reading the free list
            // may have taken from the list pages the file had not reached: then the newest meta
            // page or the length differ, and the check is made again from them.
            if tries < 3, LMDBMeta.newest(in: file, pageSize: pageSize) != meta || Self.fileLength(file) != length { continue }
            throw ArborError(
                .corruptObject,
                "\(file) is \(length) bytes, but LMDB's page \(page) (of \(meta.lastPage + 1) in use) lies beyond its end: the file was cut short (a copy or restore that did not finish?); nothing was read. Restore it from a backup or a replica",
                backend: "lmdb", operation: "open")
        }
    }

    /// A page `meta` counts in use that a file of `length` bytes lacks and that is not free (see
    /// ``checkDataFileLength()``), or `nil`.
    private func pageBeyondTheEnd(of length: Int, counted meta: LMDBMeta) throws -> Int? {
        let wholePages = length / pageSize
        guard wholePages <= meta.lastPage else { return nil }
        if let root = [meta.freeRoot, meta.mainRoot].compactMap({ $0 }).first(where: { $0 >= wholePages }) { return root }
        guard meta.freeDepth <= 1 else { return nil }
        let free = meta.freeRoot == nil ? [] : try read("open") { txn in try txn.freePages(from: wholePages) }
        return (wholePages...meta.lastPage).first { !free.contains($0) }
    }

    /// Finds where `data.mdb` is mapped (after opening, and after every remap): LMDB hands out
    /// values as pointers into that map and trusts its own pages, so in a damaged file a value's
    /// length can run past the end of the file, where reading it raises SIGBUS. Knowing the
    /// map, read transactions check every value before it is read (``MappedFile``).
    private func locateMap() {
        // By LMDB's own descriptor, not by path: the folder may have been moved since it opened.
        var descriptor: mdb_filehandle_t = -1
        guard let env, mdb_env_get_fd(env, &descriptor) == 0 else {
            mapped = nil
            return
        }
        mapped = MappedFile.locate(descriptor)
    }

    /// Read transactions the store's processes may have open at once (LMDB's default is 126:
    /// with `MDB_NOTLS`, every concurrent read of every thread takes one).
    static let maximumReaders = 500

    /// Bytes of the lock file given disk blocks before LMDB maps it: its default lock file (126
    /// readers) is 8 KB; 32 KB covers ``maximumReaders`` (64 bytes each, after a header).
    private static let lockFileReserve = 32 << 10

    /// Gives the lock file's first ``lockFileReserve`` bytes their disk blocks, creating the
    /// file if need be, before `mdb_env_open`.
    ///
    /// LMDB sizes its lock file with `ftruncate` (a sparse file) and writes to it through a
    /// shared memory map. On a full disk, the first write to a page with no block raises
    /// SIGBUS, which kills the process instead of failing the open: so the blocks are taken
    /// here, where a full disk is an error (`ENOSPC`). The file's size is left to LMDB.
    ///
    /// A lock file that cannot be opened here, or a file system that cannot reserve blocks
    /// (`EOPNOTSUPP`), is left to `mdb_env_open`, which reports the first as before. Only Linux
    /// (Glibc) reserves: elsewhere the call is not available and this does nothing.
    private static func reserveLockFile(in path: String) throws(LMDBFailure) {
        #if canImport(Glibc)
        let descriptor = Glibc.open(path + "/lock.mdb", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { Glibc.close(descriptor) }
        if arbor_reserve_blocks(descriptor, Int64(lockFileReserve)) != 0 {
            let code = errno
            if code == ENOSPC || code == EDQUOT { throw LMDBFailure(call: "fallocate(lock.mdb)", code: code) }
        }
        #endif
    }

    private static func roundedToPages(_ size: Int) -> Int {
        let page = 4096
        return max(page * 16, (size + page - 1) / page * page)
    }

    /// Closes the environment once no transaction of this process is active. Harmless twice.
    func close() {
        lock.withExclusive {
            if let env { mdb_env_close(env) }
            env = nil
        }
    }

    /// Whether `folder/data.mdb` is the very file this environment has open (same device and
    /// inode): so a folder reached by another path, or moved, is known to be this environment,
    /// and a folder that took the inode number of a removed one is known not to be.
    func hasDataFile(inFolder folder: String) -> Bool {
        lock.withShared {
            guard let env else { return false }
            var descriptor: mdb_filehandle_t = -1
            var open = stat(), named = stat()
            guard mdb_env_get_fd(env, &descriptor) == 0, fstat(descriptor, &open) == 0,
                stat(folder + "/data.mdb", &named) == 0
            else { return false }
            return open.st_dev == named.st_dev && open.st_ino == named.st_ino
        }
    }

    /// The current size of the memory map, in bytes.
    var mapSize: Int {
        lock.withShared {
            guard let env else { return 0 }
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            return info.me_mapsize
        }
    }

    // MARK: Transactions

    private enum Attempt<R> {
        case done(R)
        case mapFull(Int)
        case resized
        /// The reader table was full and slots of dead processes were freed: try again.
        case readersFreed
    }

    private func closedError(_ operation: String) -> ArborError {
        if var unusable {
            unusable.operation = operation
            return unusable
        }
        return ArborError(.closed, "the store is closed", backend: "lmdb", operation: operation)
    }

    private func locate(_ error: any Error, _ operation: String) -> any Error {
        var arborError: ArborError
        if let failure = error as? LMDBFailure {
            arborError = failure.arborError(path: path)
        } else if let error = error as? ArborError {
            arborError = error
        } else {
            return error
        }
        if arborError.operation == nil { arborError.operation = operation }
        if arborError.backend == nil { arborError.backend = "lmdb" }
        return arborError
    }

    /// The handle of the `deltas` database (format version 2): base hash and object hash (64
    /// bytes) → one byte, for each object kept as a delta against that base.
    struct DeltaIndex: Sendable {
        let dbi: MDB_dbi
    }

    /// The `deltas` database, if this process has opened it. A transaction may use it only if
    /// it began after it was opened: read this before beginning one.
    var deltaIndex: DeltaIndex? { deltaHandles.withLock { $0 } }

    /// Opens the `deltas` database if the store has it (another process may have made it since
    /// this one opened the environment); `nil` if it has none.
    func loadDeltaIndex() throws -> DeltaIndex? {
        try databaseOpening.withLock { _ in
            if let known = deltaIndex { return known }
            return try read("open") { txn in
                let index: DeltaIndex
                do { index = DeltaIndex(dbi: try txn.openDatabase("deltas", create: false)) } catch let failure as LMDBFailure where failure.code == MDB_NOTFOUND {
                    return nil
                }
                // Committing (not aborting) the read transaction keeps the handle.
                try txn.commitReadOnly()
                deltaHandles.withLock { $0 = index }
                return index
            }
        }
    }

    /// Makes the `deltas` database (if the store lacks it), with `mark` writing the format
    /// version in the same write transaction, and opens it.
    func createDeltaIndex(_ mark: (LMDBTransaction) throws -> Void) throws -> DeltaIndex {
        try databaseOpening.withLock { _ in
            if let known = deltaIndex { return known }
            let index = try write("open") { txn in
                let index = DeltaIndex(dbi: try txn.openDatabase("deltas", create: true))
                try mark(txn)
                return index
            }
            deltaHandles.withLock { $0 = index }
            return index
        }
    }

    /// Forgets the `deltas` database's handle, as a process that opened the store before it was
    /// made has none: for tests.
    func forgetDeltaIndex() {
        databaseOpening.withLock { _ in deltaHandles.withLock { $0 = nil } }
    }

    /// Runs `body` in a read transaction (one snapshot), aborted afterwards unless `body` commits it.
    func read<R>(_ operation: String, _ body: (LMDBTransaction) throws -> R) throws -> R {
        do {
            var freedReaders = false
            while true {
                let attempt: Attempt<R> = try lock.withShared {
                    guard let env else { throw closedError(operation) }
                    var txn: OpaquePointer?
                    let code = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
                    if code == MDB_MAP_RESIZED { return .resized }
                    // Slots left by processes that died reading are freed only by a check, which
                    // opening does; a long-lived process would otherwise fail every read.
                    // Retried even if this check freed none: another thread's (or process's) may just
                    // have freed the slots this attempt found taken.
                    if code == MDB_READERS_FULL && !freedReaders {
                        freedReaders = true
                        var dead: Int32 = 0
                        if mdb_reader_check(env, &dead) == 0 { return .readersFreed }
                    }
                    try check("mdb_txn_begin", code)
                    guard let txn else { throw LMDBFailure(call: "mdb_txn_begin", code: EINVAL) }
                    let transaction = LMDBTransaction(txn: txn, mapped: mapped)
                    defer { if !transaction.isFinished { mdb_txn_abort(txn) } }
                    return .done(try body(transaction))
                }
                switch attempt {
                case .done(let value): return value
                case .resized, .mapFull: try adoptMapSize(operation)
                case .readersFreed: continue
                }
            }
        } catch {
            throw locate(error, operation)
        }
    }

    /// ``write(_:_:)`` on a serial queue of this environment, with the calling task suspended
    /// meanwhile: a writer may wait for another process's write transaction and ends with an
    /// fsync, and neither should hold one of the Swift concurrency pool's few threads. The queue
    /// also lets this process's writers take turns in the order they came.
    ///
    /// With `flushing`, the commit is on disk when this returns even if the environment was
    /// opened without flushes (`MDB_NOSYNC`, by an earlier backend of this process).
    func writeOffPool<R: Sendable>(
        _ operation: String, flushing: Bool, _ body: @escaping @Sendable (LMDBTransaction) throws -> R
    ) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            writeQueue.async {
                continuation.resume(with: Result {
                    let value = try self.write(operation, body)
                    if flushing && !self.isSynchronous { try self.flush(operation) }
                    return value
                })
            }
        }
    }

    /// Flushes what this environment committed to disk (`mdb_env_sync`, forced).
    private func flush(_ operation: String) throws {
        do {
            try lock.withShared {
                guard let env else { throw closedError(operation) }
                try check("mdb_env_sync", mdb_env_sync(env, 1))
            }
        } catch {
            throw locate(error, operation)
        }
    }

    /// Runs `body` in one write transaction and commits it. When the map is full, the transaction
    /// is aborted, the map doubled and `body` run again in a new transaction; when another process
    /// has grown the map, this process adopts the new size and retries.
    func write<R: Sendable>(_ operation: String, _ body: (LMDBTransaction) throws -> R) throws -> R {
        if isReadOnly {
            throw ArborError(.permissionDenied, "\(path) is on a read-only file system: the store can be read, not changed", backend: "lmdb", operation: operation)
        }
        do {
            return try writer.withLock { _ in
                var attempts = 0
                var freedReaders = false
                while true {
                    attempts += 1
                    let attempt: Attempt<R> = try lock.withShared {
                        guard let env else { throw closedError(operation) }
                        var info = MDB_envinfo()
                        mdb_env_info(env, &info)
                        var txn: OpaquePointer?
                        let code = mdb_txn_begin(env, nil, 0, &txn)
                        if code == MDB_MAP_RESIZED { return .resized }
                        try check("mdb_txn_begin", code)
                        guard let txn else { throw LMDBFailure(call: "mdb_txn_begin", code: EINVAL) }
                        // Its values in its own dirty pages (on the heap, outside the map) are
                        // not checked; those in the map are, as a read's.
                        let transaction = LMDBTransaction(txn: txn, mapped: mapped, mapSize: Int(info.me_mapsize))
                        do {
                            let value = try body(transaction)
                            transaction.isFinished = true
                            // mdb_txn_commit frees the transaction whether or not it succeeds.
                            let commit = mdb_txn_commit(txn)
                            if commit == MDB_MAP_FULL { return .mapFull(info.me_mapsize) }
                            try check("mdb_txn_commit", commit)
                            return .done(value)
                        } catch let failure as LMDBFailure where failure.code == MDB_MAP_FULL {
                            if !transaction.isFinished { mdb_txn_abort(txn) }
                            return .mapFull(info.me_mapsize)
                        } catch {
                            if !transaction.isFinished { mdb_txn_abort(txn) }
                            throw error
                        }
                    }
                    switch attempt {
                    case .done(let value): return value
                    case .resized: try adoptMapSize(operation)
                    case .readersFreed: continue
                    case .mapFull(let size):
                        guard attempts < 64 else { throw LMDBFailure(call: "mdb_put", code: MDB_MAP_FULL) }
                        // A slot left by a process that died reading pins the pages freed since
                        // its snapshot; freed, they are reused, and the map need not grow.
                        if !freedReaders {
                            freedReaders = true
                            if try freeDeadReaders(operation) { continue }
                        }
                        try growMap(from: size, operation)
                    }
                }
            }
        } catch {
            throw locate(error, operation)
        }
    }

    /// Frees the reader slots of processes that died; whether there were any.
    private func freeDeadReaders(_ operation: String) throws -> Bool {
        try lock.withShared {
            guard let env else { throw closedError(operation) }
            var dead: Int32 = 0
            return mdb_reader_check(env, &dead) == 0 && dead > 0
        }
    }

    /// Another process grew the map: take over its size (`mdb_env_set_mapsize(env, 0)`, which
    /// maps the size the newest meta page records).
    private func adoptMapSize(_ operation: String) throws {
        try lock.withExclusive {
            guard env != nil else { throw closedError(operation) }
            // LMDB picks the size from the map it has; read here, it is only for the probe.
            let recorded = LMDBMeta.newest(in: path + "/data.mdb", pageSize: pageSize)?.mapSize ?? 0
            try remap(to: 0, probing: recorded, operation)
        }
    }

    /// Doubles the map (up to the maximum), unless it has grown since it was found full at `size`.
    private func growMap(from size: Int, _ operation: String) throws {
        try lock.withExclusive {
            guard let env else { throw closedError(operation) }
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            guard info.me_mapsize <= size else { return }
            guard size < maximumMapSize else {
                throw ArborError(.io, "the LMDB map of \(path) is full at its maximum size of \(maximumMapSize) bytes; open it with a larger LMDBBackend.Configuration.maximumMapSize", backend: "lmdb", operation: operation)
            }
            let grown = min(max(size * 2, 1 << 20), maximumMapSize)
            try remap(to: grown, probing: grown, operation)
        }
    }

    /// Maps `data.mdb` at `size` bytes (`0`: the size its newest meta page records), once a map
    /// of `probeSize` bytes was had (`0`: not tried). Called under `lock`'s exclusive side.
    ///
    /// LMDB 0.9 unmaps the old map before it maps the new one, and if that `mmap` fails (an
    /// address-space limit, `RLIMIT_AS`) it keeps pointers into the unmapped memory, so the
    /// environment's next transaction would crash the process. So a map of the new size is
    /// tried first and given back: if the process cannot have it, the growth fails and the
    /// environment keeps its map. If LMDB's remap fails all the same (the old map's room was
    /// counted), the environment is closed and every later call fails with that cause.
    private func remap(to size: Int, probing probeSize: Int, _ operation: String) throws {
        guard let env else { throw closedError(operation) }
        var descriptor: mdb_filehandle_t = -1
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        // LMDB gives the old map back before it takes the new one: the process needs room for
        // what the map grows by, which a map of that many bytes of the file proves it has.
        let growth = probeSize - info.me_mapsize
        if growth > 0, mdb_env_get_fd(env, &descriptor) == 0 {
            let probe = mmap(nil, growth, PROT_READ, MAP_SHARED, descriptor, 0)
            guard probe != MAP_FAILED else {
                let code = errno
                throw ArborError(
                    .io, "the LMDB map of \(path) cannot grow to \(probeSize) bytes: this process cannot map that much memory (\(String(cString: strerror(code)))); the store is unchanged, and it can be written again once the process has the room (see ulimit -v)",
                    backend: "lmdb", operation: operation)
            }
            munmap(probe, growth)
        }
        let code = mdb_env_set_mapsize(env, size)
        guard code == 0 else {
            if code == EINVAL { throw LMDBFailure(call: "mdb_env_set_mapsize", code: code) }
            // The old map is gone and LMDB holds pointers into it: no call may use `env` again.
            mdb_env_close(env)
            self.env = nil
            mapped = nil
            let failure = ArborError(
                .io, "the LMDB map of \(path) could not be remapped at \(size == 0 ? probeSize : size) bytes: \(String(cString: mdb_strerror(code))) (code \(code)); the store is unchanged on disk, but this process must open it again",
                backend: "lmdb", operation: operation)
            unusable = failure
            throw failure
        }
        locateMap()
    }
}

/// One transaction, valid only inside the closure it was handed to.
final class LMDBTransaction {
    let txn: OpaquePointer
    var isFinished = false
    /// The data file as mapped, to check values against, or `nil`: not checked.
    let mapped: MappedFile?
    /// For a write transaction, the map's size: values outside the map are its dirty pages.
    let mapSize: Int?

    init(txn: OpaquePointer, mapped: MappedFile?, mapSize: Int? = nil) {
        self.txn = txn
        self.mapped = mapped
        self.mapSize = mapSize
    }

    /// `value` where LMDB maps it, once it is known to lie within the data file: a damaged page
    /// can give a value a length that runs past the end of the file, where reading it would
    /// raise SIGBUS.
    private func buffer(_ value: MDB_val, _ call: String) throws(LMDBFailure) -> UnsafeRawBufferPointer {
        guard value.mv_size > 0, let start = value.mv_data else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        if let mapped, mapSize.map({ mapped.maps(UInt(bitPattern: start), within: $0) }) ?? true,
           let (offset, length) = mapped.outside(UInt(bitPattern: start), count: value.mv_size) {
            throw LMDBFailure(
                call: call, code: MDB_CORRUPTED,
                detail: "a value of \(value.mv_size) bytes at offset \(offset) runs past the \(length) bytes of data.mdb: the file is damaged")
        }
        return UnsafeRawBufferPointer(start: start, count: value.mv_size)
    }

    /// The page numbers, from `first` on, in LMDB's free list (its database 0: for each
    /// transaction, a count and then the pages it freed).
    func freePages(from first: Int) throws(LMDBFailure) -> Set<Int> {
        var cursor: OpaquePointer?
        try check("mdb_cursor_open(free list)", mdb_cursor_open(txn, 0, &cursor))
        guard let cursor else { throw LMDBFailure(call: "mdb_cursor_open(free list)", code: EINVAL) }
        defer { mdb_cursor_close(cursor) }
        let width = MemoryLayout<Int>.stride
        var pages = Set<Int>()
        var key = MDB_val()
        var data = MDB_val()
        var code = mdb_cursor_get(cursor, &key, &data, MDB_FIRST)
        while code == 0 {
            let entry = try buffer(data, "mdb_cursor_get(free list)")
            let count = entry.count >= width ? entry.loadUnaligned(as: Int.self) : -1
            guard count >= 0, count < entry.count / width else {
                throw LMDBFailure(call: "mdb_cursor_get(free list)", code: MDB_CORRUPTED, detail: "an entry of LMDB's free list does not parse: the file is damaged")
            }
            for index in stride(from: 1, through: count, by: 1) {
                let page = entry.loadUnaligned(fromByteOffset: index * width, as: Int.self)
                if page >= first { pages.insert(page) }
            }
            code = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        if code != MDB_NOTFOUND { try check("mdb_cursor_get(free list)", code) }
        return pages
    }

    func openDatabase(_ name: String, create: Bool) throws(LMDBFailure) -> MDB_dbi {
        var dbi: MDB_dbi = 0
        try check("mdb_dbi_open(\(name))", mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi))
        return dbi
    }

    /// Commits a read-only transaction (which keeps the database handles it opened).
    func commitReadOnly() throws(LMDBFailure) {
        isFinished = true
        try check("mdb_txn_commit", mdb_txn_commit(txn))
    }

    /// A copy of the value at `key`, or `nil`.
    func get(_ dbi: MDB_dbi, _ key: [UInt8]) throws(LMDBFailure) -> [UInt8]? {
        var data = MDB_val()
        let code = key.withUnsafeBytes { buffer in
            var keyValue = MDB_val(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
            return mdb_get(txn, dbi, &keyValue, &data)
        }
        if code == MDB_NOTFOUND { return nil }
        try check("mdb_get", code)
        return [UInt8](try buffer(data, "mdb_get"))
    }

    /// Calls `body` with the value at `key` where LMDB maps it (valid only until the transaction
    /// ends), or with `nil` if there is none.
    func withValue<R>(_ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        var keyValue = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var data = MDB_val()
        let code = mdb_get(txn, dbi, &keyValue, &data)
        if code == MDB_NOTFOUND { return try body(nil) }
        try check("mdb_get", code)
        return try body(try buffer(data, "mdb_get"))
    }

    /// Stores `value` at `key`; with `overwrite` false an existing value is kept. Returns whether
    /// it was written.
    @discardableResult
    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], overwrite: Bool) throws(LMDBFailure) -> Bool {
        let code = key.withUnsafeBytes { keyBuffer in
            value.withUnsafeBytes { valueBuffer in
                var keyValue = MDB_val(mv_size: keyBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: keyBuffer.baseAddress))
                var dataValue = MDB_val(mv_size: valueBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: valueBuffer.baseAddress))
                return mdb_put(txn, dbi, &keyValue, &dataValue, overwrite ? 0 : UInt32(MDB_NOOVERWRITE))
            }
        }
        if code == MDB_KEYEXIST && !overwrite { return false }
        try check("mdb_put", code)
        return true
    }

    /// Stores `value` at `key` unless the key is present; then calls `existing` with the value
    /// stored there, where LMDB maps it, and stores nothing.
    func insert(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], existing: (UnsafeRawBufferPointer) throws -> Void) throws {
        var dataValue = MDB_val()
        let code = key.withUnsafeBytes { keyBuffer in
            value.withUnsafeBytes { valueBuffer in
                var keyValue = MDB_val(mv_size: keyBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: keyBuffer.baseAddress))
                dataValue = MDB_val(mv_size: valueBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: valueBuffer.baseAddress))
                return mdb_put(txn, dbi, &keyValue, &dataValue, UInt32(MDB_NOOVERWRITE))
            }
        }
        // On MDB_KEYEXIST, LMDB points `dataValue` at the value already there.
        if code == MDB_KEYEXIST { return try existing(try buffer(dataValue, "mdb_put")) }
        try check("mdb_put", code)
    }

    /// The entries of `dbi` whose keys begin with `prefix`, in key order.
    func entries(_ dbi: MDB_dbi, withPrefix prefix: [UInt8]) throws(LMDBFailure) -> [(key: [UInt8], value: [UInt8])] {
        var cursor: OpaquePointer?
        try check("mdb_cursor_open", mdb_cursor_open(txn, dbi, &cursor))
        guard let cursor else { throw LMDBFailure(call: "mdb_cursor_open", code: EINVAL) }
        defer { mdb_cursor_close(cursor) }
        var result = [(key: [UInt8], value: [UInt8])]()
        var start = prefix
        var key = MDB_val()
        var data = MDB_val()
        var code = start.withUnsafeMutableBytes { buffer in
            key = MDB_val(mv_size: buffer.count, mv_data: buffer.baseAddress)
            return mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE)
        }
        while code == 0 {
            let found = try buffer(key, "mdb_cursor_get")
            guard found.count >= prefix.count, found.prefix(prefix.count).elementsEqual(prefix) else { break }
            result.append(([UInt8](found), [UInt8](try buffer(data, "mdb_cursor_get"))))
            code = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        if code != 0 && code != MDB_NOTFOUND { try check("mdb_cursor_get", code) }
        return result
    }

    /// Removes `key`; a missing key is fine.
    func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws(LMDBFailure) {
        let code = key.withUnsafeBytes { buffer in
            var keyValue = MDB_val(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
            return mdb_del(txn, dbi, &keyValue, nil)
        }
        if code == MDB_NOTFOUND { return }
        try check("mdb_del", code)
    }

    /// Up to `limit` entries in key order, starting after `after` (from the first without it).
    /// Up to `limit` entries of `dbi` in key order, from the first key past `after`, ending
    /// early once the values copied reach `byteLimit`; with `values` false, each value is left
    /// unread (empty), not copied out of the map: a listing of keys then touches no value's
    /// pages but the first of a large one.
    ///
    /// `value` makes what is listed of each key's value where LMDB maps it (by default, a copy),
    /// and the bytes it makes count toward `byteLimit`.
    func scan(
        _ dbi: MDB_dbi, after: [UInt8]?, limit: Int, values: Bool = true, byteLimit: Int = .max,
        value make: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> [UInt8] = { [UInt8]($1) }
    ) throws -> [(key: [UInt8], value: [UInt8])] {
        var cursor: OpaquePointer?
        try check("mdb_cursor_open", mdb_cursor_open(txn, dbi, &cursor))
        guard let cursor else { throw LMDBFailure(call: "mdb_cursor_open", code: EINVAL) }
        defer { mdb_cursor_close(cursor) }
        var result = [(key: [UInt8], value: [UInt8])]()
        var key = MDB_val()
        var data = MDB_val()
        var code: Int32
        var start = after ?? []
        if after != nil {
            code = start.withUnsafeMutableBytes { buffer in
                key = MDB_val(mv_size: buffer.count, mv_data: buffer.baseAddress)
                return mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE)
            }
            if code == 0, try [UInt8](buffer(key, "mdb_cursor_get")) == start {
                code = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
            }
        } else {
            code = mdb_cursor_get(cursor, &key, &data, MDB_FIRST)
        }
        start = []
        var size = 0
        while code == 0 && result.count < limit && size < byteLimit {
            let keyBytes = try buffer(key, "mdb_cursor_get")
            result.append(([UInt8](keyBytes), values ? try make(keyBytes, try buffer(data, "mdb_cursor_get")) : []))
            size += result[result.count - 1].value.count
            code = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        if code != 0 && code != MDB_NOTFOUND { try check("mdb_cursor_get", code) }
        return result
    }
}

/// Where a file is mapped in this process, and how long it is known to be: to check that a
/// pointer LMDB hands out (into its read-only map of `data.mdb`) lies inside the file before it
/// is read. LMDB does not say where its map is (`me_mapaddr` is only set for `MDB_FIXEDMAP`),
/// so ``locate(_:)`` finds the mapping of the file's device and inode in /proc/self/maps (Linux;
/// elsewhere there is no check).
///
/// The length is cached and read again (`stat`) only when a value seems to run past it: LMDB
/// never shortens `data.mdb`, so a cached length is a lower bound, and the check costs nothing
/// on the usual path. `@unchecked Sendable`: `start` and `path` are constants, `length` atomic.
final class MappedFile: @unchecked Sendable {
    let start: UInt
    /// LMDB's descriptor of the data file: open as long as the environment, which outlives
    /// every transaction that checks a value here.
    let descriptor: Int32
    private let length: Atomic<Int>

    private init(start: UInt, descriptor: Int32, length: Int) {
        self.start = start
        self.descriptor = descriptor
        self.length = Atomic(length)
    }

    /// `nil` if `count` bytes at `address` lie inside the file (whose length it reads again
    /// before saying no); otherwise their offset and the file's length, for the error.
    func outside(_ address: UInt, count: Int) -> (offset: Int, length: Int)? {
        let known = length.load(ordering: .relaxed)
        if Self.contains(address, count, start, known) { return nil }
        var info = stat()
        let current = fstat(descriptor, &info) == 0 ? Int(info.st_size) : known
        if current > known { length.store(current, ordering: .relaxed) }
        if Self.contains(address, count, start, current) { return nil }
        return (Int(bitPattern: address &- start), current)
    }

    /// Whether `address` lies in the map of `mapSize` bytes (a write transaction's own pages
    /// lie elsewhere).
    func maps(_ address: UInt, within mapSize: Int) -> Bool {
        address >= start && address - start < UInt(max(mapSize, 0))
    }

    private static func contains(_ address: UInt, _ count: Int, _ start: UInt, _ length: Int) -> Bool {
        address >= start && count <= length && address - start <= UInt(length - count)
    }

    static func locate(_ descriptor: Int32) -> MappedFile? {
        var file = stat()
        guard fstat(descriptor, &file) == 0, let maps = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(maps) }
        // The kernel prints the device as major:minor in hex (glibc's encoding of st_dev).
        let device = UInt64(file.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        // On an overlay file system (a container's) the map names the file under another device
        // than `stat` gives: then the one map at offset 0 of the file the descriptor names, by
        // the path the kernel prints for both.
        let openPath = linkTarget("/proc/self/fd/\(descriptor)")
        var byPath = [UInt]()
        while getline(&line, &capacity, maps) > 0, let line {
            // start-end perms offset major:minor inode path
            let fields = String(cString: line).split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, UInt64(fields[2], radix: 16) == 0,
                  let start = fields[0].split(separator: "-").first.flatMap({ UInt($0, radix: 16) }) else { continue }
            if fields.count == 6, let openPath, fields[5].trimmingCharacters(in: .whitespacesAndNewlines) == openPath { byPath.append(start) }
            guard UInt64(fields[4]) == UInt64(file.st_ino), fields[3].split(separator: ":").map({ UInt64($0, radix: 16) }) == [major, minor] else { continue }
            return MappedFile(start: start, descriptor: descriptor, length: Int(file.st_size))
        }
        guard byPath.count == 1 else { return nil }
        return MappedFile(start: byPath[0], descriptor: descriptor, length: Int(file.st_size))
    }

    /// Where the symbolic link at `path` points, or `nil`.
    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4_097)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// What the checks before opening need of LMDB's newest meta page, read with `pread` (never
/// through the map): LMDB's data format version 1 (`MDB_meta` after a 16-byte page header, in
/// pages 0 and 1, the one with the larger transaction id being current), on a 64-bit system.
struct LMDBMeta: Equatable {
    /// The last page in use, and the roots of the free list and the main database (`nil`:
    /// empty), with the free list's depth.
    let lastPage: Int
    let freeRoot: Int?
    let freeDepth: Int
    let mainRoot: Int?
    /// The map size the last writer recorded (`mm_mapsize`), in bytes.
    let mapSize: Int

    private static let magic: UInt32 = 0xBEEF_C0DE

    /// Whether the LMDB this process runs is one whose file layout this reads: 0.9.
    private static let isLayoutKnown: Bool = {
        var (major, minor, patch): (Int32, Int32, Int32) = (0, 0, 0)
        _ = mdb_version(&major, &minor, &patch)
        return major == 0 && minor == 9
    }()

    /// `pageSize`: the environment's, or `nil` for the one page 0 records (LMDB's page size is the
    /// system's up to 32 KiB, and a file may come from another system).
    static func newest(in path: String, pageSize knownPageSize: Int? = nil) -> LMDBMeta? {
        // The layout below is LMDB 0.9's; LMDB 1.0's pages have longer headers (its files and
        // 0.9's do not open in the other), and nothing is read from them.
        guard MemoryLayout<Int>.size == 8, isLayoutKnown else { return nil }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var newest: (txnid: UInt64, meta: LMDBMeta)?
        var pageSize = knownPageSize ?? 0
        for page in 0..<2 {
            var bytes = [UInt8](repeating: 0, count: 160)
            let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(page * pageSize)) }
            guard read == bytes.count else { continue }
            if page == 0, knownPageSize == nil {
                // mm_psize: the free database's md_pad, right after magic, version, address and map size.
                let recorded = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16 + 24, as: UInt32.self) })
                guard recorded >= 512, recorded <= 65_536, recorded & (recorded - 1) == 0 else { return nil }
                pageSize = recorded
            }
            func u64(_ offset: Int) -> UInt64 { bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16 + offset, as: UInt64.self) } }
            func u16(_ offset: Int) -> UInt16 { bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16 + offset, as: UInt16.self) } }
            guard bytes.withUnsafeBytes({ $0.loadUnaligned(fromByteOffset: 16, as: UInt32.self) }) == magic else { continue }
            // MDB_db: pad (4), flags (2), depth (2), branch, leaf and overflow pages, entries, root.
            func root(_ database: Int) -> Int? {
                let value = u64(24 + database * 48 + 40)
                return value == UInt64.max ? nil : Int(truncatingIfNeeded: value)
            }
            let meta = LMDBMeta(
                lastPage: Int(truncatingIfNeeded: u64(120)), freeRoot: root(0), freeDepth: Int(u16(24 + 6)), mainRoot: root(1),
                mapSize: Int(truncatingIfNeeded: u64(16)))
            let txnid = u64(128)
            if newest == nil || txnid > newest!.txnid { newest = (txnid, meta) }
        }
        return newest?.meta
    }
}
