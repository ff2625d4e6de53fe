import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output or standard error as a `TextOutputStream`, written a line at a time, or, for
/// a listing piped or redirected, in blocks of 64 KB as C's stdio does (`arbor log` of 100,000
/// versions made 200,000 writes, two a line). Whatever is left is written by ``flush()`` or
/// when the stream goes away.
final class StandardStream: TextOutputStream {
    private let handle: FileHandle
    private let flushesEveryLine: Bool
    private var buffer: [UInt8] = []
    private static let blockSize = 65_536
    /// The first write that failed for another reason than a closed pipe (a full disk, say):
    /// the command must not end as if its output were all there.
    private(set) var failure: (any Error)?

    private init(handle: FileHandle, flushesEveryLine: Bool) {
        self.handle = handle
        self.flushesEveryLine = flushesEveryLine
    }

    /// Standard output; `blockBuffered`: in blocks unless it is a terminal.
    static func output(blockBuffered: Bool = false) -> StandardStream {
        StandardStream(handle: .standardOutput, flushesEveryLine: !blockBuffered || isatty(FileHandle.standardOutput.fileDescriptor) != 0)
    }

    static var error: StandardStream { StandardStream(handle: .standardError, flushesEveryLine: true) }

    func write(_ string: String) {
        buffer.append(contentsOf: string.utf8)
        // By line: whenever a line ends, also inside what was written (a JSON element begins
        // with the newline that ends the one before).
        if buffer.count >= Self.blockSize || (flushesEveryLine && string.utf8.contains(UInt8(ascii: "\n"))) { flush() }
    }

    /// Writes out what is buffered.
    func flush() {
        guard !buffer.isEmpty else { return }
        do {
            try handle.write(contentsOf: buffer)
        } catch {
            // A closed pipe (`arbor log | head`) is not worth failing over; anything else is.
            let posix = error as NSError
            if !(posix.domain == NSPOSIXErrorDomain && posix.code == Int(EPIPE)) && failure == nil { failure = error }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    deinit { flush() }
}
