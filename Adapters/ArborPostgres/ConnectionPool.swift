import Arbor
import Dispatch
import Synchronization

/// A few connections to one database, each used by one caller at a time, and each driven by
/// its own serial dispatch queue.
///
/// Why this is safe and keeps libpq off the Swift concurrency pool:
/// - libpq calls block (network round trips). They run only inside `withConnection`, on the
///   slot's own `DispatchQueue`; the calling task is suspended in a checked continuation, so no
///   cooperative thread ever waits for the server.
/// - A `PGConnection` is not thread-safe. Each one lives in exactly one `Slot`; a slot is handed
///   to one caller at a time (the `Mutex`-guarded idle list and waiter queue), and its
///   connection is only read or written on the slot's serial queue. That is what makes the
///   `@unchecked Sendable` of `Slot` sound.
/// - When all `maximumConnections` slots are busy, callers wait in FIFO order on continuations
///   (not on a lock), and a released slot goes straight to the first waiter.
/// - A connection found broken (server restarted, backend terminated) is dropped after the
///   failing call; the next call on that slot connects afresh.
final class ConnectionPool: Sendable {
    /// A connection's place in the pool. `connection` is touched only on `queue`.
    final class Slot: @unchecked Sendable {
        let queue: DispatchQueue
        var connection: PGConnection?

        init(index: Int) {
            queue = DispatchQueue(label: "arbor.postgres.connection.\(index)")
        }
    }

    private struct State {
        var idle: [Slot] = []
        var created = 0
        var waiters: [CheckedContinuation<Slot, any Error>] = []
        var isClosed = false
    }

    let target: ConnectionTarget
    let maximumConnections: Int
    private let state = Mutex(State())

    init(target: ConnectionTarget, maximumConnections: Int, first: PGConnection? = nil) {
        self.target = target
        self.maximumConnections = max(1, maximumConnections)
        if let first {
            // Hand over the connection `open`/`create` made; from now on only its queue uses it.
            let slot = Slot(index: 0)
            slot.connection = first
            state.withLock { $0.idle.append(slot); $0.created = 1 }
        }
    }

    private func closedError(_ operation: String) -> ArborError {
        ArborError(.closed, "the store is closed", backend: "postgres", operation: operation)
    }

    private func acquire(_ operation: String) async throws -> Slot {
        enum Next { case slot(Slot), wait, closed }
        let next: Next = state.withLock { state in
            if state.isClosed { return .closed }
            if let slot = state.idle.popLast() { return .slot(slot) }
            if state.created < maximumConnections {
                state.created += 1
                return .slot(Slot(index: state.created - 1))
            }
            return .wait
        }
        switch next {
        case .slot(let slot): return slot
        case .closed: throw closedError(operation)
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let closed = state.withLock { state in
                    // Re-check under the lock: a slot may have come back meanwhile.
                    if state.isClosed { return true }
                    if let slot = state.idle.popLast() {
                        continuation.resume(returning: slot)
                    } else {
                        state.waiters.append(continuation)
                    }
                    return false
                }
                if closed { continuation.resume(throwing: closedError(operation)) }
            }
        }
    }

    private func release(_ slot: Slot) {
        let waiter: CheckedContinuation<Slot, any Error>? = state.withLock { state in
            if state.isClosed {
                slot.queue.async { slot.connection = nil }
                return nil
            }
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.idle.append(slot)
            return nil
        }
        waiter?.resume(returning: slot)
    }

    /// Runs `body` with a connected connection, on that connection's queue.
    func withConnection<R: Sendable>(_ operation: String, _ body: @escaping @Sendable (PGConnection) throws -> R) async throws -> R {
        let slot = try await acquire(operation)
        defer { release(slot) }
        let target = target
        return try await withCheckedThrowingContinuation { continuation in
            slot.queue.async {
                do {
                    if slot.connection?.isBroken ?? true {
                        slot.connection = nil
                        slot.connection = try PGConnection(target, operation: operation)
                    }
                    let value = try body(slot.connection!)
                    if !(slot.connection?.isReusable ?? true) { slot.connection = nil }
                    continuation.resume(returning: value)
                } catch {
                    if !(slot.connection?.isReusable ?? true) { slot.connection = nil }
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Refuses further calls, fails the waiters and closes the idle connections; busy ones close
    /// when their call returns.
    func close() {
        let (idle, waiters) = state.withLock { state -> ([Slot], [CheckedContinuation<Slot, any Error>]) in
            if state.isClosed { return ([], []) }
            state.isClosed = true
            defer { state.idle = []; state.waiters = [] }
            return (state.idle, state.waiters)
        }
        for slot in idle { slot.queue.async { slot.connection = nil } }
        for waiter in waiters { waiter.resume(throwing: closedError("close")) }
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }
}
