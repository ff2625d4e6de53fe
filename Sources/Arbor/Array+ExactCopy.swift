extension Array {
    /// A copy in storage of its own sized to its count. An array kept for long (an index
    /// node, a saved record's bytes) should not keep the room of the buffer it was built in:
    /// a node gathered in a buffer reused with `removeAll(keepingCapacity: true)` would take
    /// that buffer's capacity, the largest run seen so far, about ten times the entries of a
    /// leaf of a large commit; bytes written by doubling keep up to as much room again.
    ///
    /// - Complexity: O(*n*).
    func exactCopy() -> [Element] {
        [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = buffer.initialize(fromContentsOf: self)
        }
    }
}
