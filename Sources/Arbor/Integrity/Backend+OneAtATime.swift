extension Backend {
    /// `hashes` read in one request, or, where the adapter refuses the whole request for a
    /// damaged object (the JSON files, a broken delta chain), one at a time: what it reads of
    /// them, and each it refused, with its reason. Any other failure is thrown.
    ///
    /// - Complexity: one request, or one more per hash where the request is refused.
    func getTellingRefusals(_ hashes: [Hash]) async throws -> (objects: [Hash: [UInt8]], refused: [Hash: String]) {
        try await getTellingRefusals(hashes) { try await get($0) }
    }

    /// ``getTellingRefusals(_:)`` with the one request made by `read`.
    func getTellingRefusals(
        _ hashes: [Hash], through read: ([Hash]) async throws -> [Hash: [UInt8]]
    ) async throws -> (objects: [Hash: [UInt8]], refused: [Hash: String]) {
        do {
            return (try await read(hashes), [:])
        } catch let error as ArborError where error.code == .corruptObject {
            return try await getOneAtATime(hashes)
        }
    }

    /// `hashes` read one at a time: what an adapter that refuses a whole batch for one damaged
    /// object (the JSON files, a broken delta chain) reads of them, and each it refused, with
    /// its reason. Any other failure is thrown.
    ///
    /// - Complexity: one request per hash.
    func getOneAtATime(_ hashes: [Hash]) async throws -> (objects: [Hash: [UInt8]], refused: [Hash: String]) {
        var objects = [Hash: [UInt8]](minimumCapacity: hashes.count)
        var refused = [Hash: String]()
        for hash in hashes {
            do {
                if let bytes = try await get([hash])[hash] { objects[hash] = bytes }
            } catch let error as ArborError where error.code == .corruptObject {
                refused[hash] = error.message
            }
        }
        return (objects, refused)
    }
}
