#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Arbor

/// The raw file-system calls of the JSON adapter, each turning `errno` into an ``ArborError``
/// that names the file. Nothing else in the adapter calls the C library directly.
enum FileSystem {
    static let engine = "json"

    static func error(_ operation: String, _ path: String, errno code: Int32) -> ArborError {
        let reason = String(cString: strerror(code))
        let kind: ArborError.Code =
            switch code {
            case ENOENT, ENOTDIR: .notFound
            case EACCES, EPERM, EROFS: .permissionDenied
            case EEXIST: .alreadyExists
            default: .io
            }
        let hint = code == ENOSPC ? " (the disk is full)" : ""
        return ArborError(kind, "\(operation) \(path): \(reason)\(hint)", backend: engine, operation: operation)
    }

    /// Whether `path` exists (following links).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Creates a directory readable by its owner only; an existing one is fine.
    static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw error("mkdir", path, errno: errno) }
    }

    /// The whole content of a file.
    static func read(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw error("open", path, errno: errno) }
        defer { close(descriptor) }
        var result = [UInt8]()
        var info = stat()
        if fstat(descriptor, &info) == 0 { result.reserveCapacity(Int(info.st_size)) }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glue.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw error("read", path, errno: errno)
            }
            if count == 0 { return result }
            result.append(contentsOf: chunk[0..<count])
        }
    }

    /// Writes `bytes` to a new file at `temporary`, optionally flushes it to disk, and renames it
    /// to `path`: readers see the old file or the whole new one, never a part.
    static func writeAtomically(_ bytes: [UInt8], to path: String, via temporary: String, sync: Bool) throws {
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw error("create", temporary, errno: errno) }
        var closed = false
        defer { if !closed { close(descriptor) } }
        do {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { Glue.write(descriptor, $0.baseAddress! + offset, bytes.count - offset) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw error("write", temporary, errno: errno)
                }
                offset += written
            }
            if sync && Glue.fullSync(descriptor) != 0 { throw error("fsync", temporary, errno: errno) }
            closed = true
            if close(descriptor) != 0 { throw error("close", temporary, errno: errno) }
            if rename(temporary, path) != 0 { throw error("rename", path, errno: errno) }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Whether `path` is on a file system mounted read-only (`false` if that cannot be told).
    static func isOnReadOnlyFileSystem(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) == 0 && (UInt(info.f_flag) & UInt(ST_RDONLY)) != 0
    }

    /// Seconds since the file at `path` was last modified, or `nil` if that cannot be told.
    static func age(_ path: String) -> Double? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let modified = info.st_mtimespec.tv_sec
        #else
        let modified = info.st_mtim.tv_sec
        #endif
        return Double(time(nil) - modified)
    }

    /// Removes the folder `path` if it is empty; otherwise, or if it is gone, does nothing.
    static func removeEmptyDirectory(_ path: String) { rmdir(path) }

    /// Flushes a directory's entries (new and renamed files) to disk.
    static func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw error("open", path, errno: errno) }
        defer { close(descriptor) }
        if Glue.fullSync(descriptor) != 0 && errno != EINVAL { throw error("fsync", path, errno: errno) }
    }

    static func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT { throw error("unlink", path, errno: errno) }
    }

    /// The names in a directory, without `.` and `..`.
    static func list(_ path: String) throws -> [String] {
        guard let directory = opendir(path) else { throw error("opendir", path, errno: errno) }
        defer { closedir(directory) }
        var names = [String]()
        while true {
            // readdir returns NULL at the end and on an error alike; only errno tells them apart,
            // and a listing cut short by an I/O error must not pass for the whole folder.
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw error("readdir", path, errno: errno) }
                return names
            }
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// An exclusive advisory lock on a file, held across processes until released.
    ///
    /// The file is locked by the path's file: one deleted or replaced while this was open (a
    /// "stale" lock file removed by hand, a copy put over it) is opened again once the lock on
    /// the old one is taken, or this process and those that opened the new file would each
    /// hold "the" lock at once.
    final class Lock {
        private var descriptor: Int32
        let path: String

        init(path: String) throws {
            self.path = path
            descriptor = try Self.openFile(path)
        }

        deinit { close(descriptor) }

        private static func openFile(_ path: String) throws -> Int32 {
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw FileSystem.error("open", path, errno: errno) }
            return descriptor
        }

        /// Whether the locked descriptor is still the file at the path.
        private func isThePathsFile() throws -> Bool {
            var held = stat(), named = stat()
            guard fstat(descriptor, &held) == 0 else { throw FileSystem.error("fstat", path, errno: errno) }
            guard stat(path, &named) == 0 else {
                if errno == ENOENT { return false }
                throw FileSystem.error("stat", path, errno: errno)
            }
            return held.st_dev == named.st_dev && held.st_ino == named.st_ino
        }

        /// Runs `body` holding the lock; throws ``ArborError/Code/io`` if another holder keeps it
        /// past `timeout` (a process stopped with Ctrl-Z, or stuck flushing to a failing disk,
        /// would otherwise hold every writer of the store for as long).
        func withLock<R>(timeout: Duration, _ body: () throws -> R) throws -> R {
            let deadline = ContinuousClock.now + timeout
            // Short pauses: a waiter that slept long would lose its turn to newcomers, and time
            // out although no holder kept the lock long.
            var pause = 200  // microseconds, doubled up to 2 ms
            while true {
                if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
                    let current: Bool
                    do { current = try isThePathsFile() } catch {
                        flock(descriptor, LOCK_UN)
                        throw error
                    }
                    if current { break }
                    // Locked a file no longer at the path: the lock is the path's file.
                    flock(descriptor, LOCK_UN)
                    let reopened = try Self.openFile(path)
                    close(descriptor)
                    descriptor = reopened
                    continue
                }
                let code = errno
                if code == EINTR { continue }
                guard code == EWOULDBLOCK else { throw FileSystem.error("flock", path, errno: code) }
                guard ContinuousClock.now < deadline else {
                    throw ArborError(
                        .io, "could not take the lock on \(path) within \(timeout): another process held it (is it stopped, or stuck writing to a failing disk?), or many took turns; nothing was changed",
                        backend: "json", operation: "lock")
                }
                usleep(useconds_t(pause))
                pause = min(pause * 2, 2_000)
            }
            defer { flock(descriptor, LOCK_UN) }
            return try body()
        }
    }
}

/// Unambiguous names for the libc calls whose Swift names the adapter shadows.
private enum Glue {
    static func read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.read(descriptor, buffer, count)
        #elseif canImport(Glibc)
        Glibc.read(descriptor, buffer, count)
        #else
        Musl.read(descriptor, buffer, count)
        #endif
    }

    static func write(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.write(descriptor, buffer, count)
        #elseif canImport(Glibc)
        Glibc.write(descriptor, buffer, count)
        #else
        Musl.write(descriptor, buffer, count)
        #endif
    }

    /// Flushes a file to stable storage. On Darwin `fsync` leaves the data in the drive's cache,
    /// where a power loss takes it; `F_FULLFSYNC` flushes that too (falling back to `fsync`
    /// where the file system does not support it).
    static func fullSync(_ descriptor: Int32) -> Int32 {
        #if canImport(Darwin)
        if fcntl(descriptor, F_FULLFSYNC) == 0 { return 0 }
        #endif
        return fsync(descriptor)
    }
}
