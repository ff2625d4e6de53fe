extension Array {
    /// The array cut into consecutive pieces of at most `size` elements, in order: how requests
    /// to a backend are batched.
    func chunks(of size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: Swift.max(size, 1)).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
