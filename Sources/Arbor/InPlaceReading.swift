/// A backend that lends an object's bytes where the engine keeps them (LMDB's memory map,
/// SQLite's page cache), for the length of one call.
///
/// Optional. A point read that misses the store's caches checks and searches a leaf in place
/// through this, instead of copying the node into an array (an allocation of kilobytes per read)
/// and caching it: for an engine that keeps its pages in memory, the engine is the cache.
/// Backends that do not conform, and wrappers (``ForwardingBackend`` does not forward this), are
/// read through ``Backend/get(_:)``.
///
/// The store checks a node's SHA-256 the first time it reads it this way and remembers a 64-bit
/// ``Fingerprint`` of it, which later reads check instead: damage to a node after its first read
/// is still caught, by a cheaper checksum.
///
/// Rules every implementation keeps: the bytes are exactly those ``Backend/get(_:)`` returns for
/// the same hash; they stay valid until `body` returns, and not after; a store that does not
/// hold the object passes `nil`; a closed backend throws ``ArborError/Code/closed``.
public protocol InPlaceReading: Backend {
    /// Calls `body` with the bytes of object `hash` as the engine holds them, or with `nil` if
    /// the store does not hold it, and returns what `body` returns. `body` must not keep the
    /// buffer or call the backend again.
    ///
    /// - Complexity: one lookup in the engine, O(log *n*) for *n* objects, and no copy on
    ///   LMDB; on SQLite a row longer than a page is gathered from its overflow pages.
    func withObjectBytes<R>(_ hash: Hash, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R
}
