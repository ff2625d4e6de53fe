/// A 64-bit checksum of bytes, several times cheaper than SHA-256: what a store remembers of a
/// node it checked by hash, to check the same node again when an engine lends it anew
/// (``InPlaceReadState``).
///
/// Four lanes each take every fourth 8-byte word as `lane = (lane ^ word) &* odd`, which is a
/// bijection of the lane for a given word: two inputs of one length that differ in a single word
/// always differ in that lane at the end, so any damage confined to one word (a flipped bit, a
/// zeroed word) is always caught, and wider damage is missed with a chance of about 2⁻⁶⁴. It is
/// no defence against someone who forges bytes on purpose, but the first read of each node
/// checked its SHA-256.
enum Fingerprint {
    private static let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
    private static let seeds: (UInt64, UInt64, UInt64, UInt64) = (0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344, 0xA409_3822_299F_31D0, 0x082E_FA98_EC4E_6C89)

    /// - Complexity: O(*n*) in the number of bytes, about a cycle per 8 bytes.
    static func of(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let raw = UnsafeRawBufferPointer(bytes)
        var (a, b, c, d) = seeds
        var offset = 0
        // Four independent multiplications per 32 bytes keep the multiplier busy.
        while offset + 32 <= raw.count {
            a = (a ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* multiplier
            b = (b ^ raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)) &* multiplier
            c = (c ^ raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)) &* multiplier
            d = (d ^ raw.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)) &* multiplier
            offset += 32
        }
        while offset + 8 <= raw.count {
            a = (a ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* multiplier
            offset += 8
        }
        var tail: UInt64 = 0
        for index in offset..<raw.count { tail |= UInt64(raw[index]) << (8 * UInt64(index - offset)) }
        b = (b ^ tail) &* multiplier
        // The lanes and the length, mixed into one word (a bijection after each).
        return murmurMix(murmurMix(murmurMix(murmurMix(UInt64(raw.count) ^ a) ^ b) ^ c) ^ d)
    }
}
