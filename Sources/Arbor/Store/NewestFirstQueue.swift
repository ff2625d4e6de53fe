/// Versions waiting in a history walk, newest first (``Store/newestFirst(_:_:)``): a binary heap.
///
/// - Complexity: O(log n) to push or pop.
struct NewestFirstQueue {
    private var heap: [Version] = []

    mutating func push(_ version: Version) {
        heap.append(version)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Store.newestFirst(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the newest version, or `nil` when the queue is empty.
    mutating func pop() -> Version? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let newest = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count && Store.newestFirst(heap[left], heap[first]) { first = left }
            if right < heap.count && Store.newestFirst(heap[right], heap[first]) { first = right }
            if first == parent { break }
            heap.swapAt(parent, first)
            parent = first
        }
        return newest
    }
}
