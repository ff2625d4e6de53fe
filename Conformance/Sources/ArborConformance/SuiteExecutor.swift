import Foundation

/// The threads the suite runs its cases on: a few of its own, never the shared concurrency pool.
///
/// Adapters often block (file and database calls inside `async` functions). On the pool, a case
/// that blocks for seconds would starve the caller's other work — other tests running at the
/// same time; on these threads it cannot. There are several, so racing cases run truly in
/// parallel and a compare-and-swap that is not atomic shows.
final class SuiteExecutor: TaskExecutor, @unchecked Sendable {
    // `jobs` and `isStopped` are only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var jobs = [UnownedJob]()
    private var isStopped = false

    /// Starts `threads` threads; they end after ``stop()``, once the jobs enqueued are done.
    init(threads: Int = 4) {
        for index in 0..<max(1, threads) {
            let thread = Thread { [self] in work() }
            thread.name = "arbor-conformance-\(index)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the threads end once no job is left.
    func stop() {
        condition.lock()
        isStopped = true
        condition.broadcast()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty && !isStopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// Runs `body` with this executor preferred by it and every task it starts, then stops.
    static func run<Value>(_ body: () async throws -> Value) async rethrows -> Value {
        let executor = SuiteExecutor()
        defer { executor.stop() }
        return try await withTaskExecutorPreference(executor) { try await body() }
    }
}
