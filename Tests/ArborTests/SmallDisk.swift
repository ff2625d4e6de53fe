import Arbor
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file system that really fills up, or turns read-only: a tmpfs of a few megabytes mounted
/// for one test, which the test can grow to make room again, or remount read-only. Mounting
/// needs root (CAP_SYS_ADMIN): where it is refused, ``mount(megabytes:owner:)`` says so loudly
/// and returns `nil`.
final class SmallDisk: Sendable {
    let path: String

    private init(path: String) { self.path = path }

    /// - Parameter owner: the user the file system belongs to (a database server's), or the
    ///   current one.
    static func mount(megabytes: Int, owner: (uid: UInt32, gid: UInt32)? = nil) -> SmallDisk? {
        let path = temporaryPath("small-disk")
        guard mkdir(path, 0o700) == 0 else { return nil }
        let ownership = owner.map { ",uid=\($0.uid),gid=\($0.gid)" } ?? ""
        guard run(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700\(ownership)", "tmpfs", path]) else {
            rmdir(path)
            print("⚠️  test skipped: this machine refuses to mount a tmpfs, which the full-disk and read-only-disk tests need (root)")
            return nil
        }
        return SmallDisk(path: path)
    }

    /// Mounts the file system again read-only, or writable; what it holds stays.
    func remount(readOnly: Bool) throws {
        guard Self.run(["mount", "-o", readOnly ? "remount,ro" : "remount,rw", path]) else {
            throw ArborError(.io, "could not remount the tmpfs at \(path) \(readOnly ? "read-only" : "writable")")
        }
    }

    /// Grows (or shrinks) the file system; what it holds stays.
    func resize(megabytes: Int) throws {
        guard Self.run(["mount", "-o", "remount,size=\(megabytes)m", path]) else {
            throw ArborError(.io, "could not resize the tmpfs at \(path)")
        }
    }

    /// Unmounts (lazily: a store a failed test left open must not keep it mounted) and removes
    /// the mount point.
    func unmount() {
        _ = Self.run(["umount", "-l", path])
        rmdir(path)
    }

    /// Fills what is left with a file, so that the next write fails.
    func fill() {
        let descriptor = open(path + "/filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0xA5, count: 64 << 10)
        while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }

    /// Removes the filler, and waits (up to 10 s) until the file system counts its blocks free
    /// again: a process another test spawns at the wrong moment holds a copy of every open
    /// descriptor until it execs, the filler's among them while `fill()` writes, and a removed
    /// file's blocks come back only when its last descriptor closes.
    func removeFiller() {
        unlink(path + "/filler")
        let deadline = ContinuousClock.now + .seconds(10)
        var stats = statvfs()
        while statvfs(path, &stats) == 0, stats.f_bfree < stats.f_blocks / 2, ContinuousClock.now < deadline {
            usleep(10_000)
        }
    }

    private static func run(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
