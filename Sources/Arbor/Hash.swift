import Crypto
import Foundation

/// The SHA-256 of an object's canonical bytes: the object's only name.
///
/// Stored as four big-endian 64-bit words so that hashing, equality and ordering are cheap;
/// the ordering is the ordering of the 32 bytes.
public struct Hash: Hashable, Comparable, Sendable, CustomStringConvertible {
    @usableFromInline var w0: UInt64
    @usableFromInline var w1: UInt64
    @usableFromInline var w2: UInt64
    @usableFromInline var w3: UInt64

    /// The number of bytes in a hash.
    public static let byteCount = 32

    /// Creates a hash from exactly 32 bytes, or returns `nil` for any other length.
    ///
    /// Inlinable, so that adapters reading hashes out of engine rows get a specialised copy
    /// rather than the generic one (whose metadata lookups cost more than the copy itself).
    @inlinable
    public init?<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        guard bytes.count == Hash.byteCount else { return nil }
        if let hash = bytes.withContiguousStorageIfAvailable({ Hash(bytes: UnsafeRawBufferPointer($0)) }) {
            guard let hash else { return nil }
            self = hash
            return
        }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var offset = 0
        for byte in bytes {
            switch offset / 8 {
            case 0: words.0 = words.0 << 8 | UInt64(byte)
            case 1: words.1 = words.1 << 8 | UInt64(byte)
            case 2: words.2 = words.2 << 8 | UInt64(byte)
            default: words.3 = words.3 << 8 | UInt64(byte)
            }
            offset += 1
        }
        (w0, w1, w2, w3) = words
    }

    /// Creates a hash from exactly 32 bytes in memory, or returns `nil` for any other length.
    @inlinable
    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == Hash.byteCount else { return nil }
        w0 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        w1 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        w2 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        w3 = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
    }

    /// Parses 64 hexadecimal digits (either case), or returns `nil`.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 64 else { return nil }
        var words: [UInt64] = [0, 0, 0, 0]
        for (offset, character) in utf8.enumerated() {
            guard let nibble = Hash.nibble(character) else { return nil }
            words[offset / 16] = (words[offset / 16] << 4) | UInt64(nibble)
        }
        (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
    }

    /// The SHA-256 of `bytes`.
    ///
    /// - Complexity: O(*n*) in the number of bytes.
    public static func of(_ bytes: [UInt8]) -> Hash {
        bytes.withUnsafeBytes { of($0) }
    }

    /// The SHA-256 of the bytes in `buffer`.
    ///
    /// - Complexity: O(*n*) in the number of bytes.
    public static func of(_ buffer: UnsafeRawBufferPointer) -> Hash {
        SHA256.hash(data: buffer).withUnsafeBytes { (digest: UnsafeRawBufferPointer) in Hash(bytes: digest)! }
    }

    /// The 32 bytes of the hash.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(Hash.byteCount)
        append(to: &result)
        return result
    }

    /// Appends the 32 bytes of the hash to `buffer`.
    @inlinable
    public func append(to buffer: inout [UInt8]) {
        withUnsafeBytes { buffer.append(contentsOf: $0) }
    }

    /// Runs `body` over the 32 bytes of the hash, held on the stack: an engine's key without an allocation.
    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var words = (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)
        return try Swift.withUnsafeBytes(of: &words, body)
    }

    /// 64 lowercase hexadecimal digits.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var characters = [UInt8]()
        characters.reserveCapacity(64)
        for byte in bytes {
            characters.append(digits[Int(byte >> 4)])
            characters.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    public var description: String { hex }

    /// The first `length` hexadecimal digits, as used for abbreviated versions.
    public func abbreviated(_ length: Int = 12) -> String { String(hex.prefix(length)) }

    /// A SHA-256 is already uniformly distributed: one word of it is as good a hash-table key as
    /// all four, at a quarter of the hashing cost. Equality still compares every word.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(w0)
    }

    public static func == (lhs: Hash, rhs: Hash) -> Bool {
        lhs.w0 == rhs.w0 && lhs.w1 == rhs.w1 && lhs.w2 == rhs.w2 && lhs.w3 == rhs.w3
    }

    public static func < (lhs: Hash, rhs: Hash) -> Bool {
        (lhs.w0, lhs.w1, lhs.w2, lhs.w3) < (rhs.w0, rhs.w1, rhs.w2, rhs.w3)
    }

    /// The first 32 bits, used where a hash serves as a well-mixed random number.
    var prefix32: UInt32 { UInt32(truncatingIfNeeded: w0 >> 32) }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
