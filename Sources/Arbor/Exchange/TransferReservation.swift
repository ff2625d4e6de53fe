import Foundation
import Synchronization

/// An exchange's claim on its target while it copies: a ref `transfers/<start>-<id>` (the start
/// in milliseconds since 1970, the id random hexadecimal, the same for all the claims of one
/// exchange), made once the exchange has run for its delay (``Store/Configuration/exchangeClaimDelay``)
/// and removed once its heads moved.
///
/// A collection removes nothing while a claim is live: an exchange takes a long while from
/// finding an object present (or writing it) to moving the heads, often longer than any grace
/// period, and what it found or wrote is unreachable until then. A claim is live while its start
/// is less than ``lifetime`` from now (either way: the clocks of processes sharing a store
/// differ); a task of the exchange renews it every ``renewal`` (``KeptClaim``: a new ref with the
/// same id, then the old one removed), so the claim of a killed exchange lapses within
/// ``lifetime``, and a collection removes it once it is twice as old. The ref's value names
/// nothing: walks from the refs leave these refs out.
struct TransferReservation: Sendable {
    /// How long a claim counts from its start. Longer than the renewal by more than the clocks
    /// of the processes sharing a store may differ.
    static let lifetime: Duration = .seconds(180)
    /// How often a running exchange makes a fresh claim.
    static let renewal: Duration = .seconds(20)

    private let backend: any Backend
    /// The exchange's id, in the name of each of its claims.
    let id: String
    /// The ref of the current claim.
    private(set) var name: String

    /// Makes a claim on `backend`.
    ///
    /// - Complexity: one compare-and-swap.
    static func make(on backend: any Backend, id: String = newID()) async throws -> TransferReservation {
        TransferReservation(backend: backend, id: id, name: try await claim(id, on: backend))
    }

    private init(backend: any Backend, id: String, name: String) {
        self.backend = backend
        self.id = id
        self.name = name
    }

    /// A fresh exchange id.
    static func newID() -> String { StampedRef.newID() }

    /// Makes a fresh claim, then drops the last (``KeptClaim`` paces the renewals).
    ///
    /// - Complexity: two compare-and-swaps.
    mutating func renew() async throws {
        let fresh = try await Self.claim(id, on: backend)
        let old = name
        name = fresh
        await Self.drop(old, on: backend)
    }

    /// Drops the claim. Best effort, and outside the calling task, since a backend may refuse
    /// the calls of a cancelled one: a claim left behind (the connection dropped) is dropped by
    /// the next collection in this process that finds it; elsewhere it lapses within ``lifetime``.
    func remove() async {
        let (backend, name) = (backend, name)
        await Task.detached { await Self.drop(name, on: backend) }.value
    }

    /// Claims this process made but could not drop (or could not tell whether it made them).
    private static let abandoned = Mutex(Set<String>())

    /// Drops the claim `ref` from `backend`, or notes it as abandoned when that fails.
    private static func drop(_ ref: String, on backend: any Backend) async {
        do {
            _ = try await backend.compareAndSwap(ref: ref, expected: value(of: ref), new: nil)
            _ = abandoned.withLock { $0.remove(ref) }
        } catch {
            _ = abandoned.withLock { $0.insert(ref) }
        }
    }

    // MARK: Claims in refs

    /// Whether `ref`, holding `hash`, is a claim (of any age): a `transfers/` ref whose value is
    /// anything but the hash of its name is an ordinary ref.
    static func isClaim(_ ref: String, holding hash: Hash) -> Bool { StampedRef.isStamped(ref, holding: hash, prefix: RefName.transferPrefix) }

    /// The ids of the exchanges that claim `backend` now; first drops the claims this process
    /// abandoned, and those long lapsed (twice ``lifetime`` from now, or not parsing).
    ///
    /// - Complexity: one read of the refs; a compare-and-swap per claim dropped.
    static func live(on backend: any Backend, now: Date = Date()) async throws -> Set<String> {
        let refs = try await backend.refs()
        // Not pruned of names this backend lacks: they may be another store's; but of those any
        // collection removes, by their age.
        let mine = abandoned.withLock { held in
            held = held.filter { ageMilliseconds(of: $0, now: now).map { abs($0) < 2 * lifetimeMilliseconds } ?? false }
            return held
        }
        var live = Set<String>()
        for (ref, hash) in refs where isClaim(ref, holding: hash) {
            let parts = parts(of: ref)
            let age = parts.map { StampedRef.milliseconds(now) - $0.start }
            if mine.contains(ref) || age.map({ abs($0) >= 2 * lifetimeMilliseconds }) ?? true {
                await drop(ref, on: backend)
            } else if let age, let parts, abs(age) < lifetimeMilliseconds {
                live.insert(parts.id)
            }
        }
        return live
    }

    /// A claim's start (milliseconds since 1970) and exchange id, from its name; `nil` for a
    /// name that does not parse.
    static func parts(of ref: String) -> (start: Int64, id: String)? { StampedRef.parts(of: ref, prefix: RefName.transferPrefix) }

    /// The exchange id in a claim's name.
    static func id(of ref: String) -> String? { parts(of: ref)?.id }

    /// How long ago, at `now`, a claim started (negative when its clock is ahead); `nil` for a
    /// name that does not parse.
    static func ageMilliseconds(of ref: String, now: Date) -> Int64? {
        StampedRef.ageMilliseconds(of: ref, prefix: RefName.transferPrefix, now: now)
    }

    /// The name of a claim of the exchange `id` started at `date`.
    static func name(of id: String, startedAt date: Date) -> String {
        StampedRef.name(RefName.transferPrefix, id: id, startedAt: date)
    }

    /// What a claim's ref holds: a hash of its name, naming no object.
    static func value(of ref: String) -> Hash { StampedRef.value(of: ref) }

    private static var lifetimeMilliseconds: Int64 { StampedRef.milliseconds(lifetime) }

    private static func claim(_ id: String, on backend: any Backend) async throws -> String {
        let name = name(of: id, startedAt: Date())
        let made: Bool
        do {
            made = try await backend.compareAndSwap(ref: name, expected: nil, new: value(of: name))
        } catch {
            // It may have landed all the same (a connection dropped on the way back).
            _ = abandoned.withLock { $0.insert(name) }
            throw error
        }
        guard made else {
            throw ArborError(.alreadyExists, "the transfer claim \(name) exists already", backend: backend.engineName, operation: "exchange")
        }
        return name
    }
}

extension Backend {
    /// The refs, less exchanges' claims (``TransferReservation``) and collections' sweep
    /// markers (``SweepMarker``), which name no object and are no versions.
    ///
    /// - Complexity: one read of the refs.
    func refsBesidesClaims() async throws -> [String: Hash] {
        try await refs().filter { !TransferReservation.isClaim($0.key, holding: $0.value) && !SweepMarker.isMarker($0.key, holding: $0.value) }
    }
}

/// A claim made once an exchange has run for its delay, and kept alive while it runs: a task of
/// its own makes it and renews it every renewal period, whatever the exchange is doing (a single
/// large request can take minutes).
final class KeptClaim: Sendable {
    /// The claim once made; when it was last made or renewed (when that call began); whether it
    /// was made too late to be trusted.
    private let state: Mutex<(reservation: TransferReservation?, renewed: ContinuousClock.Instant, late: Bool)>
    /// The exchange's id, the same for every attempt and renewal.
    private let id = TransferReservation.newID()
    private let heartbeat = Mutex<Task<Void, Never>?>(nil)
    /// Why the last attempt to make or renew the claim failed, if it did: the cause of a lapse.
    private let lastFailure = Mutex<ArborError?>(nil)
    private let started = ContinuousClock.now
    private let timing: ClaimTiming

    /// Starts claiming `backend` as `timing` says: at once for no delay (throwing if that fails).
    ///
    /// - Complexity: one compare-and-swap to claim; two more per renewal.
    static func make(on backend: any Backend, timing: ClaimTiming) async throws -> KeptClaim {
        let kept = KeptClaim(timing: timing)
        if timing.delay == .zero {
            let first = try await TransferReservation.make(on: backend, id: kept.id)
            kept.state.withLock { $0.reservation = first }
        }
        kept.heartbeat.withLock { $0 = Task.detached { [weak kept] in
            // Claimed at once: the first renewal is due a renewal period from now.
            try? await Task.sleep(for: timing.delay == .zero ? timing.renewal : timing.delay)
            while !Task.isCancelled {
                let claimed: Bool
                do {
                    guard let kept else { return }
                    // In a task of its own: stopping the heartbeat interrupts its sleep, never a
                    // call in flight (a backend may refuse the calls of a cancelled task, and a
                    // claim that landed regardless would be left behind).
                    claimed = await Task.detached { await kept.beat(on: backend) }.value
                }
                // A claim not made yet is tried again soon.
                try? await Task.sleep(for: claimed ? timing.renewal : min(timing.renewal, .milliseconds(250)))
            }
        } }
        return kept
    }

    private init(timing: ClaimTiming) {
        state = Mutex((nil, ContinuousClock.now, false))
        self.timing = timing
    }

    deinit { heartbeat.withLock { $0?.cancel() } }

    /// The ref of the current claim, if one was made.
    var name: String? { state.withLock { $0.reservation?.name } }

    /// Whether a collection may have removed what the exchange found present or wrote: no claim
    /// made by its delay plus the margin (or one made only after that), or none renewed for the
    /// lapse.
    var mayHaveLapsed: Bool {
        lapse != nil
    }

    /// What to say of a claim that ``mayHaveLapsed``: the cause the last failed attempt gave
    /// (its code, and the adapter's message as the underlying error), or `nil` if none lapsed.
    var lapse: (code: ArborError.Code, cause: ArborError?)? {
        guard hasLapsed else { return nil }
        let cause = lastFailure.withLock { $0 }
        return (cause?.code ?? .connection, cause)
    }

    private var hasLapsed: Bool {
        let (reservation, renewed, late) = state.withLock { ($0.reservation, $0.renewed, $0.late) }
        if reservation == nil { return ContinuousClock.now - started >= timing.claimDeadline }
        return late || ContinuousClock.now - renewed >= timing.lapse
    }

    /// Makes the claim, or renews it (only the heartbeat calls this, one call at a time, a
    /// renewal period after the last); what fails is tried again at a later beat. Returns
    /// whether a claim is held.
    private func beat(on backend: any Backend) async -> Bool {
        // Stamped before the call: the claim is no fresher than the moment it was asked for.
        let asked = ContinuousClock.now
        do {
            if var reservation = state.withLock({ $0.reservation }) {
                try await reservation.renew()
                state.withLock { ($0.reservation, $0.renewed) = (reservation, asked) }
            } else {
                let reservation = try await TransferReservation.make(on: backend, id: id)
                // Landed past the deadline: a collection may have finished meanwhile.
                let late = ContinuousClock.now - started >= timing.claimDeadline
                state.withLock { $0 = (reservation, asked, late) }
            }
        } catch {
            lastFailure.withLock { $0 = error as? ArborError ?? ArborError(.engine, "\(error)") }
        }
        return state.withLock { $0.reservation != nil }
    }

    /// Stops the heartbeat and drops the claim, if one was made (best effort, see
    /// ``TransferReservation/remove()``).
    func remove() async {
        let beat = heartbeat.withLock { task in
            defer { task = nil }
            return task
        }
        beat?.cancel()
        await beat?.value
        await state.withLock { $0.reservation }?.remove()
    }
}
