/// Versions waiting in a history walk, newest first (``Store/newestFirst(_:_:)``): a binary heap.
///
/// The heap orders small plain keys (time, id, slot) and the versions wait in a side array:
/// swapping whole versions retained and released their strings and parents on every step, and
/// a merge-base walk in a busy history pops many thousands.
///
/// - Complexity: O(log n) to push or pop.
struct NewestFirstQueue {
    private struct Key {
        var time: HybridTime
        var id: Hash
        var slot: Int

        /// The order of ``Store/newestFirst(_:_:)``.
        func precedes(_ other: Key) -> Bool {
            time != other.time ? time > other.time : id > other.id
        }
    }

    private var heap: [Key] = []
    private var versions: [Version?] = []
    /// Slots of `versions` free for reuse.
    private var free: [Int] = []

    mutating func push(_ version: Version) {
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            versions[slot] = version
        } else {
            slot = versions.count
            versions.append(version)
        }
        heap.append(Key(time: version.time, id: version.id, slot: slot))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the newest version, or `nil` when the queue is empty.
    mutating func pop() -> Version? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let slot = heap.removeLast().slot
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count && heap[left].precedes(heap[first]) { first = left }
            if right < heap.count && heap[right].precedes(heap[first]) { first = right }
            if first == parent { break }
            heap.swapAt(parent, first)
            parent = first
        }
        free.append(slot)
        defer { versions[slot] = nil }
        return versions[slot]
    }
}
