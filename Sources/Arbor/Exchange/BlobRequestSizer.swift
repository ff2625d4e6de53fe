/// How many large records (blobs), or other objects of unknown sizes, to read in one request,
/// so that a request holds about ``byteBudget`` bytes whatever their sizes: a blob holds
/// anything from 1 KiB to 256 MiB, and a request sized by count alone (a thousand) could need
/// hundreds of gigabytes.
///
/// Sizes are known only once read, so the first request asks for one blob, and each later one
/// for as many as the budget holds of the largest read so far, and at most twice as many as the
/// request before: after many small records, a run of large ones is met by a request that grew
/// step by step, not by a thousand at once. (Only sizes asked of the engine before reading
/// would bound every request; the backend contract has no such call yet.)
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

    /// Takes the sizes of a request of `requested` blobs just read into account.
    mutating func read(_ sizes: some Sequence<Int>, requested: Int) {
        largest = sizes.reduce(largest, max)
        previous = requested
    }

    /// `hashes` in requests of ``count`` blobs, each handed to `body` with what `fetch` read,
    /// before the next is read: at most one request's bytes are held at a time (and what
    /// `body` keeps).
    mutating func inRequests(
        _ hashes: [Hash], fetch: ([Hash]) async throws -> [Hash: [UInt8]], _ body: ([Hash], [Hash: [UInt8]]) async throws -> Void
    ) async throws {
        var remaining = hashes[...]
        while !remaining.isEmpty {
            let request = Array(remaining.prefix(count))
            remaining = remaining.dropFirst(request.count)
            let fetched = try await fetch(request)
            read(fetched.values.lazy.map(\.count), requested: request.count)
            try await body(request, fetched)
        }
    }
}
