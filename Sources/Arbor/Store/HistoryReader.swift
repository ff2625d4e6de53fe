/// Reads the commits of one history walk from one backend.
///
/// A walk learns each generation's hashes only from the generation before, so it asks once per
/// generation. Through ``Backend/ancestry(of:limit:)`` the reader asks for the commits together
/// with their ancestors, and serves the next generations from what came back: on a backend
/// that follows parents itself (PostgreSQL), a walk of `v` versions costs O(log v) requests
/// instead of `v`. Each request asks for twice as many ancestors as the walk used since the
/// last one (at least ``firstExtra``), so a short walk (the usual incremental sync) or one that
/// stops early (a time bound, a merge base) fetches little it does not use.
struct HistoryReader {
    let backend: any Backend
    /// Objects that came back ahead of the walk, not yet checked against their hashes.
    private var ahead = [Hash: [UInt8]]()
    /// Objects served from `ahead` since the last request.
    private var used = 0

    static let firstExtra = 8
    static let maximumExtra = 4_096

    init(_ backend: any Backend) {
        self.backend = backend
    }

    /// The objects `hashes`, checked against their hashes. Throws
    /// ``ArborError/Code/missingObject`` for one the backend lacks and
    /// ``ArborError/Code/corruptObject`` for one whose bytes do not match.
    ///
    /// - Complexity: at most one request.
    mutating func objects(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await read(hashes, checking: .throwing)
    }

    /// The objects among `hashes` that the backend holds intact; the others are left out.
    /// For a walk ahead of need, where an object that cannot be read may never be needed.
    ///
    /// - Complexity: at most one request.
    mutating func intactObjects(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await read(hashes, checking: .dropping)
    }

    /// The objects among `hashes` that the backend holds, as it returned them: for a caller
    /// that checks them itself and reports what it finds (`verify`).
    ///
    /// - Complexity: at most one request.
    mutating func uncheckedObjects(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try await read(hashes, checking: .none)
    }

    /// What happens to an object whose bytes do not match its hash, or that is missing.
    private enum Checking { case throwing, dropping, none }

    private mutating func read(_ hashes: [Hash], checking: Checking) async throws -> [Hash: [UInt8]] {
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        var wanted = [Hash]()
        var asked = Set<Hash>()
        for hash in hashes where result[hash] == nil {
            if let bytes = ahead.removeValue(forKey: hash) {
                used += 1
                if try intact(hash, bytes, checking) { result[hash] = bytes }
            } else if asked.insert(hash).inserted {
                wanted.append(hash)
            }
        }
        if wanted.isEmpty { return result }
        var fetched: [Hash: [UInt8]]
        do {
            fetched = try await backend.ancestry(of: wanted, limit: wanted.count + nextExtra())
        } catch let error as ArborError where error.code == .corruptObject && checking == .dropping {
            // An adapter that refuses a damaged object refuses its batch (the JSON files): one
            // at a time, a damaged object is left out, as one that does not match its hash is.
            fetched = try await backend.getOneAtATime(wanted).objects
        }
        if checking == .throwing, case let absent = wanted.filter({ fetched[$0] == nil }), !absent.isEmpty {
            // As ObjectFetch.verified: a sweep's batch in flight may write them back.
            fetched.merge(try await SweepMarker.readAgain(absent, from: backend)) { $1 }
        }
        for hash in wanted {
            guard let bytes = fetched.removeValue(forKey: hash) else {
                if checking == .throwing { throw ArborError(.missingObject, "object \(hash) is missing", backend: backend.engineName, operation: "get") }
                continue
            }
            if try intact(hash, bytes, checking) { result[hash] = bytes }
        }
        ahead.merge(fetched) { kept, _ in kept }
        return result
    }

    /// How many ancestors to ask for beyond the objects wanted now.
    private mutating func nextExtra() -> Int {
        defer { used = 0 }
        return min(max(2 * used, Self.firstExtra), Self.maximumExtra)
    }

    /// Whether to keep `bytes` as the object `hash`: when they do not match, `false`, or an
    /// error; unchecked, always.
    private func intact(_ hash: Hash, _ bytes: [UInt8], _ checking: Checking) throws -> Bool {
        if checking == .none || Hash.of(bytes) == hash { return true }
        guard checking == .throwing else { return false }
        throw ArborError(.corruptObject, "object \(hash) does not match its hash", backend: backend.engineName, operation: "get")
    }
}

extension Store {
    /// The versions `ids`, in order, read through `reader` (those not in the store's cache).
    func versions(_ ids: [Hash], reader: inout HistoryReader) async throws -> [Version] {
        try await versions(ids) { try await reader.objects($0) }
    }

    /// The versions `ids`, in order: from the store's cache, or decoded from what `fetch`
    /// returns for the others (checked against their hashes), and then cached.
    func versions(_ ids: [Hash], fetching fetch: ([Hash]) async throws -> [Hash: [UInt8]]) async throws -> [Version] {
        // History walks ask for a parent or two at a time, mostly cached: no tables for those.
        var hits = [Version]()
        hits.reserveCapacity(ids.count)
        while hits.count < ids.count, let version = versionCache.value(ids[hits.count]) { hits.append(version) }
        if hits.count == ids.count { return hits }
        // The hits so far go into the table as they are, not looked up again.
        var cached = Dictionary(zip(ids, hits), uniquingKeysWith: { first, _ in first })
        var missing = [Hash]()
        for id in ids[hits.count...] where cached[id] == nil {
            if let version = versionCache.value(id) { cached[id] = version } else { missing.append(id) }
        }
        let objects = missing.isEmpty ? [:] : try await fetch(missing)
        return try ids.map { id in
            if let version = cached[id] { return version }
            do {
                let version = Version(id: id, content: try Version.Content.decode(objects[id] ?? []))
                versionCache.insert(version, for: id)
                cached[id] = version
                return version
            } catch let error as ArborError {
                throw ArborError(.corruptObject, "version \(id) cannot be decoded: \(error.message)", backend: backend.engineName, operation: "read")
            }
        }
    }
}
