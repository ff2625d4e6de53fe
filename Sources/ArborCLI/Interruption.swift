#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Synchronization

/// What a command says when Ctrl-C stops it, by what it was doing. Only async-signal-safe calls
/// happen in the handler: a lock-free load, a write of a constant message and `_exit`.
private let transferMessage: StaticString = "\ninterrupted: nothing is half-applied (refs change last; an exchange's claim on its target lapses within three minutes); run the same command again to finish.\n"
private let verifyingMessage: StaticString = "\ninterrupted while verifying: the copy is complete and its heads are set; run the same command again (it verifies, copying nothing) or arbor verify on the target.\n"
private let repairMessage: StaticString = "\ninterrupted: what was written is whole (each object after what it names) and moved no ref; run the same command again to finish.\n"
private let scratchRemovedMessage: StaticString = "\ninterrupted: the temporary stores were removed.\n"
let collectionMessage: StaticString = "\ninterrupted: what was removed stays removed, and what remains is whole; if another process committed meanwhile, run arbor verify on the store. Run arbor gc again to finish.\n"

/// Whether a Ctrl-C handler that ends the process itself is at work (``Interruption/removeOnInterrupt(_:)``).
private let handlingInterrupt = Atomic<Bool>(false)

/// ``Interruption/Work`` as its raw value, read by the signal handler.
private let interruptedWork = Atomic<Int>(Interruption.Work.transfer.rawValue)

enum Interruption {
    /// What the process is doing, for the message Ctrl-C prints.
    enum Work: Int {
        /// An exchange, sync, migration or clone copying: refs change last, a rerun finishes it.
        case transfer
        /// A migration or clone verifying a copy whose heads are already set: the same command
        /// run again verifies it (and copies nothing), as `arbor verify` on the target does.
        case verifyingCopy
        /// A repair writing objects over damaged ones: each batch is whole, a rerun finishes it.
        case repair
    }

    /// Makes SIGINT print what `work` leaves behind and exit with status 130.
    static func explainOnInterrupt(_ work: Work = .transfer) {
        interruptedWork.store(work.rawValue, ordering: .relaxed)
        signal(SIGINT) { _ in
            let message = switch interruptedWork.load(ordering: .relaxed) {
            case Work.verifyingCopy.rawValue: verifyingMessage
            case Work.repair.rawValue: repairMessage
            default: transferMessage
            }
            _ = write(STDERR_FILENO, message.utf8Start, message.utf8CodeUnitCount)
            _exit(130)
        }
    }

    /// Makes SIGINT remove the scratch folder `path` and exit with status 130, until the
    /// returned source is cancelled (then SIGINT stops the process as before). The removal runs on
    /// a dispatch queue, not in a signal handler, where a file system walk is not allowed.
    static func removeOnInterrupt(_ path: String) -> any DispatchSourceSignal {
        onInterrupt {
            handlingInterrupt.store(true, ordering: .sequentiallyConsistent)
            // The work goes on meanwhile: moved aside first, the folder gets no new files by its
            // path, and a removal that raced one is tried again.
            let aside = path + ".interrupted"
            let target = rename(path, aside) == 0 ? aside : path
            for _ in 0..<20 where FileManager.default.fileExists(atPath: target) {
                if (try? FileManager.default.removeItem(atPath: target)) == nil { usleep(50_000) }
            }
            _ = write(STDERR_FILENO, scratchRemovedMessage.utf8Start, scratchRemovedMessage.utf8CodeUnitCount)
            _exit(130)
        }
    }

    /// Makes the first SIGINT print `first` and cancel `task` (a garbage collection, a conformance
    /// run), which then stops where it is safe to; a second SIGINT prints `second` (by default,
    /// what an interrupted collection leaves behind) and exits with status 130 at once. Until the
    /// returned source is cancelled.
    static func cancelOnInterrupt<Success>(
        _ task: Task<Success, any Error>, saying first: StaticString, thenSaying second: StaticString = collectionMessage
    ) -> any DispatchSourceSignal {
        let interrupts = Atomic<Int>(0)
        return onInterrupt {
            if interrupts.add(1, ordering: .sequentiallyConsistent).newValue == 1 {
                _ = write(STDERR_FILENO, first.utf8Start, first.utf8CodeUnitCount)
                task.cancel()
            } else {
                _ = write(STDERR_FILENO, second.utf8Start, second.utf8CodeUnitCount)
                _exit(130)
            }
        }
    }

    /// Runs `handler` on a dispatch queue at each SIGINT, instead of stopping the process, until
    /// the returned source is cancelled: then SIGINT stops it as before. Off the signal handler,
    /// `handler` may do what a handler may not (walk the file system, cancel a task).
    private static func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler(handler: handler)
        source.setCancelHandler { signal(SIGINT, SIG_DFL) }
        source.resume()
        return source
    }

    /// Whether Ctrl-C is being handled by a handler that exits the process itself: a command
    /// that fails meanwhile (its folder removed under it) leaves the exit, and what is said, to it.
    static var isBeingHandled: Bool { handlingInterrupt.load(ordering: .sequentiallyConsistent) }

    /// Changes what Ctrl-C says from now on (the handler stays).
    static func nowDoing(_ work: Work) {
        interruptedWork.store(work.rawValue, ordering: .relaxed)
    }
}
