import ArborJSON
import ArborLMDB
import ArborPostgres
import ArborSQLite
import Foundation
import Testing
@testable import Arbor

/// Hostile names and values against every adapter: nothing a caller passes as an id, a type, a
/// property or a ref name may leave the store's folder, change the SQL a statement runs, or come
/// back different; the files and folders a store creates are its owner's alone; and no error or
/// description of a PostgreSQL configuration shows a password.
@Suite struct HardeningTests {
    // MARK: Hostile strings

    /// Strings that break quoting, paths and encodings: SQL, quotes, NUL, LIKE wildcards,
    /// backslashes, path traversal, percent escapes, combining marks alone and composed, emoji,
    /// byte-order marks, the last code point, and look-alikes of `.` and `/`.
    static func hostileStrings(_ token: String) -> [String] {
        [
            "'", "\"", "`", ";", "'; DROP TABLE arbor_objects; --", "\"; DROP TABLE objects; --", "' OR '1'='1", "$1", "?", ":name", "@p",
            "\u{0}", "a\u{0}b", "\u{0}'; DROP TABLE arbor_refs; --", "%", "_", "%_%", "\\", "\\0", "\\x00", "E'\\\\'", "NULL", "null",
            "../\(token)", "a/../../\(token)", "/tmp/\(token)", "../../../../../../../../tmp/\(token)", "..", ".", "/", "~/\(token)",
            "%2e%2e/\(token)", "..%2f\(token)", "..\\..\\\(token)", "C:\\\(token)", "\u{FF0E}\u{FF0E}\u{FF0F}\(token)", "\u{2024}\u{2024}\u{2215}\(token)",
            "\u{301}", "e\u{301}", "\u{e9}", "\u{FEFF}", "\u{200B}", "\u{10FFFF}", "🌳", "👩‍👩‍👧", "\r\n\t", "\u{7F}", "\u{1B}[31m",
            String(repeating: "x'", count: 2_048), String(repeating: "é", count: 2_048),
        ]
    }

    /// Ref names of only the allowed characters that still look like trouble.
    static let oddValidRefNames = ["a.b-c_d/e", "..a", "a..b", "...", ".hidden", "x/.y", "-", "_", "-rf", "heads.json", "refs", String(repeating: "a", count: 200)]

    static func hostileRefNames(_ token: String) -> [String] {
        ["", "/", "a//b", "a/", "/a", "..", ".", "a/./b", "a/../b", "../\(token)", "a/../../\(token)", "/etc/passwd", "/tmp/\(token)", "x\u{0}y", "\u{0}",
         "%2e%2e/\(token)", "..\\\(token)", "a\\b", "~", "a~b", "x'; DROP TABLE arbor_refs; --", "a b", "é", "\u{FF0E}\u{FF0E}", "a\nb",
         String(repeating: "a", count: 201), String(repeating: "a/", count: 5_000), String(repeating: "x", count: 10_000)]
    }

    // MARK: SQL, encodings, sizes: every adapter

    @Test(arguments: AdapterKind.allCases) func hostileIdsValuesAndNamesRoundTrip(kind: AdapterKind) async throws {
        let (backend, cleanup) = try makeBackend(kind)
        defer { cleanup() }
        let token = "arbor-escape-" + UUID().uuidString.prefix(8)
        let hostile = Self.hostileStrings(token)
        let store = Store(backend: backend, configuration: .init(replica: "r'; DROP TABLE arbor_refs; --\u{0}", clock: TickClock().read))
        let canary = Record(type: "Canary", id: "c", properties: ["kept": .string("untouched")])
        try await store.change(on: nil) { try $0.save(canary) }

        // Hostile ids, type names, property names and values, and a 1 MB string and byte string.
        var records = [Record]()
        for (index, text) in hostile.enumerated() {
            records.append(Record(type: "Item", id: text, properties: [
                "value": .string(text), text: .int(Int64(index)), "bytes": .bytes(Array(text.utf8) + [0, 0x27]),
                "link": .reference(RecordKey(type: text.isEmpty ? "T" : text, id: text)), "nested": .map([text: .array([.string(text)])]),
            ]))
            let type = text.replacingOccurrences(of: "\u{0}", with: "")
            if !type.isEmpty && type.utf8.count <= 255 { records.append(Record(type: type, id: "typed", properties: ["type": .string(type)])) }
        }
        let megabyte = String(repeating: "'; DROP TABLE arbor_objects; --\u{0}\\\"%_", count: (1 << 20) / 36)
        records.append(Record(type: "Item", id: "megabyte", properties: ["text": .string(megabyte), "data": .bytes(Array(megabyte.utf8))]))
        var changes = ChangeSet()
        for record in records { try changes.save(record) }
        let message = "'; DELETE FROM arbor_refs; --\u{0}" + megabyte
        let version = try await store.commit(changes, message: message)

        // Ids too long to store are refused, not truncated.
        var refused = 0
        for id in [String(repeating: "x", count: 4_097), String(repeating: "é", count: 10_000)] {
            var tooLong = ChangeSet()
            #expect(throws: ArborError.self) { try tooLong.save(Record(type: "Item", id: id, properties: [:])) }
            refused += 1
        }

        // Read back through a store without a cache: every byte as it was written.
        let reader = Store(backend: backend, configuration: .init(nodeCacheCapacity: 0))
        let expected = Dictionary(records.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
        let read = try await reader.records(Array(expected.keys))
        #expect(read.count == expected.count)
        for (key, record) in expected {
            #expect(read[key] == record, "\(kind): \(String(reflecting: String(key.id.prefix(40)))) came back different")
            #expect(read[key]?.key.id.utf8.elementsEqual(key.id.utf8) == true)
        }
        #expect(try await Set(reader.records(ofType: "Item")) == Set(records.filter { $0.key.type == "Item" }))
        let head = try #require(try await reader.head())
        #expect(head.id == version.id && head.message == message && head.replica == store.configuration.replica)

        // Ref names: odd valid ones are kept as they are; hostile ones are refused.
        for name in Self.oddValidRefNames {
            #expect(try await backend.compareAndSwap(ref: name, expected: nil, new: version.id), "\(name)")
        }
        for name in Self.hostileRefNames(token) {
            await #expect("\(String(reflecting: String(name.prefix(40))))") {
                try await backend.compareAndSwap(ref: name, expected: nil, new: version.id)
            } throws: { ($0 as? ArborError)?.code == .invalidInput }
        }
        let refs = try await backend.refs()
        #expect(Set(refs.keys) == Set(Self.oddValidRefNames + [RefName.heads]))

        // Nothing else was touched: the first commit's record, the tables, every object.
        #expect(try await reader.record(canary.key) == canary)
        #expect(try await reader.log().count == 2)
        let hashes = try await backend.allHashes()
        #expect(try await backend.get(Array(hashes)).count == hashes.count)
        let inputs = records.count + refused + Self.oddValidRefNames.count + Self.hostileRefNames(token).count + 2
        print("hostile inputs (\(kind)): \(records.count) records with hostile ids, types, names and values (\(hostile.count) strings, one of 1 MB), \(refused) over-long ids refused, \(Self.oddValidRefNames.count) odd ref names kept, \(Self.hostileRefNames(token).count) hostile ref names refused, hostile replica and message: \(inputs) in all, every record read back byte-identical")
        try await store.close()
    }

    // MARK: Paths: the JSON adapter

    /// Every path below `folder`, relative to it, with each file's content when `contents`.
    static func tree(_ folder: String, contents: Bool = true) -> [String: Data] {
        var result = [String: Data]()
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return result }
        for case let path as String in walker {
            result[path] = contents ? FileManager.default.contents(atPath: folder + "/" + path) ?? Data() : Data()
        }
        return result
    }

    @Test func hostileIdsAndRefNamesStayInsideTheJSONStoreFolder() async throws {
        let parent = temporaryPath("escape")
        let token = "arbor-escape-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: parent + "/neighbour/refs", withIntermediateDirectories: true)
        defer { removeItem(parent) }
        try Data("neighbour".utf8).write(to: URL(fileURLWithPath: parent + "/neighbour/refs/heads.json"))
        let before = Self.tree(parent)
        let path = parent + "/store"
        let backend = try JSONBackend.create(.init(path: path, synchronous: false))
        let store = Store(backend: backend)

        var changes = ChangeSet()
        var records = [Record]()
        for text in Self.hostileStrings(token) {
            records.append(Record(type: "Item", id: text, properties: ["path": .string(text)]))
            let type = text.replacingOccurrences(of: "\u{0}", with: "")
            if !type.isEmpty && type.utf8.count <= 255 { records.append(Record(type: type, id: text, properties: [:])) }
        }
        for record in records { try changes.save(record) }
        let version = try await store.commit(changes)
        for name in Self.oddValidRefNames { _ = try await backend.compareAndSwap(ref: name, expected: nil, new: version.id) }
        for name in Self.hostileRefNames(token) {
            await #expect { try await backend.compareAndSwap(ref: name, expected: nil, new: version.id) } throws: { ($0 as? ArborError)?.code == .invalidInput }
        }

        // Everything the store made is inside its folder; nothing beside it changed.
        let after = Self.tree(parent)
        for (relative, content) in before { #expect(after[relative] == content, "\(relative) changed") }
        let added = Set(after.keys).subtracting(before.keys)
        #expect(added.allSatisfy { $0 == "store" || $0.hasPrefix("store/") }, "\(added.filter { !$0.hasPrefix("store") })")
        // Only hashes and validated ref names become file names.
        for relative in added where relative.hasPrefix("store/objects/") && relative.hasSuffix(".json") {
            #expect(Hash(hex: relative.split(separator: "/").last!.dropLast(5)) != nil, "\(relative)")
        }
        let refFiles = try FileManager.default.contentsOfDirectory(atPath: path + "/refs")
        #expect(Set(refFiles) == Set((Self.oddValidRefNames + ["heads"]).map { $0.replacingOccurrences(of: "/", with: "~") + ".json" }))
        // And nowhere else a path could lead: the temporary folder, /tmp, the working directory.
        for folder in [FileManager.default.temporaryDirectory.path, "/tmp", FileManager.default.currentDirectoryPath, "/etc"] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            #expect(!names.contains { $0.contains(token) }, "a file named after a hostile id landed in \(folder)")
        }
        // The ids come back as they went in.
        let reopened = Store(backend: try JSONBackend.open(.init(path: path)), configuration: .init(nodeCacheCapacity: 0))
        let read = try await reopened.records(records.map(\.key))
        #expect(read.count == records.count)
        #expect(records.allSatisfy { read[$0.key] == $0 })
        print("hostile inputs (json paths): \(records.count) records with hostile ids and types, \(Self.hostileRefNames(token).count) hostile ref names refused, \(Self.oddValidRefNames.count) odd ref names kept; no file outside the store folder")
    }

    // MARK: Permissions

    enum DiskEngine: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case json, sqlite, lmdb
        var testDescription: String { rawValue }
    }

    @Test(arguments: DiskEngine.allCases) func everythingAStoreCreatesIsPrivate(engine: DiskEngine) async throws {
        // The usual umask, so that a mode the code leaves to the default (0644, 0755) shows.
        let previousMask = umask(0o022)
        defer { umask(previousMask) }
        let parent = temporaryPath("permissions")
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        defer { removeItem(parent) }
        let path = parent + "/store"
        let backend: any Backend = switch engine {
        case .json: try JSONBackend.create(.init(path: path))
        case .sqlite: try SQLiteBackend.create(.init(path: path))
        case .lmdb: try LMDBBackend.create(.init(path: path))
        }
        let store = Store(backend: backend)
        for round in 0..<3 {
            var changes = ChangeSet()
            for index in 0..<40 { try changes.save(Task(id: "t\(index)", title: "round \(round)", done: false, notes: [Note(id: "n\(index)", text: String(repeating: "x", count: 2_000))])) }
            try await store.commit(changes)
        }
        _ = try await backend.compareAndSwap(ref: "branch/main", expected: nil, new: try #require(try await store.head()).id)

        // While the store is open: SQLite's -wal and -shm, LMDB's lock.mdb exist now.
        var expected: [String] = switch engine {
        case .json: ["store", "store/arbor-store.json", "store/objects", "store/refs", "store/refs/heads.json", "store/refs/branch~main.json", "store/refs.lock", "store/tmp"]
        case .sqlite: ["store", "store-wal", "store-shm"]
        case .lmdb: ["store", "store/data.mdb", "store/lock.mdb"]
        }
        let entries = Array(Self.tree(parent, contents: false).keys)
        if engine == .json { expected += entries.filter { $0.hasPrefix("store/objects/") } }
        #expect(Set(expected).isSubset(of: entries), "missing: \(Set(expected).subtracting(entries))")
        for entry in entries {
            var info = stat()
            #expect(lstat(parent + "/" + entry, &info) == 0)
            let mode = info.st_mode & 0o777
            #expect(mode & 0o077 == 0, "\(engine): \(entry) has mode \(String(mode, radix: 8)), readable or writable by others")
        }
        try await store.close()
        print("permissions (\(engine)): \(entries.count) files and folders, none readable or writable by group or others")
    }

    // MARK: Credentials

    static let secret = "Hunter2-S3cr3t"

    /// PostgreSQL URLs that carry the password in every place libpq reads one from, each
    /// pointing at a port where nothing listens, or malformed so that libpq refuses it.
    static let secretURLs = [
        "postgres://arbor:\(secret)@127.0.0.1:1/arbor",
        "postgresql://arbor:\(secret)@127.0.0.1:1/arbor?sslmode=disable",
        "postgres://arbor@127.0.0.1:1/arbor?password=\(secret)",
        "postgres://127.0.0.1:1/arbor?user=arbor&password=\(secret)&connect_timeout=2",
        "postgres://arbor:\(secret.replacingOccurrences(of: "S", with: "%53"))@127.0.0.1:1/arbor",
        "postgres://127.0.0.1:1/arbor?pass%77ord=\(secret)",
        "postgres://127.0.0.1:1/arbor?sslpassword=\(secret)",
        "postgres://arbor:\(secret)@[::1/arbor",
        "postgres://arbor:\(secret)@127.0.0.1:99999999/arbor",
        "postgres://arbor:\(secret)%zz@127.0.0.1:1/arbor",
        "postgres://arbor:\(secret)@127.0.0.1:1/arbor?bogus=\(secret)",
        "postgres://arbor:\(secret)@127.0.0.1:1/arbor?password",
        "postgres://arbor:\(secret)@127.0.0.1:1,127.0.0.1:2/arbor",
        "postgres://arbor:p@ss:\(secret)@127.0.0.1:1/arbor",
        "postgres://arbor:\u{301}\(secret)@127.0.0.1:1/arbor",
        "postgres://arbor:\(secret)@127.0.0.1:1/arbor?password=\u{301}\(secret)",
    ]

    @Test func noPostgresErrorOrDescriptionShowsThePassword() async throws {
        var tried = 0
        for url in Self.secretURLs {
            let configuration = PostgresBackend.Configuration(url: url, maximumConnections: 1, connectTimeout: 2)
            var dumped = ""
            dump(configuration, to: &dumped)
            var texts = ["\(configuration)", String(reflecting: configuration), configuration.redactedURL, dumped]
            texts += Mirror(reflecting: configuration).children.map { "\($0.value)" }
            do {
                _ = try await PostgresBackend.open(configuration)
                Issue.record("\(configuration.redactedURL) opened")
            } catch {
                var dumpedError = ""
                dump(error, to: &dumpedError)
                texts += ["\(error)", String(reflecting: error), error.localizedDescription, dumpedError]
                if let error = error as? ArborError {
                    #expect([.connection, .invalidInput, .permissionDenied, .notFound].contains(error.code), "\(error)")
                    texts += [error.message, error.underlying.map { "\($0)" } ?? ""]
                } else {
                    Issue.record("not an ArborError: \(error)")
                }
            }
            for text in texts { #expect(text.utf8.firstRange(of: Self.secret.utf8) == nil, "\(configuration.redactedURL): \(text)") }
            tried += 1
        }
        print("hostile inputs (credentials): \(tried) PostgreSQL URLs with passwords, none shown by an error, a description, a reflection or a dump")
    }
}
