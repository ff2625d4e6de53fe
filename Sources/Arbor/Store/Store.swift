import Foundation
import Synchronization

/// A versioned store of records on one backend.
///
/// Every commit makes a new, immutable version; nothing is ever overwritten. Reads take a version
/// (by default the latest head). Two commits made on the same parent, in one process or in
/// several sharing the backend, both land and leave two heads, for a merge to join.
///
/// `Store` is `Sendable`: share one instance between tasks.
public final class Store: Sendable {
    /// How a store behaves; the defaults suit most uses.
    public struct Configuration: Sendable {
        /// The name this replica signs its commits with.
        public var replica: String
        /// How many decoded index nodes to keep in memory (0 turns the caches off). As many
        /// nodes are kept as bytes for point reads, half as many versions, and the fingerprints of
        /// eight times as many nodes read in place and found sound (``InPlaceReading``);
        /// within `cacheMemoryLimit` in all.
        public var nodeCacheCapacity: Int
        /// About how many bytes of memory the store's caches may hold together, whatever the
        /// size of its records: half for decoded index nodes, eleven thirty-seconds for nodes
        /// kept as bytes, an eighth for versions, a thirty-second for the fingerprints of nodes
        /// checked in place (given to the node bytes on a backend that lends nothing). With
        /// records of about 100 bytes the default holds `nodeCacheCapacity` nodes; with larger
        /// records it holds fewer. 0 turns the caches off.
        public var cacheMemoryLimit: Int
        /// The clock commit times are read from; replace it in tests.
        public var clock: @Sendable () -> Date
        /// How merges settle conflicts unless told otherwise.
        public var mergeStrategy: MergeStrategy
        /// Per-type overrides of `mergeStrategy`.
        public var mergeResolvers: MergeResolvers
        /// How long an exchange into this store runs before it claims the store, so that a
        /// collection spares what it found present or wrote (a `transfers/` ref; see
        /// ``Store/collectGarbage(gracePeriod:longestWaitForExchanges:progress:)``). Shorter exchanges, like commits,
        /// make no claim and need no extra writes: the grace period covers them. An exchange
        /// that could not claim within 25 seconds after this delay fails without moving the heads,
        /// so a collection's grace period should be longer than the delay plus 25 seconds (the
        /// default grace period is 60 seconds). Zero claims at once.
        public var exchangeClaimDelay: Duration

        public init(
            replica: String? = nil, nodeCacheCapacity: Int = 16_384, cacheMemoryLimit: Int = 256 << 20,
            clock: @escaping @Sendable () -> Date = { Date() },
            mergeStrategy: MergeStrategy = .mostRecent, mergeResolvers: MergeResolvers = MergeResolvers(),
            exchangeClaimDelay: Duration = .seconds(1)
        ) {
            self.replica = replica ?? "replica-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
            self.nodeCacheCapacity = nodeCacheCapacity
            self.cacheMemoryLimit = cacheMemoryLimit
            self.clock = clock
            self.mergeStrategy = mergeStrategy
            self.mergeResolvers = mergeResolvers
            self.exchangeClaimDelay = exchangeClaimDelay
        }
    }

    public let backend: any Backend
    public let configuration: Configuration
    let cache: NodeCache
    /// Index nodes as point reads keep them: verified bytes, not decoded (``NodeBytes``).
    let bytesCache: ObjectCache<NodeBytes>
    /// Versions read before: merges and exchanges walk the same recent history again and again.
    let versionCache: ObjectCache<Version>
    /// What point reads keep of the nodes they read where the engine keeps them (``InPlaceReading``).
    let inPlace: InPlaceReadState
    /// The latest time this store has signed a commit with, so its clock never runs backwards.
    private let lastTime = Mutex<HybridTime?>(nil)

    /// A store on `backend`. The backend stays open until ``close()``.
    public init(backend: any Backend, configuration: Configuration = Configuration()) {
        self.backend = backend
        self.configuration = configuration
        let limit = max(configuration.cacheMemoryLimit, 0)
        self.cache = NodeCache(capacity: configuration.nodeCacheCapacity, byteLimit: limit / 2)
        self.versionCache = ObjectCache(capacity: configuration.nodeCacheCapacity / 2, byteLimit: limit / 8)
        // The fingerprints' share goes to the node bytes when the backend lends nothing.
        let lender = backend as? any InPlaceReading
        let lends = lender != nil
        self.bytesCache = ObjectCache<NodeBytes>(capacity: configuration.nodeCacheCapacity, byteLimit: lends ? limit / 32 * 11 : limit / 8 * 3)
        let (verifiedCapacity, overflow) = max(configuration.nodeCacheCapacity, 0).multipliedReportingOverflow(by: 8)
        self.inPlace = InPlaceReadState(capacity: lends ? (overflow ? .max : verifiedCapacity) : 0, byteLimit: lends ? limit / 32 : 0, lender: lender)
    }

    /// Closes the backend.
    public func close() async throws { try await backend.close() }

    func makeSource() -> NodeSource {
        NodeSource(backend: backend, cache: cache, bytesCache: bytesCache, inPlace: inPlace)
    }

    /// The largest record a commit accepts, in bytes of its encoding (about the size of its
    /// properties' data): 256 MiB.
    ///
    /// The same everywhere, so that every store can take every version of every other: SQLite
    /// and PostgreSQL hold at most 1 GB in one value, a merge may join the properties of two
    /// records into one, and a transfer holds an object in memory a few times over. A larger
    /// record is refused with ``ArborError/Code/invalidInput`` before anything is written.
    public static let maximumRecordSize = 256 << 20

    /// The root of the empty index.
    static let emptyRoot: (hash: Hash, bytes: [UInt8]) = {
        let bytes = IndexNode.empty.encoded()
        return (Hash.of(bytes), bytes)
    }()

    func nextTime(after parents: [HybridTime]) -> HybridTime {
        lastTime.withLock { last in
            let time = HybridTime.next(after: parents + (last.map { [$0] } ?? []), now: configuration.clock())
            last = time
            return time
        }
    }

    // MARK: Versions and heads

    /// The version `id`. Throws ``ArborError/Code/missingObject`` if the store lacks it, and
    /// ``ArborError/Code/unknownVersion`` if it names another kind of object (an index node).
    public func version(_ id: Hash) async throws -> Version {
        try await namedVersions([id])[0]
    }

    /// The versions `ids`, named by a caller (``log(from:limit:)``, ``commit(_:message:parents:)``,
    /// ``merge(_:_:strategy:)``): as ``versions(_:)``, but an id of another kind of object (an
    /// index node) is ``ArborError/Code/unknownVersion``, a wrong argument, not damage.
    func namedVersions(_ ids: [Hash]) async throws -> [Version] {
        do {
            return try await versions(ids)
        } catch let error as ArborError where error.code == .corruptObject {
            if let objects = try? await backend.get(ids) {
                for id in ids {
                    guard let bytes = objects[id], Hash.of(bytes) == id else { continue }
                    if let wrongKind = Self.notAVersion(id, bytes) { throw wrongKind }
                }
            }
            throw error
        }
    }

    /// The error for `hash` when `bytes`, its object, is another kind of object than a version
    /// (an index node, a blob); `nil` when it is not.
    static func notAVersion(_ hash: Hash, _ bytes: [UInt8]?) -> ArborError? {
        guard let bytes, bytes.count >= 2, bytes[0] == objectFormatMarker, let kind = ObjectKind(rawValue: bytes[1]), kind != .commit else { return nil }
        return ArborError(.unknownVersion, "\(hash) is a \(kind.name) object of this store, not a version")
    }

    /// The versions `ids`, in order, fetched in one batch.
    public func versions(_ ids: [Hash]) async throws -> [Version] {
        try await versions(ids) { try await ObjectFetch.verified($0, from: backend) }
    }

    /// The current head set: the ref's value and the heads it names.
    func headState() async throws -> (ref: Hash?, heads: [Hash]) {
        try await Transfer.headState(of: backend)
    }

    /// The versions no other version builds on, newest first.
    public func heads() async throws -> [Version] {
        let (_, ids) = try await headState()
        return try await versions(ids).sorted(by: Store.newestFirst)
    }

    /// The newest head (by commit time, ties broken by hash), or `nil` for an empty store.
    public func head() async throws -> Version? {
        try await heads().first
    }

    static func newestFirst(_ a: Version, _ b: Version) -> Bool {
        a.time != b.time ? a.time > b.time : a.id > b.id
    }

    /// Replaces `removing` by `adding` in the head set, retrying the compare-and-swap until it
    /// lands: concurrent writers each keep their own head, so nothing is lost. A swap whose
    /// connection dropped (``ArborError/Code/connection``) is tried again twice, as one that
    /// lost a race, since it may have landed (and after the third, counts as landed if the heads
    /// read then hold `adding`); a cancelled one counts as landed if they do; other errors are
    /// thrown.
    ///
    /// `existing` is the time of `adding` when it may be a version the store held before (a
    /// merge another replica or task made too, a fast-forward): one that a head builds on by
    /// the time of the swap stays out of the heads. Only heads newer than it can, and none of
    /// `settled`, heads known not to (those of a head set that held what `adding` builds on:
    /// no head builds on another), so merging the current heads reads no history unless heads
    /// came meanwhile. (A head whose time the clock could not advance past its parent's is
    /// missed, and left beside its child: never the other way.)
    func updateHeads(removing: Set<Hash>, adding: Hash, existing: HybridTime? = nil, settled: Set<Hash> = []) async throws {
        var time = existing
        var lostAnswers = 0
        var contention = RefContention()
        var commits = [Hash: ObjectLinks]()
        var reader = HistoryReader(backend)
        while true {
            let (ref, current) = try await headState()
            var heads = Set(current)
            heads.subtract(removing)
            if let time, !heads.contains(adding) {
                let builtOn = try await aHead(among: heads.subtracting(settled), newerThan: time, buildsOn: adding, reader: &reader, commits: &commits)
                if !builtOn { heads.insert(adding) }
            } else {
                heads.insert(adding)
            }
            let bytes = try HeadSet.encode(heads)
            let hash = Hash.of(bytes)
            if hash == ref { return }
            try await backend.put([(hash, bytes)])
            do {
                if try await backend.compareAndSwap(ref: RefName.heads, expected: ref, new: hash) { return }
            } catch {
                let dropped = (error as? ArborError)?.code == .connection
                guard dropped || error is CancellationError else { throw error }
                if dropped && lostAnswers < 2 {
                    // A dropped connection leaves the swap's fate unknown: its answer lost after
                    // it landed, or the statement still landing. Round again, as after a lost
                    // race: the heads then read are the set written (done), the old set (the same
                    // swap again, which lands once), or a set whose heads build on `adding` (kept
                    // out, as any head another builds on). A caller retrying on the error would
                    // make a second version of the same change.
                    lostAnswers += 1
                    if time == nil { time = try await versions([adding])[0].time }
                } else {
                    // Given up, or cancelled in flight (PostgreSQL's cancel request can reach the
                    // server after the statement committed): it landed if the heads, read outside
                    // a cancelled task, hold `adding`, or build on it (another writer committed
                    // over it, or merged it, since it landed: none could have, had it not).
                    let landed = try? await Task.detached { [self] in
                        let heads = try await headState().heads
                        if heads.contains(adding) { return true }
                        var reader = HistoryReader(backend)
                        var commits = [Hash: ObjectLinks]()
                        return try await aHead(among: heads, newerThan: try await versions([adding])[0].time, buildsOn: adding, reader: &reader, commits: &commits)
                    }.value
                    if landed == true { return }
                    throw error
                }
            }
            await contention.backOff()
        }
    }

    /// Whether a version of `heads` newer than `time` builds on `version`: only those can (a
    /// version is newer than its parents).
    private func aHead(
        among heads: some Collection<Hash>, newerThan time: HybridTime, buildsOn version: Hash,
        reader: inout HistoryReader, commits: inout [Hash: ObjectLinks]
    ) async throws -> Bool {
        let newer = Set(try await versions(Array(heads)).filter { $0.time > time }.map(\.id))
        return try await !Transfer.ancestors(among: [version], of: newer, reader: &reader, commits: &commits).isEmpty
    }

    /// Whether `text` is `HEAD`, in any case and between spaces.
    static func namesTheNewestHead(_ text: String) -> Bool {
        text.trimmingCharacters(in: .whitespaces).uppercased() == "HEAD"
    }

    /// Resolves a version written as a full hash, a unique prefix of at least 4 hex digits, or
    /// `HEAD` (the newest head), optionally followed by `~N` (`~` alone is `~1`): the version
    /// `N` first parents back, as in Git.
    ///
    /// - Complexity: a prefix walks the history reachable from the heads, in memory for one batch
    ///   of versions.
    public func resolve(_ text: String) async throws -> Version {
        if let tilde = text.firstIndex(of: "~") {
            let countText = text[text.index(after: tilde)...]
            guard let steps = countText.isEmpty ? 1 : Int(countText), steps >= 0 else {
                throw ArborError(.unknownVersion, "\(String(reflecting: String(text.prefix(80)))): ~ must be followed by a number of generations")
            }
            var version = try await resolve(String(text[..<tilde]))
            for step in 0..<steps {
                guard let parent = version.parents.first else {
                    throw ArborError(.unknownVersion, "\(text.prefix(80)) goes back \(steps) versions, but the history ends after \(step)")
                }
                // A hash the history holds: one that names no version is damage, not a wrong argument.
                version = try await versions([parent])[0]
            }
            return version
        }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if Store.namesTheNewestHead(trimmed) {
            guard let head = try await head() else { throw ArborError(.unknownVersion, "the store has no versions yet") }
            return head
        }
        if let hash = Hash(hex: trimmed) {
            let objects: [Hash: [UInt8]]
            do { objects = try await ObjectFetch.verified([hash], from: backend) } catch let error as ArborError where error.code == .missingObject {
                throw ArborError(.unknownVersion, "no version \(hash) in this store")
            }
            // The hash of another object of the store (a node, a blob) is a wrong argument, not damage.
            if let wrongKind = Self.notAVersion(hash, objects[hash]) { throw wrongKind }
            return try await versions([hash]) { _ in objects }[0]
        }
        let prefix = trimmed.lowercased()
        guard prefix.count >= 4, prefix.count < 64, prefix.allSatisfy(\.isHexDigit) else {
            throw ArborError(.unknownVersion, "\(String(reflecting: String(trimmed.prefix(80)))) is not a version: give a hash, a prefix of at least 4 hex digits, or HEAD")
        }
        // The history streamed, keeping only matches: a store of millions of versions is not
        // held whole to find one (six are enough to say a prefix is ambiguous).
        var matches = [Version]()
        try await log(batchSize: 4_096) { batch in
            for version in batch where matches.count < 6 && version.id.hex.hasPrefix(prefix) { matches.append(version) }
        }
        switch matches.count {
        case 1: return matches[0]
        case 0: throw ArborError(.unknownVersion, "no version starts with \(prefix)")
        default:
            throw ArborError(.unknownVersion, "\(prefix) is ambiguous: \(matches.prefix(5).map { $0.id.abbreviated() }.joined(separator: ", "))")
        }
    }
}
