import Arbor
import Dispatch
import Synchronization

/// A store in a folder a person can read: every object a pretty-printed JSON file, every ref a
/// small JSON file.
///
/// ```
/// PATH/arbor-store.json          {"format": "arbor-json-store", "version": 1}
/// PATH/objects/3f/3fa9…e1.json   one object, rendered by ObjectJSON (sharded by the first byte)
/// PATH/refs/heads.json           {"hash": "…"}
/// PATH/refs.lock                 serialises ref updates across processes (flock)
/// PATH/tmp/                      files being written, renamed into place when complete
/// ```
///
/// Files are only ever created whole (write to `tmp/`, flush, rename), so a folder copied or
/// synced by a file-sync tool opens as a consistent store. Every file read is checked: a
/// truncated or edited file is reported as corrupt, naming the file.
public final class JSONBackend: Backend {
    /// Where the store lives and how hard it tries to survive power loss.
    public struct Configuration: Sendable {
        public var path: String
        /// Flush every file and folder change to disk before reporting it written (default).
        /// Turning it off is faster and still safe against a crash of the process, not of the machine.
        public var synchronous: Bool
        /// How long a ref swap waits for another process's lock on the refs before it fails
        /// with ``ArborError/Code/io``, changing nothing.
        public var lockTimeout: Duration

        public init(path: String, synchronous: Bool = true, lockTimeout: Duration = .seconds(30)) {
            self.path = path
            self.synchronous = synchronous
            self.lockTimeout = lockTimeout
        }
    }

    static let markerName = "arbor-store.json"
    static let formatName = "arbor-json-store"
    static let formatVersion = 1

    public let engineName = "json"
    public let configuration: Configuration
    private let root: String
    /// The lock file, behind a mutex so tasks of this process take turns; the flock inside
    /// makes other processes wait too. `FileSystem.Lock` is only touched under the mutex.
    /// `nil` for a store on a read-only file system, where the lock file cannot be opened for
    /// writing and nothing can change, and once the store is closed.
    private let refLock: Mutex<FileSystem.Lock?>
    private let isClosed = Atomic<Bool>(false)
    /// Where writes run: a put syncs files and folders, a swap may wait for another process's
    /// lock without limit, and neither may hold a thread of Swift's cooperative pool meanwhile
    /// (on two cores, two such waits would stall every task of the process).
    private let blockingQueue = DispatchQueue(label: "arbor.json.blocking", attributes: .concurrent)
    /// Where swaps and the close run, one at a time: swaps take turns on ``refLock`` anyway, and
    /// on the concurrent queue each one waiting for another process's lock held a thread of
    /// its own, without bound. The close waits here for the swaps before it.
    private let swapQueue = DispatchQueue(label: "arbor.json.swap")
    /// Whether the store was opened on a read-only file system (a snapshot, a backup mounted
    /// read-only): it can be read, and every write throws ``ArborError/Code/permissionDenied``.
    public let isReadOnly: Bool

    private init(configuration: Configuration) throws {
        self.configuration = configuration
        var path = configuration.path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        root = path
        isReadOnly = FileSystem.isOnReadOnlyFileSystem(path)
        refLock = Mutex(isReadOnly ? nil : try FileSystem.Lock(path: path + "/refs.lock"))
        if !isReadOnly { Self.removeStaleTemporaryFiles(in: path + "/tmp") }
    }

    /// Removes temporary files a process killed mid-write left (a write removes its own when it
    /// fails), which would pile up without bound: those not touched for an hour, as another
    /// process may be writing the others now. Best effort: a file that cannot go stays.
    private static func removeStaleTemporaryFiles(in folder: String) {
        for name in (try? FileSystem.list(folder)) ?? [] where name.hasSuffix(".tmp") || name == markerName {
            let path = folder + "/" + name
            if let age = FileSystem.age(path), age > 3_600 { try? FileSystem.remove(path) }
        }
    }

    /// Creates a new, empty store. Throws ``ArborError/Code/alreadyExists`` if the folder holds a
    /// store (or anything else); its parent folder must exist.
    public static func create(_ configuration: Configuration) throws -> JSONBackend {
        let path = configuration.path
        if FileSystem.exists(path) {
            if FileSystem.exists(path + "/" + markerName) {
                throw ArborError(.alreadyExists, "a store already exists at \(path)", backend: "json", operation: "create")
            }
            guard FileSystem.isDirectory(path), try isEmptyOrUnfinished(path) else {
                throw ArborError(.alreadyExists, "\(path) exists and is not an empty folder", backend: "json", operation: "create")
            }
            try makeLayout(in: path, madeFolder: false, configuration)
        } else {
            try FileSystem.makeDirectory(path)
            try makeLayout(in: path, madeFolder: true, configuration)
        }
        return try JSONBackend(configuration: configuration)
    }

    /// Whether the folder `path` is empty, or holds only what a create killed before it wrote
    /// the marker leaves (empty `objects`, `refs` and `tmp` folders, and in `tmp` the marker's
    /// temporary file): a rerun of `init` finishes such a store instead of refusing the folder.
    private static func isEmptyOrUnfinished(_ path: String) throws -> Bool {
        // A Finder window leaves .DS_Store in a folder it showed.
        for name in try FileSystem.list(path) where name != ".DS_Store" {
            guard ["objects", "refs", "tmp"].contains(name), FileSystem.isDirectory(path + "/" + name) else { return false }
            let contents = try FileSystem.list(path + "/" + name)
            guard contents.isEmpty || (name == "tmp" && contents.allSatisfy(isMarkersTemporaryFile)) else { return false }
        }
        return true
    }

    /// Whether `name`, in `tmp`, is a temporary file of the marker (`arbor-store.json.N.tmp`,
    /// or `arbor-store.json` as earlier versions named it).
    private static func isMarkersTemporaryFile(_ name: String) -> Bool {
        name == markerName || (name.hasPrefix(markerName + ".") && name.hasSuffix(".tmp"))
    }

    /// Makes the store's folders and, last, its marker in the empty folder `path`. On failure
    /// (a full disk, say) it removes what it made, so that running `init` again works: a
    /// folder that is not yet a store would otherwise refuse to become one.
    private static func makeLayout(in path: String, madeFolder: Bool, _ configuration: Configuration) throws {
        let folders = ["objects", "refs", "tmp"].map { path + "/" + $0 }
        do {
            for folder in folders { try FileSystem.makeDirectory(folder) }
            let marker = JSONValue.object([("format", .string(formatName)), ("version", .number(String(formatVersion)))])
            // The marker goes last: a folder without it is not yet a store.
            // Through a temporary file of its own: two creators racing must not write one file.
            let temporary = path + "/tmp/" + markerName + ".\(UInt64.random(in: 0...UInt64.max)).tmp"
            try FileSystem.writeAtomically(marker.serializedBytes(pretty: true), to: path + "/" + markerName, via: temporary, sync: configuration.synchronous)
            if configuration.synchronous { try FileSystem.syncDirectory(path) }
        } catch {
            // A racing creator whose marker landed owns the folders now. Otherwise only empty
            // folders go (rmdir), so nothing anyone else wrote there is lost.
            if !FileSystem.exists(path + "/" + markerName) {
                for folder in folders { FileSystem.removeEmptyDirectory(folder) }
                if madeFolder { FileSystem.removeEmptyDirectory(path) }
            }
            throw error
        }
    }

    /// Opens an existing store. Throws ``ArborError/Code/notFound`` if there is none and
    /// ``ArborError/Code/unsupportedFormat`` if the folder holds something else.
    public static func open(_ configuration: Configuration) throws -> JSONBackend {
        let path = configuration.path
        guard FileSystem.isDirectory(path) else {
            if FileSystem.exists(path) {
                throw ArborError(.unsupportedFormat, "\(path) is not a folder, so not an Arbor JSON store", backend: "json", operation: "open")
            }
            throw ArborError(.notFound, "no store at \(path): the folder does not exist", backend: "json", operation: "open")
        }
        let markerPath = path + "/" + markerName
        // Read, not tested for: a marker this user may not read is not a missing one.
        let markerBytes: [UInt8]
        do { markerBytes = try FileSystem.read(markerPath) } catch let error as ArborError {
            switch error.code {
            case .notFound:
                // An empty folder, or one a create left unfinished, holds no store yet (create
                // finishes it); a folder of other things is not an Arbor store.
                if (try? isEmptyOrUnfinished(path)) == false {
                    let names = ((try? FileSystem.list(path)) ?? []).sorted()
                    if Set(["objects", "refs"]).isSubset(of: names) {
                        throw ArborError(.corruptObject, "\(path) has the folders of an Arbor JSON store but no \(markerName): restore it, or the store, from a backup or a replica", backend: "json", operation: "open")
                    }
                    let shown = names.prefix(5).joined(separator: ", ") + (names.count > 5 ? ", …" : "")
                    throw ArborError(.unsupportedFormat, "\(path) is not an Arbor JSON store: it holds other files (\(shown)) and no \(markerName)", backend: "json", operation: "open")
                }
                throw ArborError(.notFound, "no store at \(path): \(markerName) is missing", backend: "json", operation: "open")
            case .permissionDenied: throw ArborError(.permissionDenied, "cannot read the store at \(path): \(error.message) (does it belong to another user?)", backend: "json", operation: "open")
            default: throw error
            }
        }
        let marker: JSONValue
        do { marker = try JSONValue.parse(markerBytes) } catch let error as ArborError {
            throw ArborError(.unsupportedFormat, "\(markerPath) is not an Arbor store marker", backend: "json", operation: "open", underlying: error)
        }
        guard marker["format"]?.stringValue == formatName else {
            throw ArborError(.unsupportedFormat, "\(markerPath) does not describe an Arbor JSON store", backend: "json", operation: "open")
        }
        guard marker["version"] == .number(String(formatVersion)) else {
            throw ArborError(.unsupportedFormat, "\(path) has store format version \(marker["version"]?.serialized() ?? "?"); this Arbor reads version \(formatVersion)", backend: "json", operation: "open")
        }
        for folder in ["objects", "refs", "tmp"] where !FileSystem.isDirectory(path + "/" + folder) {
            throw ArborError(.corruptObject, "\(path)/\(folder) is missing", backend: "json", operation: "open")
        }
        return try JSONBackend(configuration: configuration)
    }

    private func checkOpen(_ operation: String) throws {
        if isClosed.load(ordering: .acquiring) {
            throw ArborError(.closed, "the store is closed", backend: engineName, operation: operation)
        }
    }

    /// ``checkOpen(_:)``, and for a write to a store on a read-only file system,
    /// ``ArborError/Code/permissionDenied``.
    private func checkWritable(_ operation: String) throws {
        try checkOpen(operation)
        if isReadOnly {
            throw ArborError(.permissionDenied, "\(root) is on a read-only file system: the store can be read, not changed", backend: engineName, operation: operation)
        }
    }

    private func objectPath(_ hash: Hash) -> String {
        let hex = hash.hex
        return "\(root)/objects/\(hex.prefix(2))/\(hex).json"
    }

    private func refPath(_ name: String) -> String {
        "\(root)/refs/\(Self.refFileName(name)).json"
    }

    /// A ref's file name, without `.json`: ref names are validated ASCII paths; '/' becomes '~'
    /// and an uppercase letter '^' and the letter in lowercase ('^' and '~' are in no ref name),
    /// so that refs whose names differ only in case keep two files on a file system that
    /// ignores case (macOS's, by default), where `Main` and `main` were one file.
    ///
    /// A name whose file name would pass 250 bytes that way (a long name of many capitals) keeps
    /// the earlier form, its letters as they are: file names stop at 255 bytes.
    static func refFileName(_ name: String) -> String {
        var file = ""
        for character in name.unicodeScalars {
            switch character {
            case "/": file += "~"
            case "A"..."Z": file += "^" + String(character).lowercased()
            default: file.unicodeScalars.append(character)
            }
        }
        return file.utf8.count <= 250 ? file : name.replacingOccurrences(of: "/", with: "~")
    }

    /// The ref a file name names: the inverse of ``refFileName(_:)``; a name with uppercase
    /// letters and no '^' is one an earlier version wrote (see ``legacyRefPath(_:)``). `nil`
    /// for a name no ref file has.
    static func refName(fromFile file: some StringProtocol) -> String? {
        var name = ""
        var raise = false
        for character in file.unicodeScalars {
            switch character {
            case "~" where !raise: name += "/"
            case "^" where !raise: raise = true
            case "a"..."z" where raise: name += String(character).uppercased(); raise = false
            default:
                guard !raise else { return nil }
                name.unicodeScalars.append(character)
            }
        }
        return raise ? nil : name
    }

    /// Where an earlier version kept a ref with uppercase letters in its name (the name as it is,
    /// '/' as '~'), if a file of exactly that name is there; `nil` otherwise, and for a name whose
    /// file name is the same in both. By the folder's listing, not by opening the path: where
    /// the file system ignores case, `HEADS.json` would open `heads.json`, another ref's file.
    private func legacyRefPath(_ name: String) throws -> String? {
        let legacy = name.replacingOccurrences(of: "/", with: "~") + ".json"
        guard legacy != Self.refFileName(name) + ".json",
              try FileSystem.list(root + "/refs").contains(where: { $0.utf8.elementsEqual(legacy.utf8) }) else { return nil }
        return "\(root)/refs/\(legacy)"
    }

    private func temporaryPath() -> String {
        "\(root)/tmp/\(UInt64.random(in: 0...UInt64.max)).tmp"
    }

    // MARK: Objects

    private func readObject(_ hash: Hash) throws -> [UInt8]? {
        let path = objectPath(hash)
        let raw: [UInt8]
        do { raw = try FileSystem.read(path) } catch let error as ArborError where error.code == .notFound { return nil }
        let bytes: [UInt8]
        do { bytes = try ObjectJSON.canonicalBytes(try JSONValue.parse(raw)) } catch let error as ArborError {
            throw ArborError(.corruptObject, "object file \(path) is corrupt or truncated: \(error.message)", backend: engineName, operation: "get")
        }
        guard Hash.of(bytes) == hash else {
            throw ArborError(.corruptObject, "object file \(path) does not match its hash", backend: engineName, operation: "get")
        }
        return bytes
    }

    public func get(_ hashes: [Hash]) async throws -> [Hash: [UInt8]] {
        try checkOpen("get")
        var result = [Hash: [UInt8]](minimumCapacity: hashes.count)
        for hash in hashes where result[hash] == nil {
            if let bytes = try readObject(hash) { result[hash] = bytes }
        }
        return result
    }

    public func contains(_ hashes: [Hash]) async throws -> Set<Hash> {
        try checkOpen("contains")
        return Set(hashes.filter { FileSystem.exists(objectPath($0)) })
    }

    /// Runs `body` on `queue` (``blockingQueue`` by default) and waits for it without holding a
    /// pool thread.
    private func offPool<R: Sendable>(on queue: DispatchQueue? = nil, _ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            (queue ?? blockingQueue).async { continuation.resume(with: Result { try body() }) }
        }
    }

    public func put(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkWritable("put")
        try await offPool { try self.write(objects) }
    }

    /// Writes each object's file anew, whatever the file holds: each is renamed over the old
    /// one, so a reader sees the old file or the new one, never a part of either.
    public func replace(_ objects: [(hash: Hash, bytes: [UInt8])]) async throws {
        try checkWritable("replace")
        try await offPool { try self.write(objects, replacing: true) }
    }

    private func write(_ objects: [(hash: Hash, bytes: [UInt8])], replacing: Bool = false) throws {
        var touchedShards = Set<String>()
        for (hash, bytes) in objects {
            let path = objectPath(hash)
            let shard = "\(root)/objects/\(hash.hex.prefix(2))"
            if !replacing, FileSystem.exists(path) {
                // Another writer may have renamed it into place and not yet synced its folder:
                // a caller that moves a ref next must find the object there after a power loss.
                if configuration.synchronous { touchedShards.insert(shard) }
                continue
            }
            if !touchedShards.contains(shard) { try FileSystem.makeDirectory(shard) }
            let text = ObjectJSON.render(bytes).serializedBytes(pretty: true)
            try FileSystem.writeAtomically(text, to: path, via: temporaryPath(), sync: configuration.synchronous)
            touchedShards.insert(shard)
        }
        if configuration.synchronous {
            for shard in touchedShards { try FileSystem.syncDirectory(shard) }
            if !touchedShards.isEmpty { try FileSystem.syncDirectory(root + "/objects") }
        }
    }

    public func enumerateHashes(batchSize: Int, _ body: ([Hash]) async throws -> Void) async throws {
        try checkOpen("enumerate")
        var batch = [Hash]()
        for shard in try FileSystem.list(root + "/objects").sorted() where shard.count == 2 {
            for name in try FileSystem.list("\(root)/objects/\(shard)") where name.hasSuffix(".json") {
                guard let hash = Hash(hex: name.dropLast(5)), hash.hex.hasPrefix(shard) else { continue }
                batch.append(hash)
                if batch.count >= max(batchSize, 1) {
                    try await body(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        if !batch.isEmpty { try await body(batch) }
    }

    public func delete(_ hashes: [Hash]) async throws {
        try checkWritable("delete")
        try await offPool { for hash in hashes { try FileSystem.remove(self.objectPath(hash)) } }
    }

    // MARK: Refs

    private func readRef(_ path: String) throws -> Hash? {
        let raw: [UInt8]
        do { raw = try FileSystem.read(path) } catch let error as ArborError where error.code == .notFound { return nil }
        guard let text = (try? JSONValue.parse(raw))?["hash"]?.stringValue, let hash = Hash(hex: text) else {
            throw ArborError(.corruptObject, "ref file \(path) is corrupt or truncated", backend: engineName, operation: "refs")
        }
        return hash
    }

    public func refs() async throws -> [String: Hash] {
        try checkOpen("refs")
        var result = [String: Hash]()
        // Files of this version's names after those of earlier ones: where a swap stopped
        // between writing a ref's new file and removing its old one, the new one holds it.
        let files = try FileSystem.list(root + "/refs").filter { $0.hasSuffix(".json") }.sorted { !$0.contains("^") && $1.contains("^") }
        for file in files {
            // Not every file there is a ref: a copy a file manager made ("heads copy.json"),
            // or, on a volume without extended attributes, macOS's AppleDouble "._heads.json".
            guard let name = Self.refName(fromFile: file.dropLast(5)), (try? RefName.validate(name, backend: engineName)) != nil else { continue }
            do {
                if let hash = try readRef("\(root)/refs/\(file)") { result[name] = hash }
            } catch let error as ArborError where name.hasPrefix("._") && error.code == .corruptObject {
                continue
            }
        }
        return result
    }

    public func compareAndSwap(ref name: String, expected: Hash?, new: Hash?) async throws -> Bool {
        try checkWritable("compareAndSwap")
        try RefName.validate(name, backend: engineName)
        return try await offPool(on: swapQueue) { try self.swap(name, expected: expected, new: new) }
    }

    private func swap(_ name: String, expected: Hash?, new: Hash?) throws -> Bool {
        let path = refPath(name)
        return try refLock.withLock { lock in
            // nil: closed meanwhile (a read-only store threw in checkWritable already).
            guard let lock else { throw ArborError(.closed, "the store is closed", backend: engineName, operation: "compareAndSwap") }
            return try lock.withLock(timeout: configuration.lockTimeout) {
                // A ref an earlier version wrote under its old file name moves to its new one.
                let legacy = try legacyRefPath(name)
                let current = try readRef(path) ?? legacy.flatMap { try readRef($0) }
                guard current == expected else { return false }
                if let new {
                    let document = JSONValue.object([("hash", .string(new.hex))]).serializedBytes(pretty: true)
                    try FileSystem.writeAtomically(document, to: path, via: temporaryPath(), sync: configuration.synchronous)
                    if let legacy { try FileSystem.remove(legacy) }
                } else {
                    // The old file first: left alone, it would be read once the new one is gone,
                    // bringing back a value older than the one deleted.
                    if let legacy { try FileSystem.remove(legacy) }
                    try FileSystem.remove(path)
                }
                if configuration.synchronous { try FileSystem.syncDirectory(root + "/refs") }
                return true
            }
        }
    }

    /// Closes the store, and the lock file with it: a file held open for writing would keep
    /// its file system from being unmounted, or mounted again read-only.
    public func close() async throws {
        isClosed.store(true, ordering: .releasing)
        // Behind the swaps in flight, one of which may wait for another process's lock.
        try await offPool(on: swapQueue) { self.refLock.withLock { $0 = nil } }
    }
}
