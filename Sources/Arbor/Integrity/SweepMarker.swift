import Foundation

/// A collection's mark on its store while one batch of its sweep is in flight: a ref
/// `sweeps/<start>-<id>` (the start in milliseconds since 1970, the id random hexadecimal) whose
/// value is the hash of its name, made just before the batch is deleted and removed once the
/// collection has marked again from the refs and written back what of the batch they reach.
///
/// Between the two, a version a writer made by re-using objects of the batch (content
/// addressing makes an old, unreachable object look present) can lack them. A reader that finds
/// an object missing (``ObjectFetch/verified(_:from:)``) waits for the batches in flight it sees
/// to end, then reads once more: it finds the object written back, or it is really missing. A
/// marker is followed while its start is less than ``lifetime`` from now (either way: the clocks
/// of processes sharing a store differ), and for at most ``lifetime`` of the reader's own time,
/// so that the marker of a killed collection delays a read that fails by at most that much. A
/// collection removes markers twice as old. Walks from the refs leave markers out, as they do
/// exchanges' claims; a `sweeps/` ref whose value is anything else is an ordinary ref.
struct SweepMarker: Sendable {
    /// How long a marker counts from its start, and the longest a reader waits for markers.
    /// A batch takes milliseconds to seconds: its delete, and a marking of what is new since.
    static let lifetime: Duration = .seconds(60)

    private let backend: any Backend
    /// The marker's ref.
    let name: String

    /// A marker for `backend`, named but not made yet: a collection notes it before making it,
    /// so that one whose swap landed but whose answer was lost is removed all the same.
    init(on backend: any Backend, now: Date = Date()) {
        self.backend = backend
        name = StampedRef.name(RefName.sweepPrefix, id: StampedRef.newID(), startedAt: now)
    }

    /// Makes the marker: a batch of a sweep is about to be deleted.
    ///
    /// - Complexity: one compare-and-swap.
    func make() async throws {
        guard try await backend.compareAndSwap(ref: name, expected: nil, new: Self.value(of: name)) else {
            throw ArborError(.alreadyExists, "the sweep marker \(name) exists already", backend: backend.engineName, operation: "gc")
        }
    }

    /// Removes the marker: the batch is settled. Outside the calling task, since a backend may
    /// refuse the calls of a cancelled one. Whether the marker is gone (removed now, or never
    /// made); `false` if that could not be told, for the collection to try again later.
    ///
    /// - Complexity: one compare-and-swap.
    @discardableResult
    func remove() async -> Bool {
        let (backend, name) = (backend, name)
        return await Task.detached {
            (try? await backend.compareAndSwap(ref: name, expected: Self.value(of: name), new: nil)) != nil
        }.value
    }

    /// Removes each of `markers`; returns those that could not be removed.
    static func remove(_ markers: [SweepMarker]) async -> [SweepMarker] {
        var left = [SweepMarker]()
        for marker in markers where !(await marker.remove()) { left.append(marker) }
        return left
    }

    /// Whether `ref`, holding `hash`, is a sweep marker (of any age).
    static func isMarker(_ ref: String, holding hash: Hash) -> Bool {
        StampedRef.isStamped(ref, holding: hash, prefix: RefName.sweepPrefix)
    }

    /// The markers among `refs` that readers follow at `now`: those that started less than
    /// ``lifetime`` from it.
    static func live(in refs: [String: Hash], now: Date = Date()) -> Set<String> {
        Set(refs.filter { ref, hash in
            isMarker(ref, holding: hash) && age(of: ref, now: now).map { abs($0) < lifetimeMilliseconds } ?? false
        }.keys)
    }

    /// Removes the markers of collections that were stopped before they could (twice
    /// ``lifetime`` from `now`, or not parsing). Best effort: one left is removed by a later
    /// collection, and lapsed, it holds no reader.
    ///
    /// - Complexity: one read of the refs; a compare-and-swap per marker removed.
    static func removeLapsed(on backend: any Backend, now: Date = Date()) async {
        guard let refs = try? await backend.refs() else { return }
        for (ref, hash) in refs where isMarker(ref, holding: hash) {
            guard age(of: ref, now: now).map({ abs($0) >= 2 * lifetimeMilliseconds }) ?? true else { continue }
            _ = try? await backend.compareAndSwap(ref: ref, expected: hash, new: nil)
        }
    }

    /// Waits until none of the batches in flight on `backend` now is (their markers are gone
    /// or lapsed), or `longest` has passed: called by a reader that found an object missing,
    /// before it reads once more. Returns at once when no collection is sweeping.
    ///
    /// - Complexity: one read of the refs, and one every few milliseconds while it waits.
    static func awaitBatchesInFlight(on backend: any Backend, longest: Duration = lifetime) async throws {
        var waited = live(in: try await backend.refs())
        let deadline = ContinuousClock.now + longest
        var pause = Duration.milliseconds(2)
        while !waited.isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: min(pause, deadline - ContinuousClock.now))
            pause = min(pause * 2, .milliseconds(100))
            // Only those seen first (a batch that began after the read missed cannot have
            // removed what it missed), and only while they are live: a killed collection's
            // marker holds readers until it lapses, not for a lifetime after each miss.
            waited.formIntersection(live(in: try await backend.refs()))
        }
    }

    /// Objects `hashes`, which a read found missing, read once more once the batches in flight
    /// have ended (``awaitBatchesInFlight(on:longest:)``): those a batch wrote back, found now.
    ///
    /// - Complexity: the wait's reads of the refs, and one request.
    static func readAgain(_ hashes: [Hash], from backend: any Backend) async throws -> [Hash: [UInt8]] {
        try await awaitBatchesInFlight(on: backend)
        return try await backend.get(hashes)
    }

    /// What a marker's ref holds: a hash of its name, naming no object.
    static func value(of ref: String) -> Hash { StampedRef.value(of: ref) }

    private static var lifetimeMilliseconds: Int64 { StampedRef.milliseconds(lifetime) }

    /// How long before `now` the marker `ref` started (negative when its clock is ahead); `nil`
    /// for a name that does not parse.
    private static func age(of ref: String, now: Date) -> Int64? {
        StampedRef.ageMilliseconds(of: ref, prefix: RefName.sweepPrefix, now: now)
    }
}
