import Arbor
import Foundation
import Synchronization

/// A complete, small adapter: every object in a dictionary, kept on disk as an append-only log,
/// and the refs in a small text file.
///
/// ```
/// PATH/objects.log   records appended one batch at a time:
///                    a kind byte (0 put, 1 delete), the 32-byte hash, a big-endian UInt64
///                    length and the bytes (a delete has length 0 and no bytes)
/// PATH/refs          one line per ref: "<name> <hash hex>", replaced whole on every swap
/// ```
///
/// Opening replays the log; a record cut short by a crash is ignored. Refs are swapped under a
/// lock of this process only, so two processes must not share a store: the adapter declares no
/// `.multiProcess`. For durability against power loss it would also `fsync` after each write.
final class ExampleFileBackend: Backend {
    private struct State {
        var objects: [Hash: [UInt8]] = [:]
        var refs: [String: Hash] = [:]
        var log: FileHandle?  // nil once closed
    }

    let engineName = "example-file"
    private let folder: URL
    private let state: Mutex<State>

    private init(folder: URL, state: State) {
        self.folder = folder
        self.state = Mutex(state)
    }

    /// Creates an empty store in a new folder.
    static func create(at folder: URL) throws -> ExampleFileBackend {
        try mapErrors("create") {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try Data().write(to: folder.appendingPathComponent("objects.log"))
            try Data().write(to: folder.appendingPathComponent("refs"))
        }
        return try open(at: folder)
    }

    /// Opens a store made by ``create(at:)``.
    static func open(at folder: URL) throws -> ExampleFileBackend {
        let logURL = folder.appendingPathComponent("objects.log")
        guard FileManager.default.fileExists(atPath: logURL.path) else {
            throw ArborError(.notFound, "no store at \(folder.path)", backend: "example-file", operation: "open")
        }
        return try mapErrors("open") {
            var state = State()
            let log = [UInt8](try Data(contentsOf: logURL))
            var offset = 0
            while offset + 41 <= log.count {
                guard let hash = Hash(bytes: log[(offset + 1)..<(offset + 33)]) else { break }
                let length = log[(offset + 33)..<(offset + 41)].reduce(0) { $0 << 8 | Int($1) }
                guard length >= 0, length <= log.count - offset - 41 else { break }  // cut short by a crash
                state.objects[hash] = log[offset] == 0 ? Array(log[(offset + 41)..<(offset + 41 + length)]) : nil
                offset += 41 + length
            }
            for line in try String(contentsOf: folder.appendingPathComponent("refs"), encoding: .utf8).split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 2, let hash = Hash(hex: parts[1]) else {
                    throw ArborError(.corruptObject, "the refs file has a malformed line", backend: "example-file", operation: "open")
                }
                state.refs[String(parts[0])] = hash
            }
            state.log = try FileHandle(forWritingTo: logURL)
            try state.log?.truncate(atOffset: UInt64(offset))
            return ExampleFileBackend(folder: folder, state: state)
        }
    }

    /// Runs `body` on the state of an open store, reporting file system failures as ``ArborError``.
    private func withOpenState<Value>(_ operation: String, _ body: (inout State, FileHandle) throws -> Value) throws -> Value {
        do {
            return try state.withLock { state in
                guard let log = state.log else { throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation) }
                return try body(&state, log)
            }
        } catch {
            throw Self.mapped(error, operation)
        }
    }

    private static func record(_ kind: UInt8, _ hash: Hash, _ bytes: [UInt8]) -> [UInt8] {
        [kind] + hash.bytes + (0..<8).reversed().map { UInt8(truncatingIfNeeded: UInt64(bytes.count) >> ($0 * 8)) } + bytes
    }

    // MARK: Objects

    func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try withOpenState("get") { state, _ in
            var found = [Hash: [UInt8]]()
            for hash in hashes { found[hash] = state.objects[hash] }
            return found
        }
    }

    func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try withOpenState("contains") { state, _ in Set(hashes.filter { state.objects[$0] != nil }) }
    }

    func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try withOpenState("put") { state, log in
            var records = [UInt8]()
            var added = [Hash: [UInt8]]()
            for (hash, bytes) in objects where state.objects[hash] == nil && added[hash] == nil {
                records += Self.record(0, hash, bytes)
                added[hash] = bytes
            }
            // The objects count as stored only once their records are written: after a failed
            // write (a full disk) they are not, and a retried put writes them again.
            try Self.append(records, to: log)
            state.objects.merge(added) { old, _ in old }
        }
    }

    /// Appends `records` to the log, or, when the write fails, cuts off what part of them made
    /// it, so that a later append does not follow a torn record (replay stops at the first).
    private static func append(_ records: [UInt8], to log: FileHandle) throws {
        guard !records.isEmpty else { return }
        let end = try log.seekToEnd()
        do {
            try log.write(contentsOf: records)
        } catch {
            try? log.truncate(atOffset: end)
            throw error
        }
    }

    func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        let hashes = try withOpenState("enumerate") { state, _ in Array(state.objects.keys) }
        for start in stride(from: 0, to: hashes.count, by: max(batchSize, 1)) {
            try await body(Array(hashes[start..<min(start + max(batchSize, 1), hashes.count)]))
        }
    }

    func delete(_ hashes: [Hash]) async throws {
        try withOpenState("delete") { state, log in
            // In the order given: a log cut short by a crash keeps a prefix of the deletes,
            // and what names an object (given before it) goes before it.
            var seen = Set<Hash>()
            let present = hashes.filter { state.objects[$0] != nil && seen.insert($0).inserted }
            try Self.append(present.flatMap { Self.record(1, $0, []) }, to: log)
            for hash in present { state.objects[hash] = nil }
        }
    }

    // MARK: Refs

    func refs() async throws -> [String: Hash] {
        try withOpenState("refs") { state, _ in state.refs }
    }

    func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try RefName.validate(name, backend: engineName)
        return try withOpenState("compareAndSwap") { state, _ in
            guard state.refs[name] == expected else { return false }
            var refs = state.refs
            refs[name] = new
            let text = refs.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.hex)\n" }.joined()
            try Data(text.utf8).write(to: folder.appendingPathComponent("refs"), options: .atomic)  // whole or not at all
            state.refs = refs
            return true
        }
    }

    func close() async throws {
        let log = state.withLock { state in
            defer { state.log = nil }
            return state.log
        }
        try Self.mapErrors("close") { try log?.close() }
    }

    /// Runs `body`, reporting a failure of the file system as an ``ArborError``.
    private static func mapErrors<Value>(_ operation: String, _ body: () throws -> Value) throws -> Value {
        do { return try body() } catch { throw mapped(error, operation) }
    }

    /// `error` as an ``ArborError``: itself if it is one, else an I/O failure of `operation`.
    private static func mapped(_ error: any Error, _ operation: String) -> ArborError {
        error as? ArborError ?? ArborError(.io, "a file operation failed", backend: "example-file", operation: operation, underlying: error)
    }
}
