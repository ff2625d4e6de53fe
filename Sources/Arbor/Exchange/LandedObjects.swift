/// The objects a transfer into a store that started empty has written, remembered in fixed
/// memory (8 MB, from the first batch that lands): a Bloom filter over their hashes. "No" is
/// certain, so the target is asked only about a "maybe". The probes are bits of the hash itself,
/// which SHA-256 spreads evenly.
///
/// A walk names an object again after its batch landed when a node of the base's index sits
/// under another parent than the one it is walked against (boundaries move as keys are added):
/// 5.9% of the objects of a million records built in ten commits were written twice before.
/// With six probes over 2²⁶ bits, a million objects give a false "maybe" once in about 2.5
/// million questions, ten million once in 23.
///
/// - Complexity: O(1) to insert or test.
struct LandedObjects {
    static let bitCount = 1 << 26
    private static let probes = 6
    /// Allocated at the first insert, so a transfer that writes nothing costs nothing.
    private var words = [UInt64]()

    mutating func insert(_ hash: Hash) {
        if words.isEmpty { words = [UInt64](repeating: 0, count: Self.bitCount / 64) }
        for probe in 0..<Self.probes {
            let bit = Self.bit(probe, of: hash)
            words[bit >> 6] |= 1 << UInt64(bit & 63)
        }
    }

    func mayContain(_ hash: Hash) -> Bool {
        guard !words.isEmpty else { return false }
        for probe in 0..<Self.probes {
            let bit = Self.bit(probe, of: hash)
            if words[bit >> 6] & (1 << UInt64(bit & 63)) == 0 { return false }
        }
        return true
    }

    @inline(__always)
    private static func bit(_ probe: Int, of hash: Hash) -> Int {
        let word = probe < 2 ? hash.w0 : (probe < 4 ? hash.w1 : hash.w2)
        return Int((probe & 1 == 0 ? word : word >> 32) & UInt64(bitCount - 1))
    }
}
