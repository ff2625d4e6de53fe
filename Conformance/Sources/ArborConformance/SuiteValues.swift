import Arbor
import Foundation

// The application types the store and merge cases commit: a value tree of every property kind.

struct SuitePerson: Storable, Equatable {
    static let typeName = "Person"
    var id: String
    var name: String
}

struct SuiteAttachment: Storable, Equatable {
    static let typeName = "Attachment"
    var id: String
    var data: Data
}

struct SuiteNote: Storable, Equatable {
    static let typeName = "Note"
    var id: String
    var text: String
    var attachments: [SuiteAttachment] = []
}

struct SuiteTask: Storable, Equatable {
    static let typeName = "Task"
    var id: String
    var title: String
    var done: Bool
    var notes: [SuiteNote] = []
    var owner: Ref<SuitePerson>?
}

/// A plain nested struct, stored as a property.
struct SuiteAddress: Codable, Equatable, Sendable {
    var street: String
    var zip: Int?
}

/// Properties of every kind, the awkward values included.
struct SuiteKinds: Storable, Equatable {
    static let typeName = "Kinds"
    var id: Int
    var int64: [Int64] = [.min, -1, 0, .max]
    var uint64 = UInt64(Int64.max)
    var doubles: [Double] = [0.1, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude]
    var text = "héllo, 世界 🌳 \u{0}\n\"quoted\""
    var empty = ""
    var date = Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7)
    var data = Data([0, 1, 2, 255])
    var address = SuiteAddress(street: "Main", zip: nil)
    var tags: [String: Int] = ["a": 1, "b": 2, "$weird": 3]
    var matrix: [[Double]] = [[1, 2], [], [3]]
    var absent: String? = nil
    var flags = [true, false]

    static func == (lhs: SuiteKinds, rhs: SuiteKinds) -> Bool {
        lhs.id == rhs.id && lhs.int64 == rhs.int64 && lhs.uint64 == rhs.uint64
            && lhs.doubles.map(\.bitPattern) == rhs.doubles.map(\.bitPattern) && lhs.text == rhs.text && lhs.empty == rhs.empty
            && lhs.date.timeIntervalSinceReferenceDate.bitPattern == rhs.date.timeIntervalSinceReferenceDate.bitPattern
            && lhs.data == rhs.data && lhs.address == rhs.address && lhs.tags == rhs.tags && lhs.matrix == rhs.matrix
            && lhs.absent == rhs.absent && lhs.flags == rhs.flags
    }
}

extension Store {
    /// Commits the changes `build` makes on top of `parent` (`nil`: a first commit).
    func change(on parent: Version?, _ message: String = "", _ build: (inout ChangeSet) throws -> Void) async throws -> Version {
        var changes = ChangeSet()
        try build(&changes)
        return try await commit(changes, message: message, parents: parent.map { [$0.id] } ?? [])
    }
}
