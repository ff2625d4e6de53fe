/// An order-independent fingerprint of a collection of objects, from their hashes: how many
/// there are, and two sums (modulo 2⁶⁴) of a keyed SipHash-2-4 of each hash.
///
/// Two collections with equal digests under one key are the same but with a chance of about
/// 2⁻¹²⁸. The key is drawn at random for each use and never leaves the process, so nobody who
/// can write objects into a store can aim them at a digest (unkeyed sums of hashes can be
/// matched by brute force over many chosen objects). A hash added twice counts twice.
///
/// It lets a migration into a new store prove that the store holds exactly the objects the copy
/// wrote (each read from the source and checked against its hash) without asking the source
/// about every one of them.
///
/// - Complexity: O(1) memory; O(1) to add a hash.
struct ObjectSetDigest: Equatable, Sendable {
    /// The two 128-bit SipHash keys.
    struct Key: Equatable, Sendable {
        var k0: UInt64, k1: UInt64, k2: UInt64, k3: UInt64

        static func random() -> Key {
            var generator = SystemRandomNumberGenerator()
            return Key(k0: generator.next(), k1: generator.next(), k2: generator.next(), k3: generator.next())
        }
    }

    let key: Key
    private(set) var count = 0
    private var first: UInt64 = 0
    private var second: UInt64 = 0

    init(key: Key) {
        self.key = key
    }

    mutating func insert(_ hash: Hash) {
        count += 1
        // The message is the hash's 32 bytes; SipHash reads them as little-endian words.
        let words = (hash.w0.byteSwapped, hash.w1.byteSwapped, hash.w2.byteSwapped, hash.w3.byteSwapped)
        first &+= Self.sipHash24(key.k0, key.k1, words)
        second &+= Self.sipHash24(key.k2, key.k3, words)
    }

    /// SipHash-2-4 (Aumasson and Bernstein) of a 32-byte message given as four little-endian words.
    static func sipHash24(_ k0: UInt64, _ k1: UInt64, _ message: (UInt64, UInt64, UInt64, UInt64)) -> UInt64 {
        var v0 = k0 ^ 0x736f_6d65_7073_6575
        var v1 = k1 ^ 0x646f_7261_6e64_6f6d
        var v2 = k0 ^ 0x6c79_6765_6e65_7261
        var v3 = k1 ^ 0x7465_6462_7974_6573
        @inline(__always) func round() {
            v0 &+= v1; v1 = v1.rotatedLeft(13); v1 ^= v0; v0 = v0.rotatedLeft(32)
            v2 &+= v3; v3 = v3.rotatedLeft(16); v3 ^= v2
            v0 &+= v3; v3 = v3.rotatedLeft(21); v3 ^= v0
            v2 &+= v1; v1 = v1.rotatedLeft(17); v1 ^= v2; v2 = v2.rotatedLeft(32)
        }
        @inline(__always) func compress(_ word: UInt64) {
            v3 ^= word
            round()
            round()
            v0 ^= word
        }
        compress(message.0)
        compress(message.1)
        compress(message.2)
        compress(message.3)
        compress(32 << 56)  // the last block: the message's length in bytes, and no bytes left
        v2 ^= 0xff
        round()
        round()
        round()
        round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    @inline(__always)
    fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 {
        self << count | self >> (64 - count)
    }
}
