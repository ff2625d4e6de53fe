import Foundation

/// A collection's mark on its store while one batch of its sweep is in flight: a ref
/// `sweeps/<start>-<id>` (the start in milliseconds since 1970, the id random hexadecimal), made
/// just before the batch is deleted and removed once the collection has marked again from the
/// refs and written back what of the batch they reach.
///
/// Between the two, a version a writer made by re-using objects of the batch (content
/// addressing makes an old, unreachable object look present) can lack them. A reader that finds
/// an object missing (``ObjectFetch/verified(_:from:)``) waits for the batches in flight it sees
/// to end, then reads once more: it finds the object written back, or it is really missing. A
/// marker is followed while its start is less than ``lifetime`` from now (either way: the clocks
/// of processes sharing a store differ), and for at most ``lifetime`` of the reader's own time,
/// so that the marker of a killed collection delays a read that fails by at most that much. A
/// collection removes markers twice as old. The ref's value names nothing: walks from the refs
/// leave these refs out, as they do exchanges' claims.
struct SweepMarker: Sendable {
    /// How long a marker counts from its start, and the longest a reader waits for markers.
    /// A batch takes milliseconds to seconds: its delete, and a marking of what is new since.
    static let lifetime: Duration = .seconds(60)

    private let backend: any Backend
    /// The marker's ref.
    let name: String

    /// Marks `backend`: a batch of a sweep is about to be deleted.
    ///
    /// - Complexity: one compare-and-swap.
    static func make(on backend: any Backend, now: Date = Date()) async throws -> SweepMarker {
        let name = "\(RefName.sweepPrefix)\(milliseconds(now))-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        guard try await backend.compareAndSwap(ref: name, expected: nil, new: value(of: name)) else {
            throw ArborError(.alreadyExists, "the sweep marker \(name) exists already", backend: backend.engineName, operation: "gc")
        }
        return SweepMarker(backend: backend, name: name)
    }

    /// Removes the marker: the batch is settled. Outside the calling task, since a backend may
    /// refuse the calls of a cancelled one; a marker that cannot be removed lapses.
    func remove() async {
        let (backend, name) = (backend, name)
        await Task.detached { _ = try? await backend.compareAndSwap(ref: name, expected: Self.value(of: name), new: nil) }.value
    }

    /// Whether `ref` is a sweep marker (of any age).
    static func isMarker(_ ref: String) -> Bool { ref.hasPrefix(RefName.sweepPrefix) }

    /// The markers among `refs` that readers follow at `now`: those that started less than
    /// ``lifetime`` from it.
    static func live(in refs: [String: Hash], now: Date = Date()) -> Set<String> {
        Set(refs.keys.filter { ref in isMarker(ref) && age(of: ref, now: now).map { abs($0) < lifetimeMilliseconds } ?? false })
    }

    /// Removes the markers of collections that were stopped before they could (twice
    /// ``lifetime`` from `now`, or not parsing), when their value is the hash of their name.
    ///
    /// - Complexity: one read of the refs; a compare-and-swap per marker removed.
    static func removeLapsed(on backend: any Backend, now: Date = Date()) async throws {
        for (ref, hash) in try await backend.refs() where isMarker(ref) && hash == value(of: ref) {
            guard age(of: ref, now: now).map({ abs($0) >= 2 * lifetimeMilliseconds }) ?? true else { continue }
            _ = try await backend.compareAndSwap(ref: ref, expected: hash, new: nil)
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
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(100))
            // Only those seen first (a batch that began after the read missed cannot have
            // removed what it missed), and only while they are live: a killed collection's
            // marker holds readers until it lapses, not for a lifetime after each miss.
            waited.formIntersection(live(in: try await backend.refs()))
        }
    }

    /// What a marker's ref holds: a hash of its name, naming no object.
    static func value(of ref: String) -> Hash { Hash.of(Array(ref.utf8)) }

    private static var lifetimeMilliseconds: Int64 { lifetime.components.seconds * 1000 }

    /// How long before `now` the marker `ref` started (negative when its clock is ahead); `nil`
    /// for a name that does not parse.
    private static func age(of ref: String, now: Date) -> Int64? {
        let parts = ref.dropFirst(RefName.sweepPrefix.count).split(separator: "-")
        guard parts.count == 2, let start = Int64(parts[0]) else { return nil }
        return milliseconds(now) - start
    }

    private static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
}
