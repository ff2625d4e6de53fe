import Foundation
import Arbor

struct Person: Storable, Equatable {
    var id: String
    var name: String
}

struct Attachment: Storable, Equatable {
    var id: String
    var data: Data
}

struct Note: Storable, Equatable {
    var id: String
    var text: String
    var attachments: [Attachment] = []
}

struct Task: Storable, Equatable {
    var id: String
    var title: String
    var done: Bool
    var notes: [Note] = []
    var owner: Ref<Person>?
    var pinned: Note?
}

enum Priority: String, Codable, Equatable, Sendable { case low, high }

enum Schedule: Codable, Equatable, Sendable {
    case none
    case daily(hour: Int)
    case custom(String, every: Double)
}

struct Address: Codable, Equatable, Sendable {
    var street: String
    var zip: Int?
}

/// Every kind of property an application can store.
struct Everything: Storable, Equatable {
    static let typeName = "Everything"
    var id: Int
    var int8: Int8 = .min
    var int16: Int16 = .max
    var int32: Int32 = .min
    var int64Min: Int64 = .min
    var int64Max: Int64 = .max
    var uint8: UInt8 = .max
    var uint32: UInt32 = .max
    var uint64: UInt64 = UInt64(Int64.max)
    var float: Float = 1.5
    var double: Double = 0.1
    var negativeZero: Double = -0.0
    var infinity: Double = .infinity
    var negativeInfinity: Double = -.infinity
    var nan: Double = .nan
    var text: String = "héllo, 世界 🌳 \u{0}\n\"quoted\""
    var empty: String = ""
    var date: Date = Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7)
    var data: Data = Data([0, 1, 2, 255])
    var url: URL = URL(string: "https://example.com/a?b=c")!
    var priority: Priority = .high
    var schedule: Schedule = .custom("weekly", every: 7)
    var schedules: [Schedule] = [.none, .daily(hour: 9)]
    var address: Address = Address(street: "Main", zip: nil)
    var tags: [String: Int] = ["a": 1, "b": 2, "$weird": 3]
    var byNumber: [Int: String] = [1: "one", 2: "two"]
    var matrix: [[Double]] = [[1, 2], [], [3]]
    var optionalPresent: String? = "here"
    var optionalAbsent: String? = nil
    var bools: [Bool] = [true, false]

    // NaN never equals itself, so compare bit patterns where it matters.
    static func == (lhs: Everything, rhs: Everything) -> Bool {
        func same(_ a: Double, _ b: Double) -> Bool { a.isNaN ? b.isNaN : a.bitPattern == b.bitPattern }
        return lhs.id == rhs.id && lhs.int8 == rhs.int8 && lhs.int16 == rhs.int16 && lhs.int32 == rhs.int32
            && lhs.int64Min == rhs.int64Min && lhs.int64Max == rhs.int64Max && lhs.uint8 == rhs.uint8
            && lhs.uint32 == rhs.uint32 && lhs.uint64 == rhs.uint64 && lhs.float == rhs.float
            && same(lhs.double, rhs.double) && same(lhs.negativeZero, rhs.negativeZero)
            && same(lhs.infinity, rhs.infinity) && same(lhs.negativeInfinity, rhs.negativeInfinity) && same(lhs.nan, rhs.nan)
            && lhs.text == rhs.text && lhs.empty == rhs.empty
            && lhs.date.timeIntervalSinceReferenceDate.bitPattern == rhs.date.timeIntervalSinceReferenceDate.bitPattern
            && lhs.data == rhs.data && lhs.url == rhs.url && lhs.priority == rhs.priority && lhs.schedule == rhs.schedule
            && lhs.schedules == rhs.schedules && lhs.address == rhs.address && lhs.tags == rhs.tags && lhs.byNumber == rhs.byNumber
            && lhs.matrix == rhs.matrix && lhs.optionalPresent == rhs.optionalPresent && lhs.optionalAbsent == rhs.optionalAbsent
            && lhs.bools == rhs.bools
    }
}

/// The backends every store-level test runs on.
enum AdapterKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory, json, sqlite, lmdb, postgres
    var testDescription: String { rawValue }

    /// Every kind, with `postgres` only when a test server is configured or under CI=true
    /// (where its tests then fail instead of being skipped).
    static var allCases: [AdapterKind] { [.memory, .json, .sqlite, .lmdb] + (PostgresTestServer.isEnabled ? [.postgres] : []) }
}

/// A fresh, empty backend of `kind` and a cleanup that removes whatever it created.
func makeBackend(_ kind: AdapterKind) throws -> (backend: any Backend, cleanup: @Sendable () -> Void) {
    switch kind {
    case .memory:
        return (MemoryBackend(), {})
    case .json:
        let path = temporaryPath("json")
        return (try JSONBackend.create(.init(path: path, synchronous: false)), { removeItem(path) })
    case .sqlite:
        let path = temporaryPath("sqlite")
        return (try SQLiteBackend.create(.init(path: path, synchronous: false)), { for suffix in ["", "-wal", "-shm"] { removeItem(path + suffix) } })
    case .lmdb:
        let path = temporaryPath("lmdb")
        return (try LMDBBackend.create(.init(path: path, synchronous: false)), { removeItem(path) })
    case .postgres:
        return try PostgresTestServer.makeBackend()
    }
}

import ArborJSON
import ArborSQLite
import ArborLMDB
import ArborPostgres
import Testing
