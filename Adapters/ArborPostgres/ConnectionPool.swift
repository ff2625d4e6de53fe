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
/// - A slot left without a connection (its connect failed: a role's `CONNECTION LIMIT`, a
///   server at `max_connections`) is retired, not kept idle: a later call takes a connected
///   slot where one is idle, and connects anew only where none is.
/// - A cancelled task waiting for a slot leaves the queue at once; one whose call is running
///   has the server cancel the call (`PQcancel`), which then fails, and the task throws
///   `CancellationError`. A call waiting for a lock would otherwise wait as long as the lock.
final class ConnectionPool: Sendable {
    /// A connection's place in the pool. `connection` is touched only on `queue`.
    final class Slot: @unchecked Sendable {
        let queue: DispatchQueue
        var connection: PGConnection?
        /// Whether `connection` was set when the last call on `queue` ended: read by `release`,
        /// off the queue.
        let isConnected = Atomic<Bool>(false)
        /// While a call runs: its number and what cancels it, for a cancellation handler on
        /// another thread; the call clears it under the lock before the next call can start.
        let running = Mutex<(call: UInt64, canceller: PGCanceller)?>(nil)

        init(index: Int) {
            queue = DispatchQueue(label: "arbor.postgres.connection.\(index)")
        }
    }

    private struct State {
        var idle: [Slot] = []
        var created = 0
        var waiters: [(number: UInt64, continuation: CheckedContinuation<Slot, any Error>)] = []
        var isClosed = false
        /// Numbers waiters and calls, so that a cancellation finds its own.
        var counter: UInt64 = 0
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
            slot.isConnected.store(true, ordering: .releasing)
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
            let number = state.withLock { state in
                state.counter += 1
                return state.counter
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    enum Outcome { case queued, slot(Slot), closed, cancelled }
                    let outcome: Outcome = state.withLock { state in
                        // Re-check under the lock: a slot may have come back meanwhile.
                        if state.isClosed { return .closed }
                        if let slot = state.idle.popLast() { return .slot(slot) }
                        // Cancelled before it queued: the handler found nothing to remove.
                        if Task.isCancelled { return .cancelled }
                        state.waiters.append((number, continuation))
                        return .queued
                    }
                    switch outcome {
                    case .queued: break
                    case .slot(let slot): continuation.resume(returning: slot)
                    case .closed: continuation.resume(throwing: closedError(operation))
                    case .cancelled: continuation.resume(throwing: CancellationError())
                    }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    state.waiters.firstIndex { $0.number == number }.map { state.waiters.remove(at: $0).continuation }
                }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }

    private func release(_ slot: Slot) {
        let isConnected = slot.isConnected.load(ordering: .acquiring)
        let waiter: CheckedContinuation<Slot, any Error>? = state.withLock { state in
            if state.isClosed {
                slot.queue.async { slot.connection = nil }
                return nil
            }
            if !state.waiters.isEmpty { return state.waiters.removeFirst().continuation }
            // Kept idle, a slot whose connect failed would be taken first (the idle list is a
            // stack) and fail the next call again while a connected slot sits idle below it.
            if isConnected { state.idle.append(slot) } else { state.created -= 1 }
            return nil
        }
        waiter?.resume(returning: slot)
    }

    /// Runs `body` with a connected connection, on that connection's queue.
    ///
    /// `rerunsOnALostConnection`: `body` only reads, and is run once more on a new connection
    /// when the connection it ran on turns out lost (a connection the server ended while it sat
    /// idle is found before the call; one lost during it fails a write, which says so).
    func withConnection<R: Sendable>(_ operation: String, rerunsOnALostConnection: Bool = false, _ body: @escaping @Sendable (PGConnection) throws -> R) async throws -> R {
        let slot = try await acquire(operation)
        defer { release(slot) }
        try Task.checkCancellation()
        let target = target
        let call = state.withLock { state in
            state.counter += 1
            return state.counter
        }
        let cancelled = CallCancellation()
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    slot.queue.async {
                        var reruns = rerunsOnALostConnection ? 1 : 0
                        while true {
                            var connected = false
                            do {
                                // A connection the server ended while it sat in the pool is
                                // replaced before the call, which then needs no rerun.
                                slot.connection?.takeInIdleInput()
                                if slot.connection?.isBroken ?? true {
                                    slot.connection = nil
                                    slot.connection = try PGConnection(target, operation: operation)
                                    connected = true
                                }
                                guard let connection = slot.connection else { throw ArborError(.connection, "no connection", backend: "postgres", operation: operation) }
                                if let canceller = connection.canceller() { slot.running.withLock { $0 = (call, canceller) } }
                                connection.cancellation = cancelled
                                defer {
                                    connection.cancellation = nil
                                    slot.running.withLock { $0 = nil }
                                }
                                // Cancelled before the call was marked running: the handler found
                                // nothing to cancel, so the call does not start.
                                if cancelled.isSet { throw CancellationError() }
                                let value = try body(connection)
                                if !connection.isReusable { slot.connection = nil }
                                slot.isConnected.store(slot.connection != nil, ordering: .releasing)
                                continuation.resume(returning: value)
                            } catch {
                                let lost = slot.connection.map { $0.isBroken } ?? false
                                if !(slot.connection?.isReusable ?? true) { slot.connection = nil }
                                // A connection made for this call that fails is no stale one.
                                if lost, !connected, reruns > 0, !cancelled.isSet, (error as? ArborError)?.code == .connection {
                                    reruns -= 1
                                    continue
                                }
                                slot.isConnected.store(slot.connection != nil, ordering: .releasing)
                                continuation.resume(throwing: error)
                            }
                            return
                        }
                    }
                }
            } onCancel: {
                cancelled.set()
                // Off the calling thread: PQcancel connects to the server. Sent under the lock, so
                // it cannot reach a later call on the same connection.
                DispatchQueue.global().async {
                    slot.running.withLock { running in
                        if let running, running.call == call { running.canceller.cancel() }
                    }
                }
            }
        } catch {
            // A call the server cancelled fails with its own error; the task says why.
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }


    /// Refuses further calls, fails the waiters and closes the idle connections; busy ones close
    /// when their call returns.
    func close() {
        let (idle, waiters) = state.withLock { state -> ([Slot], [CheckedContinuation<Slot, any Error>]) in
            if state.isClosed { return ([], []) }
            state.isClosed = true
            defer { state.idle = []; state.waiters = [] }
            return (state.idle, state.waiters.map(\.continuation))
        }
        for slot in idle { slot.queue.async { slot.connection = nil } }
        for waiter in waiters { waiter.resume(throwing: closedError("close")) }
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }
}
