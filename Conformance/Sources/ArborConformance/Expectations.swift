import Arbor
import Foundation
import Synchronization

/// Throws a failure unless `condition` holds.
func expect(
    _ condition: Bool, _ message: @autoclosure () -> String, expected: @autoclosure () -> String, actual: @autoclosure () -> String
) throws {
    if !condition { throw ConformanceFailure(message: message(), expected: expected(), actual: actual()) }
}

/// Throws a failure unless `actual == expected`.
func expectEqual<Value: Equatable>(_ actual: Value, _ expected: Value, _ message: @autoclosure () -> String) throws {
    try expect(actual == expected, message(), expected: describe(expected), actual: describe(actual))
}

/// Throws a failure unless `actual` holds exactly the bytes `expected`.
func expectSameBytes(_ actual: [UInt8]?, _ expected: [UInt8], _ message: @autoclosure () -> String) throws {
    try expect(actual.map { sameBytes($0, expected) } ?? false, message(), expected: describe(bytes: expected),
               actual: actual.map { describe(bytes: $0) } ?? "nothing")
}

/// Runs `body` and throws a failure unless it throws an ``ArborError`` with `code`; returns that error.
@discardableResult
func expectError<Value>(
    _ code: ArborError.Code, _ message: @autoclosure () -> String, _ body: () async throws -> Value
) async throws -> ArborError {
    let outcome: String
    do {
        let value = try await body()
        outcome = "no error but \(describe(value))"
    } catch let error as ArborError where error.code == code {
        return error
    } catch {
        outcome = ConformanceFailure.describe(error)
    }
    throw ConformanceFailure(message: message(), expected: "ArborError(\(code))", actual: outcome)
}

/// Whether two byte arrays are equal (a `memcmp`: fast also in debug builds, for 64 MB).
func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return a.withUnsafeBytes { a in
        b.withUnsafeBytes { b in
            guard let x = a.baseAddress, let y = b.baseAddress else { return true }
            return memcmp(x, y, a.count) == 0
        }
    }
}

/// A value for a failure message, cut to a readable length.
func describe<Value>(_ value: Value) -> String {
    let text = String(describing: value)
    return text.count <= 400 ? text : text.prefix(400) + "… (\(text.count) characters)"
}

/// Bytes for a failure message: their count and hash, and the first few.
func describe(bytes: [UInt8]) -> String {
    let head = bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: " ")
    return "\(bytes.count) bytes with hash \(Hash.of(bytes).abbreviated()) [\(head)\(bytes.count > 8 ? " …" : "")]"
}

/// Fails unless `fetched` holds exactly `objects`, byte for byte, naming the positions of the
/// missing and altered ones.
func expectObjects(_ objects: [(hash: Hash, bytes: [UInt8])], in fetched: [Hash: [UInt8]], _ message: @autoclosure () -> String) throws {
    func positions(_ list: [Int]) -> String {
        "\(list.count) of \(objects.count) (positions \(list.prefix(5).map(String.init).joined(separator: ", "))\(list.count > 5 ? ", …" : ""))"
    }
    let missing = objects.indices.filter { fetched[objects[$0].hash] == nil }
    try expect(missing.isEmpty, message(), expected: "all \(objects.count) objects", actual: "\(positions(missing)) missing")
    let altered = objects.indices.filter { index in fetched[objects[index].hash].map { !sameBytes($0, objects[index].bytes) } ?? false }
    if let first = altered.first {
        throw ConformanceFailure(
            message: message(), expected: "the bytes that were put: \(describe(bytes: objects[first].bytes)) at position \(first)",
            actual: "other bytes for \(positions(altered)), at position \(first) \(fetched[objects[first].hash].map { describe(bytes: $0) } ?? "")")
    }
    let extra = Set(fetched.keys).subtracting(objects.map(\.hash))
    try expect(extra.isEmpty, message(), expected: "only the objects asked for", actual: "\(extra.count) other objects too")
}

/// Checks that `enumeration`, whose body calls the closure it is given once per batch, ends at
/// the first batch whose call throws and rethrows that very error: a migration's verification
/// reports what it finds by throwing from the body, and an enumeration that swallowed it (or went
/// on) would report a damaged target verified.
func expectRethrows(_ what: String, _ enumeration: (_ body: @escaping () throws -> Void) async throws -> Void) async throws {
    struct Stop: Error {}
    var calls = 0
    var stopped = false
    do {
        try await enumeration {
            calls += 1
            throw Stop()
        }
    } catch is Stop {
        stopped = true
    }
    try expect(stopped && calls == 1, what, expected: "ends the enumeration and is rethrown", actual: stopped ? "\(calls) calls of the body" : "no error")
}

/// A flag one task sets and others read.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
