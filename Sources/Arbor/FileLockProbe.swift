#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Which other process holds a POSIX record lock on a file: how the file engines' adapters
/// tell, before opening a store on a read-only file system without locks, that another process
/// has it open (and may write it through another mount).
package enum FileLockProbe {
    /// The id of a process other than this one that holds a lock on byte `offset` of the file
    /// at `path` (one a write lock there would conflict with: shared or exclusive), or `nil`:
    /// none, or it cannot be told (no such file, a file system without record locks). A probe
    /// for a write lock needs no write access: a read-only descriptor will do.
    package static func process(holdingByte offset: Int, of path: String) -> Int32? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var probe = flock()
        probe.l_type = Int16(F_WRLCK)
        probe.l_whence = Int16(SEEK_SET)
        probe.l_start = off_t(offset)
        probe.l_len = 1
        guard fcntl(descriptor, F_GETLK, &probe) == 0, probe.l_type != Int16(F_UNLCK) else { return nil }
        return probe.l_pid
    }

    /// `process` (from ``process(holdingByte:of:)``) as an error names it: Linux reports 0 for
    /// a holder in another PID namespace (another container, or the host).
    package static func describe(_ process: Int32) -> String {
        process > 0 ? "process \(process)" : "a process outside this PID namespace (another container, or the host)"
    }
}
