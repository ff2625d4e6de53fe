import Foundation
import Synchronization

/// An exchange's claim on its target while it copies: a ref `transfers/<start>-<random>` (the
/// start in milliseconds since 1970), made before the exchange asks which objects the target
/// holds and removed once its heads moved.
///
/// A collection removes nothing while a claim is live: an exchange takes a long while from
/// finding an object present (or writing it) to moving the heads, often longer than any grace
/// period, and what it found or wrote is unreachable until then. A claim is live for
/// ``lifetime`` from its start; an exchange that runs longer renews it (a new ref, then the old
/// one removed) every ``renewal``, so a claim left by a killed exchange stops counting after
/// ``lifetime``. The ref's value names nothing: walks from the refs leave these refs out.
struct TransferReservation {
    /// How long a claim counts from its start. Generous, since the clocks of the processes
    /// sharing a store may differ.
    static let lifetime: Duration = .seconds(600)
    /// How often a running exchange makes a fresh claim.
    static let renewal: Duration = .seconds(60)

    private let backend: any Backend
    /// The ref of the current claim.
    private(set) var name: String
    private var made = ContinuousClock.now
    private let renewal: Duration

    /// Makes a claim on `backend`, to be renewed every `renewal`.
    ///
    /// - Complexity: one compare-and-swap.
    static func make(on backend: any Backend, renewal: Duration = renewal) async throws -> TransferReservation {
        let name = try await claim(on: backend)
        return TransferReservation(backend: backend, name: name, renewal: renewal)
    }

    private init(backend: any Backend, name: String, renewal: Duration) {
        self.backend = backend
        self.name = name
        self.renewal = renewal
    }

    /// Makes a fresh claim once the renewal period has passed since the last, then drops the last.
    ///
    /// - Complexity: none until then; then two compare-and-swaps.
    mutating func renewIfDue() async throws {
        guard ContinuousClock.now - made >= renewal else { return }
        let fresh = try await Self.claim(on: backend)
        let old = name
        (name, made) = (fresh, ContinuousClock.now)
        await Self.drop(old, on: backend)
    }

    /// Drops the claim. Best effort, and outside the calling task, since a backend may refuse
    /// the calls of a cancelled one: a claim left behind (the connection dropped) is dropped by
    /// the next collection in this process that finds it, and by none elsewhere, where it only
    /// delays collections until it stops counting.
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

    /// The claims on `backend` that count now, once those this process abandoned are dropped.
    ///
    /// - Complexity: one read of the refs; a compare-and-swap per abandoned claim found.
    static func live(on backend: any Backend) async throws -> [String] {
        var refs = try await backend.refs()
        for ref in abandoned.withLock({ $0 }) where refs[ref] != nil {
            await drop(ref, on: backend)
            if !abandoned.withLock({ $0.contains(ref) }) { refs[ref] = nil }
        }
        return live(in: refs)
    }

    // MARK: Claims in refs

    /// Whether `ref` is a claim (of any age).
    static func isClaim(_ ref: String) -> Bool { ref.hasPrefix(RefName.transferPrefix) }

    /// The claims among `refs` that count at `now`: started less than ``lifetime`` before it
    /// (or after it, by a clock ahead of this one). A claim whose name does not parse counts.
    static func live(in refs: [String: Hash], now: Date = Date()) -> [String] {
        let nowMilliseconds = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let lifetimeMilliseconds = lifetime.components.seconds * 1000
        return refs.keys.filter { ref in
            guard isClaim(ref) else { return false }
            guard let started = startMilliseconds(of: ref) else { return true }
            return nowMilliseconds - started < lifetimeMilliseconds
        }.sorted()
    }

    /// The start of a claim, from its name.
    static func startMilliseconds(of ref: String) -> Int64? {
        let rest = ref.dropFirst(RefName.transferPrefix.count)
        return rest.split(separator: "-", maxSplits: 1).first.flatMap { Int64($0) }
    }

    /// The name of a claim started at `date`.
    static func name(startedAt date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        return "\(RefName.transferPrefix)\(milliseconds)-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
    }

    /// What a claim's ref holds: a hash of its name, naming no object.
    static func value(of ref: String) -> Hash { Hash.of(Array(ref.utf8)) }

    private static func claim(on backend: any Backend) async throws -> String {
        let name = name(startedAt: Date())
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
