@testable import Arbor

/// Damages one object on its way out, as a failing disk or a hand-edited file would, for the
/// tests of what reads it: the core, exchange, migration and verify.
final class DamagingBackend: ForwardingBackend {
    enum Damage {
        /// Every batch that asks for the object is refused with ``ArborError/Code/corruptObject``,
        /// as the JSON adapter refuses a file that does not match its hash; its walks ahead are
        /// the objects asked for, as the JSON adapter's, which has no walk of its own.
        case refusal
        /// The object comes back with a flipped byte, as a disk that rots would, through `get`
        /// and through `ancestry` (forwarded, so the inner backend's walks ahead are kept).
        case flippedByte
    }

    let inner: any Backend
    let victim: Hash
    let damage: Damage

    init(_ inner: any Backend, damaging victim: Hash, by damage: Damage) {
        self.inner = inner
        self.victim = victim
        self.damage = damage
    }

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        switch damage {
        case .refusal:
            guard !hashes.contains(victim) else { throw ArborError(.corruptObject, "object \(victim) does not match its hash", backend: "refusing") }
            return try await inner.get(hashes)
        case .flippedByte:
            return flipped(try await inner.get(hashes))
        }
    }

    func ancestry(of hashes: [Hash], limit: Int) async throws -> [Hash: [UInt8]] {
        switch damage {
        case .refusal: try await get(hashes)
        case .flippedByte: flipped(try await inner.ancestry(of: hashes, limit: limit))
        }
    }

    private func flipped(_ objects: [Hash: [UInt8]]) -> [Hash: [UInt8]] {
        var objects = objects
        if var bytes = objects[victim], !bytes.isEmpty {
            bytes[bytes.count / 2] ^= 0x40
            objects[victim] = bytes
        }
        return objects
    }
}
