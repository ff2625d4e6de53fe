#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Arbor
import CLibPQ
import Synchronization

// The raw libpq calls of the PostgreSQL adapter. Nothing else in the adapter calls libpq: this
// file owns every `PGconn*` (one `PGConnection`, `PQfinish` in its deinit) and every `PGresult*`
// (one `PGResult`, `PQclear` in its deinit), and turns libpq's failures into `ArborError`s that
// never contain the password.
//
// Every function here blocks. The adapter calls them only on its connections' own dispatch
// queues (see ConnectionPool.swift), never on the Swift concurrency pool.

/// libpq's result status (`ExecStatusType`).
struct PQResultStatus: Hashable, CustomStringConvertible {
    let rawValue: UInt32
    init(_ status: ExecStatusType) { rawValue = status.rawValue }

    static let emptyQuery = PQResultStatus(PGRES_EMPTY_QUERY)
    static let commandOK = PQResultStatus(PGRES_COMMAND_OK)
    static let tuplesOK = PQResultStatus(PGRES_TUPLES_OK)
    static let copyIn = PQResultStatus(PGRES_COPY_IN)
    static let copyOut = PQResultStatus(PGRES_COPY_OUT)
    static let badResponse = PQResultStatus(PGRES_BAD_RESPONSE)
    static let nonfatalError = PQResultStatus(PGRES_NONFATAL_ERROR)
    static let fatalError = PQResultStatus(PGRES_FATAL_ERROR)

    var description: String { String(cString: PQresStatus(ExecStatusType(rawValue: rawValue))) }
}

/// libpq's connection status (`ConnStatusType`).
struct PQConnectionStatus: Hashable {
    let rawValue: UInt32
    init(_ status: ConnStatusType) { rawValue = status.rawValue }

    static let ok = PQConnectionStatus(CONNECTION_OK)
    static let bad = PQConnectionStatus(CONNECTION_BAD)
}

/// A PostgreSQL error code (SQLSTATE), such as `23505`.
struct SQLState: Hashable, CustomStringConvertible {
    let code: String
    init(_ code: String) { self.code = code }

    /// The first two characters: the class (`08` connection exception, `28` authorization, ...).
    var errorClass: String { String(code.prefix(2)) }
    var description: String { code }

    static let uniqueViolation = SQLState("23505")
    static let duplicateTable = SQLState("42P07")
    static let insufficientPrivilege = SQLState("42501")
    static let invalidCatalogName = SQLState("3D000")  // the database does not exist
    static let invalidPassword = SQLState("28P01")
    static let adminShutdown = SQLState("57P01")  // pg_terminate_backend, server shutdown
    static let crashShutdown = SQLState("57P02")
    static let cannotConnectNow = SQLState("57P03")
    static let diskFull = SQLState("53100")
    static let readOnlyTransaction = SQLState("25006")  // a standby, or default_transaction_read_only
    static let tooManyConnections = SQLState("53300")
    static let lockNotAvailable = SQLState("55P03")  // lock_timeout, NOWAIT
}

/// Type OIDs of the parameters the adapter sends.
enum PGType {
    static let bool: Oid = 16
    static let bytea: Oid = 17
    static let int8: Oid = 20
    static let text: Oid = 25
    static let byteaArray: Oid = 1001
}

/// A parameter value, always sent in binary format.
enum PGValue {
    case bytes([UInt8])
    case text(String)
    case int64(Int64)
    /// `bytea[]` in PostgreSQL's binary array format.
    case byteaArray([UInt8])
    case null

    var type: Oid {
        switch self {
        case .bytes: PGType.bytea
        case .text: PGType.text
        case .int64: PGType.int8
        case .byteaArray: PGType.byteaArray
        case .null: 0
        }
    }

    func append(to buffer: inout [UInt8]) -> Int? {
        switch self {
        case .bytes(let bytes), .byteaArray(let bytes):
            buffer.append(contentsOf: bytes)
            return bytes.count
        case .text(let text):
            buffer.append(contentsOf: text.utf8)
            return text.utf8.count
        case .int64(let value):
            withUnsafeBytes(of: value.bigEndian) { buffer.append(contentsOf: $0) }
            return 8
        case .null:
            return nil
        }
    }

    /// The binary form of a one-dimensional `bytea[]` without nulls:
    /// ndim, has-nulls flag, element type, (length, lower bound) per dimension, then each element
    /// as a 4-byte length and its bytes. All integers big-endian.
    static func byteaArray<C: Collection>(_ elements: C, byteCount: Int = 0, _ bytes: (C.Element, inout [UInt8]) -> Void) -> PGValue {
        var buffer = [UInt8]()
        buffer.reserveCapacity(20 + elements.count * 4 + byteCount)
        func int32(_ value: Int32) { withUnsafeBytes(of: value.bigEndian) { buffer.append(contentsOf: $0) } }
        int32(elements.isEmpty ? 0 : 1)
        int32(0)
        int32(Int32(bitPattern: PGType.bytea))
        if !elements.isEmpty {
            int32(Int32(elements.count))
            int32(1)
        }
        for element in elements {
            let lengthAt = buffer.count
            int32(0)
            let start = buffer.count
            bytes(element, &buffer)
            let length = Int32(buffer.count - start).bigEndian
            withUnsafeBytes(of: length) { buffer.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
        }
        return .byteaArray(buffer)
    }

    static func hashArray(_ hashes: some Collection<Hash>) -> PGValue {
        byteaArray(hashes, byteCount: hashes.count * Hash.byteCount) { hash, buffer in hash.append(to: &buffer) }
    }
}

/// A statement prepared once per connection, on first use.
struct PreparedStatement: Sendable {
    let name: String
    let sql: String
    let types: [Oid]
}

/// Where to connect, and how to keep the password out of every message.
struct ConnectionTarget: Sendable {
    /// The URL as given (password included); only handed to libpq.
    let url: String
    let connectTimeout: Int
    /// Seconds a statement waits for a lock before it fails (0: without bound), where neither
    /// the server, the database, the role nor the URL sets `lock_timeout` (to 0 included).
    let lockTimeout: Int
    /// The password as written and percent-decoded, longest first.
    let secrets: [String]

    init(url: String, connectTimeout: Int, lockTimeout: Int = 300) {
        self.url = url
        self.connectTimeout = connectTimeout
        self.lockTimeout = lockTimeout
        secrets = ConnectionTarget.secrets(in: url)
    }

    /// The URL with the password replaced by `***`; for what is not a URL, only that it is not.
    var redacted: String { isURI ? scrub(url) : "(not a postgres:// URL)" }

    /// `text` with every secret replaced by `***` (matched byte for byte, see ``URLSecrets``).
    func scrub(_ text: String) -> String {
        URLSecrets.redacting(secrets, in: text)
    }

    /// The password of the user info and of any `password=` query parameter.
    static func secrets(in url: String) -> [String] { URLSecrets.secrets(in: url) }

    /// Whether libpq reads `url` as a URI (its `postgresql://` or `postgres://` prefix, which
    /// libpq matches case-sensitively), the only form whose secrets ``secrets(in:)`` finds. libpq
    /// reads anything else as `key=value` settings, which would carry a password into messages.
    var isURI: Bool { url.utf8.starts(with: "postgresql://".utf8) || url.utf8.starts(with: "postgres://".utf8) }

    /// Whether the URL holds more than one `@` before its path: an `@` of the user name or
    /// password not written as `%40`. libpq ends the user info at the first `@` before any `/`
    /// (a `?` does not end it) and reads the host from there on.
    var hasSeveralAtSigns: Bool {
        guard let start = url.range(of: "://")?.upperBound else { return false }
        return url[start...].prefix { $0 != "/" }.filter { $0 == "@" }.count > 1
    }

    /// Whether the first `@` before the URL's path comes after a `?`: an `@` of a query
    /// parameter (`postgres://host?password=a@b`) that libpq, which ends the user info there,
    /// would read as the end of a user name, taking what follows for the host.
    var hasAtSignAfterQueryBeforePath: Bool {
        guard let start = url.utf8.firstRange(of: "://".utf8)?.upperBound else { return false }
        let beforePath = url.utf8[start...].prefix { $0 != UInt8(ascii: "/") }
        guard let at = beforePath.firstIndex(of: UInt8(ascii: "@")), let query = beforePath.firstIndex(of: UInt8(ascii: "?")) else { return false }
        return query < at
    }
}

extension ConnectionTarget: CustomReflectable {
    /// Without the URL's secrets: `dump` and debuggers show the redacted URL.
    var customMirror: Mirror { Mirror(self, children: ["url": redacted, "connectTimeout": connectTimeout]) }
}

/// One result (`PGresult*`), cleared when released.
final class PGResult {
    private let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { PQclear(pointer) }

    var status: PQResultStatus { PQResultStatus(PQresultStatus(pointer)) }
    var rowCount: Int { Int(PQntuples(pointer)) }
    var columnCount: Int { Int(PQnfields(pointer)) }
    /// Rows affected by INSERT, UPDATE or DELETE.
    var affectedRows: Int { Int(String(cString: PQcmdTuples(pointer))) ?? 0 }
    var sqlState: SQLState? { field(Int32(UInt8(ascii: "C"))).map(SQLState.init) }
    var errorMessage: String { String(cString: PQresultErrorMessage(pointer)) }

    private func field(_ code: Int32) -> String? {
        PQresultErrorField(pointer, code).map { String(cString: $0) }
    }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(pointer, Int32(row), Int32(column)) != 0 }

    /// A value's bytes (binary results: `bytea` as is, `text` as UTF-8), or `nil` for NULL.
    func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        if isNull(row, column) { return nil }
        let length = Int(PQgetlength(pointer, Int32(row), Int32(column)))
        guard length > 0, let value = PQgetvalue(pointer, Int32(row), Int32(column)) else { return [] }
        return value.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }

    func text(_ row: Int, _ column: Int) -> String? {
        bytes(row, column).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A binary `int8` value, or `nil` for NULL or another length; read in place.
    func int64(_ row: Int, _ column: Int) -> Int64? {
        guard let value = fixedSize(row, column, 8) else { return nil }
        return Int64(bigEndian: UnsafeRawPointer(value).loadUnaligned(as: Int64.self))
    }

    /// A binary `boolean` value, or `nil` for NULL or another length; read in place.
    func bool(_ row: Int, _ column: Int) -> Bool? {
        fixedSize(row, column, 1).map { UnsafeRawPointer($0).load(as: UInt8.self) != 0 }
    }

    /// A value of exactly `length` bytes in the result's memory, or `nil`.
    private func fixedSize(_ row: Int, _ column: Int, _ length: Int) -> UnsafeMutablePointer<CChar>? {
        guard !isNull(row, column), PQgetlength(pointer, Int32(row), Int32(column)) == length else { return nil }
        return PQgetvalue(pointer, Int32(row), Int32(column))
    }

    /// A 32-byte `bytea` value as a hash.
    func hash(_ row: Int, _ column: Int) -> Hash? {
        guard !isNull(row, column), PQgetlength(pointer, Int32(row), Int32(column)) == Hash.byteCount,
            let value = PQgetvalue(pointer, Int32(row), Int32(column))
        else { return nil }
        return value.withMemoryRebound(to: UInt8.self, capacity: Hash.byteCount) {
            Hash(bytes: UnsafeBufferPointer(start: $0, count: Hash.byteCount))
        }
    }

    /// Each row's object (columns `hash`, `bytes` or NULL where the object is left to read by
    /// hash, and its size), in row order. A row whose key is not a 32-byte hash, or whose bytes
    /// are NULL (no size), is damage to report, not a row to skip: an enumeration that skipped it
    /// would also end early (a page shorter than asked for is the last).
    func enumeratedObjects() throws -> [EnumeratedObject] {
        try (0..<rowCount).map { row in
            let hash = try checkedHash(row, 0)
            guard let size = int64(row, 2) else {
                throw ArborError(.corruptObject, "object \(hash) has no bytes (NULL)", backend: "postgres", operation: "enumerate")
            }
            return EnumeratedObject(hash: hash, size: Int(size), bytes: bytes(row, 1))
        }
    }

    /// Each row's hash (column 0), in row order; ``enumeratedObjects()`` says why a bad one throws.
    func hashes() throws -> [Hash] {
        try (0..<rowCount).map { try checkedHash($0, 0) }
    }

    private func checkedHash(_ row: Int, _ column: Int) throws -> Hash {
        guard let hash = hash(row, column) else {
            throw ArborError(.corruptObject, "an object's key is not a 32-byte hash", backend: "postgres", operation: "enumerate")
        }
        return hash
    }

    /// Adds each row's object (a `hash`, `bytes` pair of columns) to `objects`.
    func collectObjects(into objects: inout [Hash: [UInt8]]) {
        for row in 0..<rowCount {
            if let hash = hash(row, 0), let bytes = bytes(row, 1) { objects[hash] = bytes }
        }
    }
}

/// Whether a call's task was cancelled, set from its cancellation handler.
final class CallCancellation: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// A connection's cancel request (`PGcancel*`, freed when released): `PQcancel` asks the server,
/// over a connection of its own, to stop the command running on that connection. Thread-safe.
final class PGCanceller: @unchecked Sendable {
    private let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }

    deinit { PQfreeCancel(handle) }

    /// Sends the request (blocking: it connects to the server). Whether the server got it.
    @discardableResult
    func cancel() -> Bool {
        var message = [CChar](repeating: 0, count: 256)
        return PQcancel(handle, &message, Int32(message.count)) == 1
    }
}

/// One connection (`PGconn*`), finished when released. Not thread-safe: one thread at a time
/// (the pool guarantees it by running all calls on the connection's serial queue).
final class PGConnection {
    private let handle: OpaquePointer
    let target: ConnectionTarget
    private var prepared = Set<String>()
    private static let engine = "postgres"

    /// Connects (blocking). Throws `.connection`, `.permissionDenied` or `.notFound`.
    init(_ target: ConnectionTarget, operation: String) throws {
        guard target.isURI else {
            // Not repeated in the message: where its password is cannot be known.
            throw ArborError(
                .invalidInput, "a PostgreSQL store is named by a URL that starts with postgres:// or postgresql:// (libpq's key=value settings are not accepted)",
                backend: Self.engine, operation: operation)
        }
        guard !target.hasSeveralAtSigns else {
            // libpq would end the password at the first '@' and take the rest for the host,
            // which its messages then repeat: part of the password, in plain text.
            throw ArborError(
                .invalidInput, "the PostgreSQL URL has more than one '@' before its host: write an '@' in the user name or password as %40",
                backend: Self.engine, operation: operation)
        }
        guard !target.hasAtSignAfterQueryBeforePath else {
            // libpq would take the query up to the '@' for a user name and the rest for the host.
            throw ArborError(
                .invalidInput, "the PostgreSQL URL has an '@' in its query parameters and no '/' before them: write the '@' as %40 (or name the database: postgres://host/db?…)",
                backend: Self.engine, operation: operation)
        }
        self.target = target
        // TCP keepalives and a user timeout (unless the URL sets its own): a connection whose
        // peer vanished, or that a firewall dropped in silence, fails in about two minutes,
        // not after the system's two hours, holding a pooled connection and its callers.
        let keywords = ["connect_timeout", "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname"]
        let values = [String(target.connectTimeout), "arbor", "1", "60", "10", "6", "120000", target.url]
        // expand_dbname = 1: `dbname` holds the whole URL; its settings override the ones before it.
        let connection = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in PQconnectdbParams(keywordPointers, valuePointers, 1) }
        }
        guard let connection else {
            throw ArborError(.engine, "libpq could not allocate a connection", backend: Self.engine, operation: operation)
        }
        handle = connection
        // Server notices (NOTICE, WARNING) are not errors; libpq would print them on stderr.
        // libpq hands an error that comes while no call runs to this receiver too: the server's
        // word that it ends the session, which the receiver keeps.
        PQsetNoticeReceiver(handle, { argument, result in
            guard let argument, let result else { return }
            let field = PQresultErrorField(result, Int32(UInt8(ascii: "V"))) ?? PQresultErrorField(result, Int32(UInt8(ascii: "S")))
            guard let field else { return }
            let severity = String(cString: field)
            if severity == "FATAL" || severity == "PANIC" {
                Unmanaged<SessionEnd>.fromOpaque(argument).takeUnretainedValue().isEnded = true
            }
        }, Unmanaged.passUnretained(sessionEnd).toOpaque())
        guard PQConnectionStatus(PQstatus(handle)) == .ok else {
            let message = target.scrub(Self.trimmed(String(cString: PQerrorMessage(handle))))
            throw Self.connectError(message, target: target, operation: operation)
        }
        // Arbor's statements are short lookups; JIT compilation (PostgreSQL 11+) would cost them
        // more than it saves. Best effort: a server without the setting keeps its default.
        if let result = PQexec(handle, "SET jit = off") { PQclear(result) }
        // The compare-and-swap of refs and the puts that ignore objects already there rely on
        // READ COMMITTED, which a database's or role's default may have changed: under
        // REPEATABLE READ or SERIALIZABLE, a swap losing a race fails with a serialization error
        // instead of finding the ref changed.
        if let result = PQexec(handle, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED") { PQclear(result) }
        // A lock another session holds (an administrator's LOCK TABLE, a transaction left open)
        // would hold every call behind it for as long: past the lock timeout, the call fails and
        // changes nothing. Set only where the server, its database or role, or the URL set
        // none: 0 is also what an explicit "no limit" reads as, so the setting's source tells
        // them apart. At most PostgreSQL's largest (2^31 - 1 ms); the value is a number, never data.
        let milliseconds = min(max(target.lockTimeout, 0), Int(Int32.max) / 1000) * 1000
        if milliseconds > 0,
           let result = PQexec(handle, "SELECT set_config('lock_timeout', '\(milliseconds)', false) WHERE (SELECT source FROM pg_settings WHERE name = 'lock_timeout') = 'default'") {
            let settled = PQResultStatus(PQresultStatus(result)) == .tuplesOK
            PQclear(result)
            // A server whose pg_settings lack the source (some that speak PostgreSQL's protocol):
            // 0 there reads as unset.
            if !settled, let fallback = PQexec(handle, "SELECT set_config('lock_timeout', '\(milliseconds)', false) WHERE current_setting('lock_timeout') = '0'") {
                PQclear(fallback)
            }
        }
    }

    deinit { PQfinish(handle) }

    /// What cancels the command running on this connection, from another thread.
    func canceller() -> PGCanceller? { PQgetCancel(handle).map(PGCanceller.init) }

    /// Whether the connection is lost (the server went away, or the backend was terminated).
    var isBroken: Bool { PQConnectionStatus(PQstatus(handle)) != .ok || sessionEnd.isEnded }

    /// Whether the server said, between calls, that it ends the session (set by the notice
    /// receiver; owned by the connection, so it outlives every call libpq makes to it).
    private final class SessionEnd {
        var isEnded = false
    }
    private let sessionEnd = SessionEnd()

    /// Reads, without waiting, what the server sent while the connection sat idle. A server that
    /// ended the session (`idle_session_timeout`, `pg_terminate_backend`, a restart, a proxy's
    /// idle limit) has sent its error and closed the socket, but libpq notices only when it next
    /// reads: until then ``isBroken`` says the connection is fine, and the next call fails.
    /// Afterwards ``isBroken`` tells. Anything else waiting (a parameter the server reports) is
    /// taken in as libpq takes it.
    func takeInIdleInput() {
        // The end of a session comes as an error message (FATAL), then the end of the stream,
        // which may come a little later; libpq marks the connection bad only once it reads the
        // latter, but passes the former to the notice receiver when it parses it (PQisBusy).
        let socket = PQsocket(handle)
        guard socket >= 0, !isBroken else { return }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return }
        if PQconsumeInput(handle) == 1 { _ = PQisBusy(handle) }
    }

    /// Whether the connection can serve the next call: connected, and outside any transaction
    /// (one a failed ROLLBACK left open would fail every later call on it).
    var isReusable: Bool { !isBroken && PQtransactionStatus(handle) == PQTRANS_IDLE }

    /// The server's process id for this connection.
    var backendPID: Int32 { PQbackendPID(handle) }

    /// The server's version as a number (150018 for 15.18).
    var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// A failed connection's error, classified by the server's message (libpq gives no
    /// SQLSTATE for it). The message also names the host, so only the server's own phrases
    /// count: a host called `database-1…` whose server says a role does not exist is no missing
    /// database.
    static func connectError(_ message: String, target: ConnectionTarget, operation: String) -> ArborError {
        let lower = message.lowercased()
        // `FATAL:  role "bob" does not exist`, `FATAL:  database "x" does not exist`.
        func says(_ subject: String) -> Bool {
            guard let start = lower.range(of: subject + " \"") else { return false }
            return lower[start.upperBound...].contains("\" does not exist")
        }
        let place = "the PostgreSQL server at \(target.redacted)"
        if lower.contains("password authentication failed") || lower.contains("authentication failed")
            || lower.contains("no pg_hba.conf entry") || lower.contains("password is required")
            || lower.contains("permission denied") || says("role")
        {
            return ArborError(.permissionDenied, "\(place) refused the login (SQLSTATE 28P01 or 28000): \(message)", backend: engine, operation: operation)
        }
        if says("database") {
            return ArborError(.notFound, "\(place): the database does not exist (SQLSTATE 3D000); create it first (createdb), then run arbor init: \(message)", backend: engine, operation: operation)
        }
        return ArborError(.connection, "cannot connect to \(place): \(message)", backend: engine, operation: operation)
    }

    static func trimmed(_ text: String) -> String {
        var lines = text.split(separator: "\n").map { $0.trimmingPrefix(while: { $0 == " " }) }
        lines.removeAll { $0.isEmpty }
        return lines.joined(separator: "; ")
    }

    /// The error of a failed call, classified: a lost connection (`.connection`), refused access
    /// or a write to a read-only database (`.permissionDenied`), a full disk (`.io`), anything
    /// else (`.engine`), with the SQLSTATE.
    func error(_ result: PGResult?, operation: String) -> ArborError {
        let state = result?.sqlState
        var text = result?.errorMessage ?? ""
        if text.isEmpty { text = String(cString: PQerrorMessage(handle)) }
        let message = target.scrub(Self.trimmed(text))
        let suffix = state.map { " (SQLSTATE \($0))" } ?? ""
        let engine = Self.engine
        if isBroken || state?.errorClass == "08" || state == .adminShutdown || state == .crashShutdown || state == .cannotConnectNow {
            return ArborError(.connection, "lost the connection to the PostgreSQL server at \(target.redacted): \(message)\(suffix). Each call is one transaction, so its changes are stored whole or not at all (not at all unless the connection was lost while committing); the next call reconnects", backend: engine, operation: operation)
        }
        if state?.errorClass == "28" || state == .insufficientPrivilege {
            return ArborError(.permissionDenied, "PostgreSQL refused access: \(message)\(suffix)", backend: engine, operation: operation)
        }
        if state == .readOnlyTransaction {
            return ArborError(.permissionDenied, "the PostgreSQL database is read-only (a standby, or default_transaction_read_only is on): the store can be read, not changed: \(message)\(suffix)", backend: engine, operation: operation)
        }
        if state == .diskFull {
            return ArborError(.io, "PostgreSQL: the disk is full: \(message)\(suffix)", backend: engine, operation: operation)
        }
        if state == .lockNotAvailable {
            return ArborError(.engine, "PostgreSQL: waited longer than the lock timeout for a lock another session holds (a LOCK TABLE, a transaction left open, or another writer's long write of the same objects), so the call changed nothing and can be run again: \(message)\(suffix)", backend: engine, operation: operation)
        }
        return ArborError(.engine, "PostgreSQL error: \(message)\(suffix)", backend: engine, operation: operation)
    }

    private func check(_ result: OpaquePointer?, operation: String, expecting: Set<PQResultStatus> = [.commandOK, .tuplesOK]) throws -> PGResult {
        guard let result else { throw error(nil, operation: operation) }
        let wrapped = PGResult(result)
        guard expecting.contains(wrapped.status) else { throw error(wrapped, operation: operation) }
        return wrapped
    }

    /// The cancellation of the call the connection serves, set by the pool for each call: a
    /// server ignores a cancel request that arrives between two statements, so each statement
    /// checks it before it is sent.
    var cancellation: CallCancellation?

    private func checkCancellation() throws {
        if cancellation?.isSet == true { throw CancellationError() }
    }

    /// Runs one statement given as text, with binary parameters and binary results.
    /// `checkingCancellation: false` for a statement that must run, cancelled or not (ROLLBACK).
    @discardableResult
    func execute(_ sql: String, _ parameters: [PGValue] = [], operation: String, checkingCancellation: Bool = true) throws -> PGResult {
        if checkingCancellation { try checkCancellation() }
        return try withParameters(parameters) { count, types, values, lengths, formats in
            try check(PQexecParams(handle, sql, count, types, values, lengths, formats, 1), operation: operation)
        }
    }

    /// Runs a prepared statement (preparing it on this connection first if needed).
    @discardableResult
    func execute(_ statement: PreparedStatement, _ parameters: [PGValue], operation: String) throws -> PGResult {
        try checkCancellation()
        if !prepared.contains(statement.name) {
            _ = try check(PQprepare(handle, statement.name, statement.sql, Int32(statement.types.count), statement.types), operation: operation)
            prepared.insert(statement.name)
        }
        return try withParameters(parameters) { count, _, values, lengths, formats in
            try check(PQexecPrepared(handle, statement.name, count, values, lengths, formats, 1), operation: operation)
        }
    }

    /// Runs `body` in a transaction: COMMIT if it returns, ROLLBACK (when the connection is
    /// still up) if it throws.
    func transaction<R>(operation: String, _ body: () throws -> R) throws -> R {
        try execute("BEGIN", operation: operation)
        let value: R
        do {
            value = try body()
            // Cancelled after the last statement: rolled back, not committed.
            try checkCancellation()
        } catch {
            if !isBroken { _ = try? execute("ROLLBACK", operation: operation, checkingCancellation: false) }
            throw error
        }
        try execute("COMMIT", operation: operation, checkingCancellation: false)
        return value
    }

    /// `COPY … FROM STDIN` with `data` as the whole input (e.g. PGCOPY binary format).
    func copyIn(_ sql: String, chunks: [[UInt8]], operation: String) throws {
        try checkCancellation()
        _ = try check(PQexec(handle, sql), operation: operation, expecting: [.copyIn])
        for chunk in chunks {
            let sent = chunk.withUnsafeBytes { buffer in
                PQputCopyData(handle, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(buffer.count))
            }
            guard sent == 1 else { throw error(nil, operation: operation) }
        }
        guard PQputCopyEnd(handle, nil) == 1 else { throw error(nil, operation: operation) }
        var failure: ArborError?
        while let result = PQgetResult(handle) {
            let wrapped = PGResult(result)
            if wrapped.status != .commandOK && failure == nil { failure = error(wrapped, operation: operation) }
        }
        if let failure { throw failure }
    }

    private func withParameters<R>(
        _ parameters: [PGValue],
        _ body: (Int32, [Oid], [UnsafePointer<CChar>?], [Int32], [Int32]) throws -> R
    ) throws -> R {
        var buffer = [UInt8]()
        buffer.reserveCapacity(parameters.reduce(0) { total, value in
            switch value {
            case .bytes(let bytes), .byteaArray(let bytes): total + bytes.count
            case .text(let text): total + text.utf8.count
            default: total + 8
            }
        })
        var ranges = [(offset: Int, length: Int)?]()
        for parameter in parameters {
            let offset = buffer.count
            ranges.append(parameter.append(to: &buffer).map { (offset, $0) })
        }
        let types = parameters.map(\.type)
        let formats = [Int32](repeating: 1, count: parameters.count)
        let lengths = ranges.map { Int32($0?.length ?? 0) }
        return try buffer.withUnsafeBufferPointer { storage in
            // A non-null pointer for every non-null value, also an empty one.
            let base = storage.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(bitPattern: 1)!
            var empty: CChar = 0
            return try withUnsafePointer(to: &empty) { emptyPointer in
                let values: [UnsafePointer<CChar>?] = ranges.map { range in
                    guard let range else { return nil }
                    if range.length == 0 { return emptyPointer }
                    return (base + range.offset).assumingMemoryBound(to: CChar.self)
                }
                return try body(Int32(parameters.count), types, values, lengths, formats)
            }
        }
    }
}

/// Calls `body` with a C array of C strings, valid for the duration of the call, NULL-terminated.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { UnsafePointer($0) } + [nil])
}

/// An object as an enumeration's scan finds it: its bytes, or only its size where it is large
/// (read by hash after).
struct EnumeratedObject: Sendable {
    var hash: Hash
    var size: Int
    var bytes: [UInt8]?
}
