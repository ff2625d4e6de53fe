#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a transfer command says when Ctrl-C stops it. Only async-signal-safe calls happen in
/// the handler: a write of a constant message and `_exit`.
private let interruptionMessage: StaticString = "\ninterrupted: nothing is half-applied (refs change last); run the same command again to finish.\n"

enum Interruption {
    /// Makes SIGINT print ``interruptionMessage`` and exit with status 130. What landed stays:
    /// every transfer writes children first and refs last, and a rerun picks up from there.
    static func explainOnInterrupt() {
        signal(SIGINT) { _ in
            _ = write(STDERR_FILENO, interruptionMessage.utf8Start, interruptionMessage.utf8CodeUnitCount)
            _exit(130)
        }
    }
}
