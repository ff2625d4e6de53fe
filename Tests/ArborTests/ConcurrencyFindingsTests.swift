import Foundation
import Synchronization
import Testing
@testable import Arbor

/// A backend that stops the first compare-and-swap of the heads it sees once armed, until the
/// test lets it go: so a test can land other writes exactly between a writer's objects and its
/// swap.
final class SwapGateBackend: ForwardingBackend {
    let inner: any Backend
    private let armed = Atomic(false)
    private let arrivals: AsyncStream<Void>
    private let arrival: AsyncStream<Void>.Continuation
    private let releases: AsyncStream<Void>
    private let release: AsyncStream<Void>.Continuation

    /// Whether the stopped swap, once it lands, cancels its task (a caller giving up just then).
    let cancelsOnLanding: Bool

    init(_ inner: any Backend, cancelsOnLanding: Bool = false) {
        self.inner = inner
        self.cancelsOnLanding = cancelsOnLanding
        (arrivals, arrival) = AsyncStream.makeStream()
        (releases, release) = AsyncStream.makeStream()
    }

    /// Stops the next swap of the heads.
    func arm() { armed.store(true, ordering: .releasing) }

    /// Waits until an armed swap has stopped.
    func waitForStoppedSwap() async {
        for await _ in arrivals { return }
    }

    /// Lets the stopped swap go on.
    func letGo() { release.yield() }

    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        let stops = name == RefName.heads && armed.exchange(false, ordering: .acquiringAndReleasing)
        if stops {
            arrival.yield()
            for await _ in releases { break }
        }
        let landed = try await inner.compareAndSwap(ref: name, expected: expected, new: new)
        if stops && landed && cancelsOnLanding { withUnsafeCurrentTask { $0?.cancel() } }
        return landed
    }
}

/// Defects the concurrency stress test (``ConcurrencyStressTests``) found, each pinned
/// deterministically.
@Suite struct ConcurrencyFindings {
    /// Two stores on one backend, the second through a ``SwapGateBackend``, holding a head for
    /// each of `ids`, each a task saved on one first version.
    func storesOnHeads(_ ids: [String]) async throws -> (first: Store, second: Store, gate: SwapGateBackend) {
        let shared = MemoryBackend()
        let gate = SwapGateBackend(shared)
        let first = Store(backend: shared, configuration: .init(replica: "first"))
        let base = try await first.save(Task(id: "t", title: "base", done: false))
        for id in ids { try await first.save(Task(id: id, title: id, done: false), parents: [base.id]) }
        return (first, Store(backend: gate, configuration: .init(replica: "second")), gate)
    }

    /// Two replicas merge the same two heads at once. Merges are deterministic, so both make the
    /// same merge commit; the first lands it and a commit builds on it. The second then swaps
    /// its merge into the heads: a version another head builds on, which `heads()` must not
    /// list ("the versions no other version builds on").
    @Test func aMergeLandedTwiceIsNoHeadOnceBuiltOn() async throws {
        let (first, second, gate) = try await storesOnHeads(["a", "c"])

        gate.arm()
        async let late = second.mergeHeads()
        await gate.waitForStoppedSwap()
        let merged = try #require(try await first.mergeHeads()?.version)
        let built = try await first.save(Task(id: "d", title: "on the merge", done: false))
        #expect(built.parents == [merged.id])
        gate.letGo()
        #expect(try await late?.version?.id == merged.id)
        #expect(try await first.heads().map(\.id) == [built.id])
    }

    /// Two exchanges bring the same version into a store at once. The first makes it a head
    /// and a commit builds on it; the second, which found the version missing when it began,
    /// then adds it to the heads as one nothing could descend from.
    @Test func aVersionTwoExchangesBringIsNoHeadOnceBuiltOn() async throws {
        let source = Store(backend: MemoryBackend(), configuration: .init(replica: "source"))
        let shared = MemoryBackend()
        let gate = SwapGateBackend(shared)
        let target = Store(backend: shared, configuration: .init(replica: "target"))
        let gatedTarget = Store(backend: gate, configuration: .init(replica: "target"))
        try await source.save(Task(id: "f", title: "base", done: false))
        try await source.exchange(to: target)
        let brought = try await source.save(Task(id: "f", title: "brought", done: false))

        gate.arm()
        async let late = source.exchange(to: gatedTarget)
        await gate.waitForStoppedSwap()
        try await source.exchange(to: target)
        let built = try await target.save(Task(id: "g", title: "on the brought version", done: false))
        #expect(built.parents == [brought.id])
        gate.letGo()
        _ = try await late
        #expect(try await target.heads().map(\.id) == [built.id])
    }

    /// A merge of all heads goes through merges of pairs of them, and a task that merged one
    /// such pair itself meanwhile made that merge a head. Landing, the merge of all heads
    /// built on it must take its place.
    @Test func aPairMergedMeanwhileIsNoHeadOnceAllHeadsAreMerged() async throws {
        let (first, second, gate) = try await storesOnHeads(["a", "b", "c"])
        let heads = try await first.heads().map(\.id).sorted()

        gate.arm()
        async let late = second.mergeHeads()
        await gate.waitForStoppedSwap()
        // The pair the tournament merges first, merged and made a head on its own.
        let pair = try #require(try await first.merge(heads[0], heads[1]).version)
        gate.letGo()
        let all = try #require(try await late?.version)
        #expect(all.parents.contains(pair.id))
        #expect(try await first.heads().map(\.id) == [all.id])
    }

    /// Two exchanges into one store at once, from replicas one version apart: the one behind
    /// lands its head first. The one ahead, landing next, brings a descendant of that head,
    /// which must go from the heads.
    @Test func aHeadAnotherExchangeBroughtGoesWhenItsDescendantLands() async throws {
        let behind = Store(backend: MemoryBackend(), configuration: .init(replica: "behind"))
        let ahead = Store(backend: MemoryBackend(), configuration: .init(replica: "ahead"))
        let shared = MemoryBackend()
        let gate = SwapGateBackend(shared)
        let target = Store(backend: shared, configuration: .init(replica: "target"))
        try await behind.save(Task(id: "t", title: "base", done: false))
        try await behind.exchange(to: target)
        try await behind.save(Task(id: "t", title: "shared", done: false))
        try await behind.exchange(to: ahead)
        let newest = try await ahead.save(Task(id: "t", title: "ahead", done: false))

        gate.arm()
        async let late = ahead.exchange(to: Store(backend: gate, configuration: .init(replica: "target")))
        await gate.waitForStoppedSwap()
        try await behind.exchange(to: target)
        gate.letGo()
        _ = try await late
        #expect(try await target.heads().map(\.id) == [newest.id])
    }
}
