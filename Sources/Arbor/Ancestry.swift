/// ``Backend/ancestry(of:limit:)`` for an engine that reads objects cheaply one at a time within
/// one snapshot, such as a local file: the adapter reads, the walk follows the parents each
/// commit names, a generation at a time.
///
/// A history walk through ``Backend/get(_:)`` opens a read transaction per generation: for a
/// long line of versions, one per version, each with the locks and checks an engine takes to
/// begin one. Through this, one transaction serves as many generations as the walk asks for.
public enum Ancestry {
    /// The objects among `hashes` that `read` finds, and with them their ancestors, nearest
    /// generations first, up to `limit` objects read in all (every one of `hashes` counts, and
    /// is read whatever `limit`; so does every parent looked for and not found). An object that
    /// is not a well-formed commit is returned but not followed; the caller checks every object
    /// against its hash, as for ``Backend/get(_:)``.
    ///
    /// - Complexity: O(max(`limit`, *k*)) reads for *k* hashes.
    public static func collect(_ hashes: [Hash], limit: Int, read: (Hash) throws -> [UInt8]?) rethrows -> [Hash: [UInt8]] {
        var result = [Hash: [UInt8]](minimumCapacity: max(min(limit, 4_096), hashes.count))
        var queued = Set<Hash>()
        // In the order asked: which ancestors a limit leaves out is the same on every run.
        var generation = hashes.filter { queued.insert($0).inserted }
        var asked = true
        // Reads, not objects found, count toward the limit: a commit naming many missing
        // parents must not make the walk read past it.
        var reads = 0
        while !generation.isEmpty {
            var next = [Hash]()
            for hash in generation {
                guard asked || reads < limit else { return result }
                reads += 1
                guard let bytes = try read(hash) else { continue }
                result[hash] = bytes
                for parent in parents(of: bytes) where queued.insert(parent).inserted { next.append(parent) }
            }
            asked = false
            generation = next
        }
        return result
    }

    /// The parents a commit names; none for any other object, or for bytes that do not decode.
    static func parents(of bytes: [UInt8]) -> [Hash] {
        guard ObjectKind.of(bytes) == .commit, let content = try? Version.Content.decode(bytes) else { return [] }
        return content.parents
    }
}
