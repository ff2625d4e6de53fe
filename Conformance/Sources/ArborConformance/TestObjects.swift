import Arbor

/// The objects the contract cases store: arbitrary bytes (the contract does not look inside),
/// different for every index and seed, named by their SHA-256.
enum TestObjects {
    /// Object number `index` of `size` bytes; `seed` makes another family of objects.
    static func object(_ index: Int, size: Int = 40, seed: UInt64 = 0) -> (hash: Hash, bytes: [UInt8]) {
        let bytes = self.bytes(size, seed: seed &+ UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9)
        return (Hash.of(bytes), bytes)
    }

    /// `count` pseudo-random bytes from `seed`. Large counts repeat a 64 KiB block whose first
    /// eight bytes carry the block number, so that no two blocks are alike and 64 MB are made fast.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        // SHA-256 in counter mode: hash after hash of (seed, counter), 32 bytes each.
        let blockSize = 1 << 16
        var block = [UInt8]()
        block.reserveCapacity(min(count, blockSize) + 32)
        var counter: UInt64 = 0
        while block.count < min(count, blockSize) {
            block += Hash.of(withUnsafeBytes(of: (seed.bigEndian, counter.bigEndian)) { Array($0) }).bytes
            counter += 1
        }
        block.removeLast(block.count - min(count, blockSize))
        guard count > blockSize else { return block }
        var bytes = [UInt8]()
        bytes.reserveCapacity(count)
        var number: UInt64 = 0
        while bytes.count < count {
            let start = bytes.count
            bytes.append(contentsOf: block.prefix(count - start))
            withUnsafeBytes(of: number.bigEndian) { stamp in
                for offset in 0..<min(8, bytes.count - start) { bytes[start + offset] = stamp[offset] }
            }
            number += 1
        }
        return bytes
    }

    /// A hash no test object has.
    static func unknownHash(_ index: Int) -> Hash {
        Hash.of(Array("not stored \(index)".utf8))
    }
}
