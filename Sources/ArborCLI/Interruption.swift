#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// What a command says when Ctrl-C stops it, by what it was doing. Only async-signal-safe calls
/// happen in the handler: a lock-free load, a write of a constant message and `_exit`.
private let transferMessage: StaticString = "\ninterrupted: nothing is half-applied (refs change last); run the same command again to finish.\n"
private let verifyingMessage: StaticString = "\ninterrupted while verifying: the copy is complete and its heads are set; run arbor verify on the target to check it.\n"
private let collectionMessage: StaticString = "\ninterrupted: what was removed stays removed, and what remains is whole; if another process committed meanwhile, run arbor verify on the store. Run arbor gc again to finish.\n"

/// ``Interruption/Work`` as its raw value, read by the signal handler.
private let interruptedWork = Atomic<Int>(Interruption.Work.transfer.rawValue)

enum Interruption {
    /// What the process is doing, for the message Ctrl-C prints.
    enum Work: Int {
        /// An exchange, sync, migration or clone copying: refs change last, a rerun finishes it.
        case transfer
        /// A migration or clone verifying a copy whose heads are already set: a rerun would be
        /// refused (the target has versions), `arbor verify` checks it.
        case verifyingCopy
        /// A garbage collection: a rerun finishes it, but what a concurrent commit re-used and
        /// the sweep had removed is not written back.
        case collection
    }

    /// Makes SIGINT print what `work` leaves behind and exit with status 130.
    static func explainOnInterrupt(_ work: Work = .transfer) {
        interruptedWork.store(work.rawValue, ordering: .relaxed)
        signal(SIGINT) { _ in
            let message = switch interruptedWork.load(ordering: .relaxed) {
            case Work.verifyingCopy.rawValue: verifyingMessage
            case Work.collection.rawValue: collectionMessage
            default: transferMessage
            }
            _ = write(STDERR_FILENO, message.utf8Start, message.utf8CodeUnitCount)
            _exit(130)
        }
    }

    /// Changes what Ctrl-C says from now on (the handler stays).
    static func nowDoing(_ work: Work) {
        interruptedWork.store(work.rawValue, ordering: .relaxed)
    }
}
