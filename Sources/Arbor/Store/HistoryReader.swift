/// Reads the commits of one history walk from one backend.
///
/// A walk learns each generation's hashes only from the generation before, so it asks once per
/// generation. Through ``Backend/ancestry(of:limit:)`` the reader asks for the commits together
/// with their ancestors, and serves the next generations from what came back: on a backend
/// that follows parents itself (PostgreSQL), a walk of `v` versions costs O(log v) requests
/// instead of `v`. The amount asked for doubles with each request, so a short walk (the usual
/// incremental sync) stays cheap.
struct HistoryReader {
    let backend: any Backend
    /// Objects that came back ahead of the walk, not yet checked against their hashes.
    private var ahead = [Hash: [UInt8]]()
    private var extra = HistoryReader.firstExtra

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
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        var wanted = [Hash]()
        for hash in hashes where result[hash] == nil {
            if let bytes = ahead.removeValue(forKey: hash) {
                try check(hash, bytes)
                result[hash] = bytes
            } else if !wanted.contains(hash) {
                wanted.append(hash)
            }
        }
        if wanted.isEmpty { return result }
        var fetched = try await backend.ancestry(of: wanted, limit: wanted.count + extra)
        extra = min(extra * 2, Self.maximumExtra)
        for hash in wanted {
            guard let bytes = fetched.removeValue(forKey: hash) else {
                throw ArborError(.missingObject, "object \(hash) is missing", backend: backend.engineName, operation: "get")
            }
            try check(hash, bytes)
            result[hash] = bytes
        }
        ahead.merge(fetched) { kept, _ in kept }
        return result
    }

    /// The objects among `hashes` that the backend holds intact; the others are left out.
    /// For a walk ahead of need, where an object that cannot be read may never be needed.
    ///
    /// - Complexity: at most one request.
    mutating func intactObjects(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        var wanted = [Hash]()
        for hash in hashes {
            if let bytes = ahead.removeValue(forKey: hash) {
                if Hash.of(bytes) == hash { result[hash] = bytes }
            } else if result[hash] == nil {
                wanted.append(hash)
            }
        }
        if wanted.isEmpty { return result }
        var fetched = try await backend.ancestry(of: wanted, limit: wanted.count + extra)
        extra = min(extra * 2, Self.maximumExtra)
        for hash in wanted {
            if let bytes = fetched.removeValue(forKey: hash), Hash.of(bytes) == hash { result[hash] = bytes }
        }
        ahead.merge(fetched) { kept, _ in kept }
        return result
    }

    private func check(_ hash: Hash, _ bytes: [UInt8]) throws {
        guard Hash.of(bytes) == hash else {
            throw ArborError(.corruptObject, "object \(hash) does not match its hash", backend: backend.engineName, operation: "get")
        }
    }
}

extension Store {
    /// The versions `ids`, in order, read through `reader`.
    func versions(_ ids: [Hash], reader: inout HistoryReader) async throws -> [Version] {
        let objects = try await reader.objects(ids)
        return try ids.map { try decodeVersion($0, objects[$0] ?? []) }
    }

    func decodeVersion(_ id: Hash, _ bytes: [UInt8]) throws -> Version {
        do { return Version(id: id, content: try Version.Content.decode(bytes)) } catch let error as ArborError {
            throw ArborError(.corruptObject, "version \(id) cannot be decoded: \(error.message)", backend: backend.engineName, operation: "read")
        }
    }
}
