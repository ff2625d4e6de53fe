#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Arbor
import CSQLite

// The raw SQLite C calls of the adapter. Nothing else in ArborSQLite touches `sqlite3_*`
// (or libc): every failure leaves this file as an `ArborError` naming the engine, the C call,
// the database file and SQLite's own message.

/// `SQLITE_TRANSIENT` is a macro (`((sqlite3_destructor_type)-1)`) that Swift does not import:
/// it tells `sqlite3_bind_blob` / `sqlite3_bind_text` to copy the bytes before returning.
var SQLITE_TRANSIENT: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

/// A SQLite result code (primary or extended), with the codes the adapter looks at by name.
struct SQLiteResult: Equatable, Sendable, CustomStringConvertible {
    let rawValue: Int32
    init(_ rawValue: Int32) { self.rawValue = rawValue }

    static let ok = SQLiteResult(SQLITE_OK)
    static let row = SQLiteResult(SQLITE_ROW)
    static let done = SQLiteResult(SQLITE_DONE)
    static let error = SQLiteResult(SQLITE_ERROR)
    static let permission = SQLiteResult(SQLITE_PERM)
    static let busy = SQLiteResult(SQLITE_BUSY)
    static let locked = SQLiteResult(SQLITE_LOCKED)
    static let readOnly = SQLiteResult(SQLITE_READONLY)
    static let ioError = SQLiteResult(SQLITE_IOERR)
    static let corrupt = SQLiteResult(SQLITE_CORRUPT)
    static let full = SQLiteResult(SQLITE_FULL)
    static let cantOpen = SQLiteResult(SQLITE_CANTOPEN)
    static let notADatabase = SQLiteResult(SQLITE_NOTADB)
    static let auth = SQLiteResult(SQLITE_AUTH)
    /// An extended code: the database's folder cannot be written, so its WAL files cannot be made.
    static let readOnlyDirectory = SQLiteResult(SQLITE_READONLY | (6 << 8))

    /// The primary code of an extended result code (`SQLITE_IOERR_FSYNC` → `SQLITE_IOERR`).
    var primary: SQLiteResult { SQLiteResult(rawValue & 0xFF) }

    /// SQLite's English name for the code, such as "database is locked".
    var description: String { String(cString: sqlite3_errstr(rawValue)) }

    /// The kind of ``ArborError`` this result means.
    var arborCode: ArborError.Code {
        switch primary {
        case .notADatabase: .unsupportedFormat
        case .corrupt: .corruptObject
        case .permission, .readOnly, .auth: .permissionDenied
        case .ioError, .full: .io
        case .cantOpen: .notFound
        default: .engine
        }
    }
}

/// One connection to one database file: owns the `sqlite3*` handle and every prepared statement,
/// finalizes and closes them in ``close()`` or `deinit`.
///
/// Not thread-safe by itself (it is opened with `SQLITE_OPEN_NOMUTEX`). `@unchecked Sendable`
/// because ``SQLiteBackend`` keeps it inside a `Mutex` and touches it only in `withLock`
/// closures, so exactly one thread uses it at a time; the conformance only lets the mutex's
/// closures hand it to the code that runs under the lock (region checking cannot see that the
/// connection never outlives the closure). Nothing else holds a reference to it.
final class SQLiteConnection: @unchecked Sendable {
    let path: String
    private var handle: OpaquePointer?
    /// Statements prepared once (`SQLITE_PREPARE_PERSISTENT`) and reset after every use.
    private var statements: [String: OpaquePointer] = [:]

    private init(path: String, handle: OpaquePointer) {
        self.path = path
        self.handle = handle
    }

    deinit { closeHandle() }

    // MARK: Opening

    /// Opens the existing database file at `path` for reading and writing. Never creates a file.
    /// With `readOnly`, opens the file read-only and immutable (`?mode=ro&immutable=1`): for a
    /// file on a read-only file system, which nothing can change and where WAL's shared-memory
    /// file cannot be made.
    static func connect(path: String, operation: String, readOnly: Bool = false) throws -> SQLiteConnection {
        var handle: OpaquePointer?
        let common = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE
        let (name, flags) = readOnly
            ? (immutableURI(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | common)
            : (path, SQLITE_OPEN_READWRITE | common)
        let result = SQLiteResult(sqlite3_open_v2(name, &handle, flags, nil))
        guard result == .ok, let handle else {
            // Even a failed open may allocate a handle that holds the message; release it.
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? result.description
            // SQLite's "unable to open database file" hides the cause: the system's error says it.
            let systemError = handle.map { sqlite3_system_errno($0) } ?? 0
            if let handle { sqlite3_close_v2(handle) }
            var code = result.arborCode
            var cause = ""
            if systemError != 0 {
                cause = ": \(String(cString: strerror(systemError)))"
                if systemError == EACCES || systemError == EPERM {
                    code = .permissionDenied
                    cause += " (does the store, or its folder, belong to another user?)"
                }
            }
            throw ArborError(code, "sqlite3_open_v2 \(path) failed: \(message)\(cause) (\(result.description), code \(result.rawValue))", backend: "sqlite", operation: operation)
        }
        sqlite3_extended_result_codes(handle, 1)
        return SQLiteConnection(path: path, handle: handle)
    }

    /// A `file:` URI naming `path`, read-only and immutable. `%`, `?` and `#` are escaped; an
    /// absolute path gets an empty authority (`file:///…`), so that one starting `//` is not
    /// read as a host.
    static func immutableURI(_ path: String) -> String {
        var escaped = ""
        for character in path {
            switch character {
            case "%": escaped += "%25"
            case "?": escaped += "%3f"
            case "#": escaped += "%23"
            default: escaped.append(character)
            }
        }
        return (path.hasPrefix("/") ? "file://" : "file:") + escaped + "?mode=ro&immutable=1"
    }

    // MARK: Errors

    /// The error for a failed C call, with SQLite's message for this connection.
    func failure(_ call: String, _ result: SQLiteResult, operation: String? = nil) -> ArborError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? result.description
        var code = result.arborCode
        var cause = ""
        if result.primary == .busy || result.primary == .locked {
            code = .engine
        } else if result == .readOnlyDirectory {
            cause = ": Permission denied: this user cannot write its folder, where WAL mode must make \(path.split(separator: "/").last.map(String.init) ?? path)-shm beside it"
        } else if result.primary == .cantOpen || result.primary == .ioError, let handle {
            // "unable to open database file" covers a missing file and a folder this user may not
            // write (its -wal or -shm cannot be made): the system's error tells them apart.
            let system = sqlite3_system_errno(handle)
            switch system {
            case EACCES, EPERM, EROFS:
                code = .permissionDenied
                cause = ": \(String(cString: strerror(system)))"
            case ENOENT where result.primary == .cantOpen:
                code = .notFound
            case 0:
                break
            default:
                cause = ": \(String(cString: strerror(system)))"
            }
        }
        return ArborError(code, "\(call) on \(path) failed: \(message)\(cause) (\(result.description), code \(result.rawValue))", backend: "sqlite", operation: operation)
    }

    private func openHandle() throws -> OpaquePointer {
        guard let handle else { throw ArborError(.closed, "the store is closed", backend: "sqlite") }
        return handle
    }

    // MARK: Statements

    /// Runs `sql` (one or more statements without parameters or wanted results).
    func execute(_ sql: String) throws {
        let handle = try openHandle()
        let result = SQLiteResult(sqlite3_exec(handle, sql, nil, nil, nil))
        guard result == .ok else { throw failure("sqlite3_exec(\(shortened(sql)))", result) }
    }

    /// The integer value of `PRAGMA name` (0 if it returns no row): for diagnostics.
    func pragmaValue(_ name: String) throws -> Int {
        try withStatement("PRAGMA \(name)") { statement in try statement.step() ? statement.integer(0) : 0 }
    }

    /// Sets the time SQLite waits for another connection's lock before giving up with SQLITE_BUSY.
    func setBusyTimeout(milliseconds: Int32) throws {
        let result = SQLiteResult(sqlite3_busy_timeout(try openHandle(), milliseconds))
        guard result == .ok else { throw failure("sqlite3_busy_timeout", result) }
    }

    /// Runs `body` with the statement for `sql`, prepared on first use and kept; afterwards the
    /// statement is reset and its bindings cleared, whatever `body` did.
    func withStatement<R>(_ sql: String, _ body: (SQLiteStatement) throws -> R) throws -> R {
        let handle = try openHandle()
        let pointer: OpaquePointer
        if let cached = statements[sql] {
            pointer = cached
        } else {
            var prepared: OpaquePointer?
            let result = SQLiteResult(sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil))
            guard result == .ok, let prepared else {
                if let prepared { sqlite3_finalize(prepared) }
                throw failure("sqlite3_prepare_v3(\(shortened(sql)))", result)
            }
            statements[sql] = prepared
            pointer = prepared
        }
        defer {
            sqlite3_reset(pointer)
            sqlite3_clear_bindings(pointer)
        }
        return try body(SQLiteStatement(pointer: pointer, connection: self, sql: sql))
    }

    /// Runs `body` inside one transaction: `BEGIN IMMEDIATE` (takes the write lock at once, waiting
    /// up to the busy timeout for other processes) or `BEGIN` (a read snapshot). Commits if `body`
    /// returns, rolls back if it throws.
    func transaction<R>(immediate: Bool, _ body: () throws -> R) throws -> R {
        try endLeftoverTransaction()
        try withStatement(immediate ? "BEGIN IMMEDIATE" : "BEGIN") { try $0.run() }
        let value: R
        do {
            value = try body()
            try withStatement("COMMIT") { try $0.run() }
        } catch {
            // After some errors SQLite has already rolled back; a failing ROLLBACK then says
            // "no transaction is active", which adds nothing to the original error.
            if let handle, sqlite3_get_autocommit(handle) == 0 {
                _ = try? withStatement("ROLLBACK") { try $0.run() }
            }
            throw error
        }
        return value
    }

    /// Rolls back a transaction a failed ROLLBACK left open, which would fail the next BEGIN (or
    /// VACUUM) and every later one, and pin a reader's snapshot, so that the WAL grows.
    func endLeftoverTransaction() throws {
        if let handle, sqlite3_get_autocommit(handle) == 0 {
            try withStatement("ROLLBACK") { try $0.run() }
        }
    }

    /// Checkpoints the write-ahead log and truncates it to nothing (`PRAGMA
    /// wal_checkpoint(TRUNCATE)`). `false` if a reader's snapshot (or a writer past the busy
    /// timeout) kept it from finishing: the pragma reports that in its row, not as an error.
    func checkpointTruncating() throws -> Bool {
        try withStatement("PRAGMA wal_checkpoint(TRUNCATE)") { statement in
            guard try statement.step() else { return true }
            return statement.integer(0) == 0
        }
    }

    /// Runs `body`, which executes `statements` reads, so that they all see one snapshot: in a
    /// `BEGIN` transaction, or, for a single statement, without one (in autocommit mode a
    /// statement reads one snapshot by itself, and skipping `BEGIN` and `COMMIT` saves two of the
    /// three statements of a point read).
    func readSnapshot<R>(statements: Int, _ body: () throws -> R) throws -> R {
        if statements <= 1, let handle, sqlite3_get_autocommit(handle) != 0 { return try body() }
        return try transaction(immediate: false, body)
    }

    // MARK: Closing

    /// Finalizes every statement and closes the connection. Calling it twice is harmless.
    func close() throws {
        guard let handle else { return }
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        let result = SQLiteResult(sqlite3_close(handle))
        guard result == .ok else {
            let error = failure("sqlite3_close", result)
            // sqlite3_close_v2 defers the close until the last statement is gone, never leaking.
            sqlite3_close_v2(handle)
            self.handle = nil
            throw error
        }
        self.handle = nil
    }

    private func closeHandle() {
        guard let handle else { return }
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close_v2(handle)
        self.handle = nil
    }
}

/// The file-system calls around the database file.
enum SQLiteFiles {
    /// Creates the database file exclusively (`O_CREAT | O_EXCL`, mode 0600), so that an existing
    /// file is never taken over, even by two processes racing to create a store at one path.
    static func createExclusively(_ path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            let code = errno
            let reason = String(cString: strerror(code))
            switch code {
            case EEXIST:
                throw ArborError(.alreadyExists, "\(path) already exists (a store or another file); it was left untouched", backend: "sqlite", operation: "create")
            case ENOENT:
                throw ArborError(.notFound, "cannot create \(path): its folder does not exist (\(reason))", backend: "sqlite", operation: "create")
            case ENOTDIR:
                throw ArborError(.notFound, "cannot create \(path): a part of its path is a file, not a folder (\(reason))", backend: "sqlite", operation: "create")
            case EACCES, EPERM, EROFS:
                throw ArborError(.permissionDenied, "cannot create \(path): \(reason)", backend: "sqlite", operation: "create")
            default:
                throw ArborError(.io, "cannot create \(path): \(reason)", backend: "sqlite", operation: "create")
            }
        }
        close(descriptor)
    }

    /// Whether `path` is on a file system mounted read-only (`false` if that cannot be told).
    static func isOnReadOnlyFileSystem(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) == 0 && (UInt(info.f_flag) & UInt(ST_RDONLY)) != 0
    }

    /// The id of another process that has the database at `path` open in WAL mode, or `nil`
    /// (none, or it cannot be told): every connection holds a shared lock on the dead-man
    /// switch byte of the `-shm` file (byte 128) for as long as it is open.
    static func processWithTheStoreOpen(_ path: String) -> pid_t? {
        FileLockProbe.process(holdingByte: 128, of: path + "-shm")
    }

    /// The length of the file at `path`, or `nil` if there is none.
    static func length(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Removes a database file and its WAL and shared-memory files (after a failed create).
    static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    /// What is at `path`: nothing, a regular file, or something else (a folder, a device).
    static func kind(_ path: String) -> (exists: Bool, isRegularFile: Bool) {
        var info = stat()
        guard stat(path, &info) == 0 else { return (false, false) }
        return (true, (info.st_mode & S_IFMT) == S_IFREG)
    }
}

/// A prepared statement lent for the duration of one ``SQLiteConnection/withStatement(_:_:)``;
/// never kept beyond it. (It was `~Copyable` to enforce that, but Swift 6.3 crashes compiling
/// that in release builds: "Cannot initialize a nonCopyable type with a guaranteed value".)
struct SQLiteStatement {
    let pointer: OpaquePointer
    let connection: SQLiteConnection
    let sql: String

    private func check(_ call: String, _ code: Int32) throws {
        let result = SQLiteResult(code)
        guard result == .ok else { throw connection.failure("\(call)(\(shortened(sql)))", result) }
    }

    /// Binds bytes (copied) to the 1-based parameter `index`.
    func bind(_ bytes: [UInt8], at index: Int32) throws {
        try bytes.withUnsafeBytes { try bind($0, at: index) }
    }

    /// Binds the 32 bytes of a hash to the 1-based parameter `index`.
    func bind(_ hash: Hash, at index: Int32) throws {
        try hash.withUnsafeBytes { try bind($0, at: index) }
    }

    /// Binds a blob (copied) to the 1-based parameter `index`.
    private func bind(_ buffer: UnsafeRawBufferPointer, at index: Int32) throws {
        // A zero-length blob needs a non-null pointer, or SQLite binds NULL.
        let base = buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
        // The 64-bit call: a length past Int32 is SQLite's to refuse (SQLITE_TOOBIG), not a trap.
        try check("sqlite3_bind_blob64", sqlite3_bind_blob64(pointer, index, base, sqlite3_uint64(buffer.count), SQLITE_TRANSIENT))
    }

    /// Binds UTF-8 text (copied) to the 1-based parameter `index`.
    func bind(_ text: String, at index: Int32) throws {
        try check("sqlite3_bind_text", sqlite3_bind_text(pointer, index, text, -1, SQLITE_TRANSIENT))
    }

    /// Binds an integer to the 1-based parameter `index`.
    func bind(_ value: Int, at index: Int32) throws {
        try check("sqlite3_bind_int64", sqlite3_bind_int64(pointer, index, Int64(value)))
    }

    /// Resets the statement to run again (bindings stay until rebound).
    func reset() {
        sqlite3_reset(pointer)
    }

    /// Advances to the next row: `true` if there is one, `false` when the statement is done.
    func step() throws -> Bool {
        let result = SQLiteResult(sqlite3_step(pointer))
        if result == .row { return true }
        if result == .done { return false }
        throw connection.failure("sqlite3_step(\(shortened(sql)))", result)
    }

    /// Runs a statement that returns no rows (or whose rows are not wanted).
    func run() throws {
        while try step() {}
    }

    /// The bytes of column `index` (0-based) of the current row.
    func bytes(_ index: Int32) -> [UInt8] {
        withBlob(index) { [UInt8]($0) }
    }

    /// Calls `body` with column `index`'s bytes where SQLite holds them: valid only until the
    /// statement steps again or is reset.
    func withBlob<R>(_ index: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        // The pointer first, then the length, as SQLite's documentation orders the calls.
        let base = sqlite3_column_blob(pointer, index)
        let count = Int(sqlite3_column_bytes(pointer, index))
        guard count > 0, let base else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Column `index` as text, or `nil` if it is NULL.
    func text(_ index: Int32) -> String? {
        guard let base = sqlite3_column_text(pointer, index) else { return nil }
        return String(cString: base)
    }

    /// Column `index` as an integer.
    func integer(_ index: Int32) -> Int {
        Int(sqlite3_column_int64(pointer, index))
    }

    /// Whether column `index` is NULL.
    func isNull(_ index: Int32) -> Bool {
        sqlite3_column_type(pointer, index) == SQLITE_NULL
    }

    /// How many columns the statement's rows have (after SQLite prepared it again for a schema
    /// another connection changed, the new count).
    var columnCount: Int32 { sqlite3_column_count(pointer) }
}

/// The start of a statement for an error message: a long one is cut at 60 characters and says
/// so, rather than read as SQL that ends mid-clause.
func shortened(_ sql: String) -> String {
    sql.count > 60 ? sql.prefix(60) + "…" : sql
}
