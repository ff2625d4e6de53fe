/// How many large records (blobs), or other objects of unknown sizes, to read in one request,
/// so that a request holds about ``byteBudget`` bytes whatever their sizes: a blob holds
/// anything from 1 KiB to 256 MiB, and a request sized by count alone (a thousand) could need
/// hundreds of gigabytes.
///
/// Where the engine tells sizes before reading (``Backend/objectSizes(_:)``), each request takes
/// as many blobs as the budget holds (one at least). Elsewhere sizes are known only once read, so
/// the first request asks for one blob, and each later one for as many as the budget holds of
/// the largest read so far, and at most twice as many as the request before: after many small
/// records, a run of large ones is met by a request that grew step by step, not by a thousand
/// at once (but possibly by a few hundred).
struct BlobRequestSizer {
    /// About the bytes one request may hold (a single blob may be larger).
    static let byteBudget = 16 << 20

    private let maximumCount: Int
    private var largest = 0
    private var previous = 0

    init(maximumCount: Int = Transfer.requestSize) {
        self.maximumCount = max(1, maximumCount)
    }

    /// How many blobs the next request asks for.
    var count: Int {
        largest == 0 ? 1 : max(1, min(maximumCount, Self.byteBudget / largest, 2 * previous))
    }

    /// How many of `remaining` the next request asks for: by `sizes` where the engine told them
    /// (a blob it did not name counts as empty: reading it finds it missing), else ``count``.
    func count(of remaining: some Sequence<Hash>, sizes: [Hash: Int]?) -> Int {
        guard let sizes else { return count }
        var taken = 0, total = 0
        for hash in remaining.prefix(maximumCount) {
            let size = sizes[hash] ?? 0
            if taken > 0 && total + size > Self.byteBudget { break }
            (taken, total) = (taken + 1, total + size)
        }
        return max(taken, 1)
    }

    /// Takes the sizes of a request of `requested` blobs just read into account.
    mutating func read(_ sizes: some Sequence<Int>, requested: Int) {
        largest = sizes.reduce(largest, max)
        previous = requested
    }

    /// `hashes` in requests (``count(of:sizes:)``, by `sizes` where the engine told them), each
    /// handed to `body` with what `fetch` read, before the next is read: at most one request's
    /// bytes are held at a time (and what `body` keeps).
    mutating func inRequests(
        _ hashes: [Hash], sizes: [Hash: Int]?, fetch: ([Hash]) async throws -> [Hash: [UInt8]],
        _ body: ([Hash], [Hash: [UInt8]]) async throws -> Void
    ) async throws {
        var remaining = hashes[...]
        while !remaining.isEmpty {
            let request = Array(remaining.prefix(count(of: remaining, sizes: sizes)))
            remaining = remaining.dropFirst(request.count)
            let fetched = try await fetch(request)
            read(fetched.values.lazy.map(\.count), requested: request.count)
            try await body(request, fetched)
        }
    }
}
