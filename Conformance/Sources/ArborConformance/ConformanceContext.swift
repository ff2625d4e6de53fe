import Arbor
import Foundation
import Synchronization

/// What a case works with: the fresh store, the ways to reach it again, and stores on it with a
/// deterministic clock. It closes every handle it opened when the case ends.
final class ConformanceContext: Sendable {
    let adapter: AdapterUnderTest
    let fresh: FreshBackend
    private let state: Mutex<(handles: [any Backend], step: String)>

    init(adapter: AdapterUnderTest, fresh: FreshBackend) {
        self.adapter = adapter
        self.fresh = fresh
        state = Mutex(([fresh.backend], ""))
    }

    /// Runs `body` on a fresh store of `adapter` after checking that it is empty, then closes every
    /// handle and cleans up, whatever happened. Every error is thrown as a ``ConformanceFailure``.
    static func withFresh(_ adapter: AdapterUnderTest, _ body: (ConformanceContext) async throws -> Void) async throws {
        let fresh: FreshBackend
        do { fresh = try await adapter.makeFresh() } catch {
            throw ConformanceFailure(message: "making a fresh store of \(adapter.name)", expected: "a store", actual: ConformanceFailure.describe(error))
        }
        let context = ConformanceContext(adapter: adapter, fresh: fresh)
        var failure: ConformanceFailure?
        do {
            try await context.requireEmpty()
            try await body(context)
        } catch let error as ConformanceFailure {
            failure = error
        } catch {
            let step = context.currentStep
            failure = ConformanceFailure(message: step.isEmpty ? "the case" : step, expected: "no error", actual: ConformanceFailure.describe(error))
        }
        // Out of the case's task: a cancelled one (a test's time limit, Ctrl-C) may have every
        // call refused (PostgreSQL's are), and the store would be left full for the next run.
        let cleanupError: (any Error)? = await Task {
            await context.closeAll()
            do { try await fresh.cleanup() } catch { return error }
            return nil
        }.value
        if let cleanupError, failure == nil {
            failure = ConformanceFailure(message: "cleaning up after the case", expected: "no error", actual: ConformanceFailure.describe(cleanupError))
        }
        if let failure { throw failure }
    }

    /// The fresh store.
    var backend: any Backend { fresh.backend }

    /// What the case is doing, named in the failure if an unexpected error ends it.
    var currentStep: String { state.withLock { $0.step } }

    /// Records what the case does next, for the failure message of an unexpected error.
    func step(_ description: String) {
        state.withLock { $0.step = description }
    }

    /// Runs `body` as the step `description`: an error it throws becomes a failure naming the step.
    @discardableResult
    func step<Value>(_ description: String, _ body: () async throws -> Value) async throws -> Value {
        step(description)
        do { return try await body() } catch let failure as ConformanceFailure { throw failure } catch {
            throw ConformanceFailure(message: description, expected: "no error", actual: ConformanceFailure.describe(error))
        }
    }

    /// Fails unless the store has no object and no ref.
    func requireEmpty() async throws {
        let (refs, hashes) = try await step("checking that the fresh store is empty") {
            (try await backend.refs(), try await backend.allHashes())
        }
        try expect(refs.isEmpty && hashes.isEmpty, "a fresh store is empty",
                   expected: "no objects and no refs", actual: "\(hashes.count) objects and refs \(refs.keys.sorted())")
    }

    /// The same store opened again (every earlier handle should be closed first).
    func reopen() async throws -> any Backend {
        try await open(fresh.reopen, "reopening the store", capability: ".reopen", closure: "reopen")
    }

    /// A second handle on the store, as another process would open it.
    func openSecondHandle() async throws -> any Backend {
        try await open(fresh.openSecondHandle, "opening a second handle on the store", capability: ".multiProcess", closure: "openSecondHandle")
    }

    private func open(
        _ opener: (@Sendable () async throws -> any Backend)?, _ description: String, capability: String, closure: String
    ) async throws -> any Backend {
        guard let opener else {
            throw ConformanceFailure(message: description, expected: "a FreshBackend.\(closure) closure, as the adapter declares \(capability)", actual: "none")
        }
        let handle = try await step(description) { try await opener() }
        state.withLock { $0.handles.append(handle) }
        return handle
    }

    /// Replaces the stored bytes of `hash` by `bytes`. Returns `false` if the adapter refused the
    /// wrong bytes with an ``ArborError`` (it checks hashes on `put`: detected on write).
    func corrupt(_ hash: Hash, with bytes: [UInt8]) async throws -> Bool {
        if let corrupt = fresh.corrupt {
            try await step("corrupting an object with FreshBackend.corrupt") { try await corrupt(hash, bytes) }
            return true
        }
        try await step("deleting an object to corrupt it") { try await backend.delete([hash]) }
        step("putting other bytes under the object's hash")
        do {
            try await backend.put([(hash, bytes)])
            return true
        } catch let error as ArborError where [.corruptObject, .invalidInput].contains(error.code) {
            return false
        }
    }

    /// Closes every handle the case opened, ignoring errors (the case may have closed some).
    func closeAll() async {
        let handles = state.withLock { $0.handles }
        for handle in handles { try? await handle.close() }
    }

    /// A store on `backend` (by default the fresh store) whose clock starts at a fixed time and
    /// moves one second a reading, so that its commits are the same on every adapter.
    func store(_ backend: (any Backend)? = nil, replica: String = "conformance", strategy: MergeStrategy = .mostRecent) -> Store {
        let clock = TickClock()
        return Store(backend: backend ?? self.backend, configuration: .init(
            replica: replica, clock: { clock.read() }, mergeStrategy: strategy))
    }
}

/// A clock that moves one second forward on every reading, from a fixed start.
final class TickClock: Sendable {
    private let now: Mutex<Double>
    init(start: Double = 1_763_700_000) { now = Mutex(start) }
    func read() -> Date { now.withLock { $0 += 1; return Date(timeIntervalSince1970: $0) } }
}
