import Arbor

/// One plain, blocking connection for administration, tests and benchmarks: run a statement
/// with parameters, or stream a `COPY … FROM STDIN`. Not for use on the Swift concurrency pool
/// in production code (every call blocks), and not thread-safe: one thread at a time.
///
/// Parameters are always sent separately from the SQL text, in binary format; results come back
/// in binary format (`bytea` as its bytes, `text` as UTF-8, integers big-endian).
public final class PostgresSession {
    /// A statement parameter.
    public enum Parameter {
        case bytes([UInt8])
        case text(String)
        case int64(Int64)
        /// A `bytea[]`.
        case byteaArray([[UInt8]])
        case null

        var value: PGValue {
            switch self {
            case .bytes(let bytes): .bytes(bytes)
            case .text(let text): .text(text)
            case .int64(let value): .int64(value)
            case .byteaArray(let elements):
                PGValue.byteaArray(elements, byteCount: elements.reduce(0) { $0 + $1.count }) { $1.append(contentsOf: $0) }
            case .null: .null
            }
        }
    }

    /// The rows a statement returned, each value as its binary bytes (`nil` for NULL).
    public struct Rows {
        public var rows: [[[UInt8]?]]
        /// The rows an INSERT, UPDATE or DELETE changed.
        public var affectedRows: Int

        public var count: Int { rows.count }
        /// A value as text (for `text`/`name` columns).
        public func text(_ row: Int, _ column: Int) -> String? {
            rows[row][column].map { String(decoding: $0, as: UTF8.self) }
        }
        /// A value as an integer (for `int2`, `int4` and `int8` columns).
        public func integer(_ row: Int, _ column: Int) -> Int64? {
            guard let bytes = rows[row][column], !bytes.isEmpty else { return nil }
            var value: Int64 = bytes[0] & 0x80 != 0 ? -1 : 0
            for byte in bytes { value = value << 8 | Int64(byte) }
            return value
        }
    }

    private let connection: PGConnection

    /// Connects (blocking). Errors never contain the password.
    public init(url: String, connectTimeout: Int = 10) throws {
        connection = try PGConnection(ConnectionTarget(url: url, connectTimeout: connectTimeout), operation: "connect")
    }

    /// The URL with the password replaced by `***`.
    public var redactedURL: String { connection.target.redacted }

    /// The server process serving this session (for `pg_terminate_backend`).
    public var backendPID: Int32 { connection.backendPID }

    /// Runs one statement.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [Parameter] = []) throws -> Rows {
        let result = try connection.execute(sql, parameters.map(\.value), operation: "execute")
        let rows = (0..<result.rowCount).map { row in (0..<result.columnCount).map { result.bytes(row, $0) } }
        return Rows(rows: rows, affectedRows: result.affectedRows)
    }

    /// Runs `COPY … FROM STDIN` (e.g. `WITH (FORMAT binary)`), sending `chunks` as its data.
    public func copyIn(_ sql: String, chunks: [[UInt8]]) throws {
        try connection.copyIn(sql, chunks: chunks, operation: "copy")
    }
}
