import Foundation
import Synchronization
@testable import Arbor

/// A clock that moves one second forward on every reading, from `start`.
final class TickClock: Sendable {
    private let now: Mutex<Double>
    init(start: Double = 1_763_700_000) { now = Mutex(start) }
    func read() -> Date { now.withLock { $0 += 1; return Date(timeIntervalSince1970: $0) } }
}

extension Store {
    /// A store whose clock ticks one second at each reading, so that commit times follow the
    /// order of the commits (on memory unless a backend is given).
    static func ticking(
        replica: String = "r", backend: any Backend = MemoryBackend(), strategy: MergeStrategy = .mostRecent, resolvers: MergeResolvers = MergeResolvers()
    ) -> Store {
        let clock = TickClock()
        return Store(backend: backend, configuration: .init(replica: replica, clock: { clock.read() }, mergeStrategy: strategy, mergeResolvers: resolvers))
    }
}

/// Copies every object of `source` into `destination` and adds `source`'s heads to
/// `destination`'s head set: a crude sync for tests.
func sync(from source: any Backend, to destination: any Backend) async throws {
    var objects = [(hash: Hash, bytes: [UInt8])]()
    try await source.enumerateHashes(batchSize: 512) { hashes in
        let found = try await source.get(hashes)
        for hash in hashes { objects.append((hash, found[hash]!)) }
    }
    try await destination.put(objects)
    let theirHeads = try await headSet(source)
    while true {
        let current = try await destination.ref(RefName.heads)
        let heads = theirHeads.union(try await headSet(destination))
        let bytes = try HeadSet.encode(heads)
        try await destination.put([(Hash.of(bytes), bytes)])
        if try await destination.compareAndSwap(ref: RefName.heads, expected: current, new: Hash.of(bytes)) { return }
    }
}

private func headSet(_ backend: any Backend) async throws -> Set<Hash> {
    guard let ref = try await backend.ref(RefName.heads), let bytes = try await backend.get(ref) else { return [] }
    return Set(try HeadSet.decode(bytes))
}

extension Store {
    /// Commits the changes `build` makes on top of `parent` (nothing: a first commit).
    @discardableResult
    func change(on parent: Version?, _ message: String = "", _ build: (inout ChangeSet) throws -> Void) async throws -> Version {
        var changes = ChangeSet()
        try build(&changes)
        return try await commit(changes, message: message, parents: parent.map { [$0.id] } ?? [])
    }
}

/// A plain record of type `Item` with integer properties.
func item(_ id: String, _ properties: [String: PropertyValue]) -> Record {
    Record(type: "Item", id: id, properties: properties)
}

func itemKey(_ id: String) -> RecordKey { RecordKey(type: "Item", id: id) }

extension MergeStrategy {
    /// The strategy that takes the same side when the two sides of a merge are swapped.
    var mirrored: MergeStrategy {
        switch self {
        case .ours: .theirs
        case .theirs: .ours
        default: self
        }
    }
}

extension Store {
    /// `merge(a, b, strategy)` and `merge(b, a, strategy.mirrored)`, which must agree.
    func mergeBothWays(_ a: Version, _ b: Version, strategy: MergeStrategy) async throws -> (outcome: MergeOutcome, reversed: MergeOutcome) {
        let outcome = try await merge(a.id, b.id, strategy: strategy)
        return (outcome, try await merge(b.id, a.id, strategy: strategy.mirrored))
    }
}
