import Arbor
import Foundation
import Testing
@testable import ArborCLI

/// What a person or a script types at the CLI, damaged and hostile: store URLs (the parser and
/// its redaction) and the property documents of `arbor put`, run through the real command.
/// Here rather than in ArborCLITests because the fuzzing machinery lives in this target.
@Suite struct FuzzCLIInputTests {
    static let password = "Pw0rd-Xq9z"

    /// Store URLs of every scheme and shape: percent escapes, IPv6 hosts, several hosts, huge
    /// ports, unicode, NUL, the password in the user info and in the query.
    static let urls = [
        "memory:", "json:./store", "json:/var/data/store", "json:~/store", "JSON:relative", "sqlite:data.db", "lmdb:/var/lmdb",
        "postgres://bob:\(password)@db.example:5432/arbor", "postgresql://bob:\(password)@[::1]:5432/arbor?sslmode=require",
        "postgres://bob@localhost/db?password=\(password)&application_name=x", "postgres://bob:\(password)@h1:1,h2:2/db",
        "postgres://bob:p%40ss\(password)@localhost/db", "postgres://%62ob:\(password)@localhost:65535/db",
        "postgres://bob:\(password)@localhost:99999999999999999999/db", "postgres://bob:\(password)@[fe80::1%25eth0]/db",
        "postgres://bób:\(password)@exämple.com/数据库", "postgres://bob:\(password)@localhost/db\u{0}x",
        "postgres://localhost/db?pass%77ord=\(password)", "postgres://bob:\(password)@/db", "postgres://:\(password)@host/db",
    ]

    static let urlTokens: [[UInt8]] = [
        "://", "@", ":", "/", "?", "&", "=", "%", "%00", "%zz", "%2F", "%40", "[", "]", "::1", "#", "password=", "sslpassword=",
        "\u{0}", "é", "🌳", "\u{301}", "\\", " ", String(repeating: "9", count: 30), "postgres", "postgresql://", "json:", "~/", "..", password,
    ].map { Array($0.utf8) } + [[0xFF], [0xC0, 0x80]]

    @Test func mutatedStoreURLsParseOrFailWithoutShowingPasswords() async {
        await FuzzTally.fuzz("store URLs (StoreLocation)", seeds: Self.urls.map { Array($0.utf8) }, tokens: Self.urlTokens, salt: 0x0A1, Self.parseURL)
    }

    @Test func hostileStoreURLsParseOrFailWithoutShowingPasswords() async {
        let long = String(repeating: "a", count: 100_000)
        let hostile = [
            "", ":", "postgres:", "postgres:/", "postgres://", "postgres://@", "postgres://:@:/", "postgres://[", "postgres://]", "postgres://[::1",
            "postgres://bob:\(Self.password)@[::1", "postgres://bob:\(Self.password)@host:-1/db", "postgres://bob:\(Self.password)@host:0x10/db",
            "postgres://bob:\(Self.password)@host:\(String(repeating: "9", count: 10_000))/db", "postgres://bob:\(Self.password)@\(long)/db",
            "postgres://bob:\(Self.password)\(long)@host/db", "postgres://bob:\(Self.password)@host/\(long)", "json:\(long)", "\(long):x", long,
            "postgres://bob:\(Self.password)@host/db?\(String(repeating: "password=\(Self.password)&", count: 1_000))",
            "postgres://bob:\(Self.password)@host/db#\(Self.password)", "postgres://bob:\(Self.password)@host/db\u{0}", "\u{0}postgres://bob:\(Self.password)@host",
            "postgres://bob:\u{301}\(Self.password)@host/db", "postgres://bob:e\u{301}\(Self.password)@host/db?password=\u{e9}\(Self.password)",
            "postgres://bob:\(Self.password)@h%00st/db", "postgres://bob:\(Self.password)@\u{FF0E}/db", "postgres://bob:\(Self.password)@host:５４３２/db",
        ]
        var tally = FuzzTally("store URLs (hand-made)")
        for url in hostile { tally.run(Array(url.utf8)) { try Self.parseURL(Array(url.utf8), &$0) } }
        tally.report()
    }

    /// Parses `bytes` as a store URL: a location or an ``ArborError/Code/invalidInput``, and no
    /// description, reflection or message shows a password the URL carries.
    static func parseURL(_ bytes: [UInt8], _ tally: inout FuzzTally) throws {
        let text = String(decoding: bytes, as: UTF8.self)
        let secrets = passwords(in: text)
        var shown = [String]()
        defer {
            // Byte for byte: a search by characters misses a password that starts with a combining mark.
            for text in shown where secrets.contains(where: { text.utf8.firstRange(of: $0.utf8) != nil }) {
                tally.fail(bytes, "a password is shown: \(text.prefix(300))")
            }
        }
        do {
            let location = try StoreLocation(parsing: text)
            var dumped = ""
            dump(location, to: &dumped)
            shown += [location.description, location.redacted, String(reflecting: location), dumped]
            guard case .postgres(let connection) = location else {
                // A path is no URL: it is shown as given.
                shown.removeAll()
                return
            }
            shown += [connection.description, connection.debugDescription] + Mirror(reflecting: connection).children.map { "\($0.value)" }
        } catch let error as ArborError {
            shown += ["\(error)", String(reflecting: error)]
            if error.code != .invalidInput { tally.fail(bytes, "a URL refused with \(error.code): \(error)") }
            throw error
        }
    }

    /// Every password a reader takes from `url`, as written and percent-decoded: libpq's (the
    /// user info ends at the first "@", unless a "/" comes first), Foundation's, and the query's
    /// `password` and `sslpassword` parameters. Those shorter than four characters are left out:
    /// they cannot be told from the words of a message.
    static func passwords(in url: String) -> Set<String> {
        var found = [String]()
        if let scheme = url.range(of: "://") {
            let rest = url[scheme.upperBound...]
            if let end = rest.firstIndex(where: { $0 == "@" || $0 == "/" }), rest[end] == "@", let colon = rest[..<end].firstIndex(of: ":") {
                found.append(String(rest[rest.index(after: colon)..<end]))
            }
        }
        if let components = URLComponents(string: url) {
            found += [components.password, components.percentEncodedPassword].compactMap { $0 }
            found += (components.queryItems ?? []).filter { ["password", "sslpassword"].contains($0.name.lowercased()) }.compactMap(\.value)
        }
        return Set(found.flatMap { [$0, $0.removingPercentEncoding ?? $0] }.filter { $0.count >= 4 })
    }

    /// `arbor put memory: TYPE ID` with a damaged document on standard input, through the real
    /// command: parsed, validated and committed, or refused with a clear error.
    @Test func putReadsMutatedDocumentsOrFailsClearly() async throws {
        let seeds = FuzzJSONTests.propertyDocuments()
        var mutator = Mutator(seed: FuzzSettings.seed ^ 0x9E7, tokens: FuzzJSONTests.tokens)
        var tally = FuzzTally("CLI put (PutCommand on memory:)", allowing: [.invalidInput])
        let hostile = FuzzJSONTests.hostileDocuments.map(\.input)
        // Parsed once: the argument parser costs more than the rest of a put in a debug build.
        let parsed = try #require(try ArborCommand.parseAsRoot(["put", "memory:", "Item", "i"]) as? PutCommand)
        var index = 0
        while tally.inputs < max(FuzzSettings.iterations, hostile.count) {
            let input = index < hostile.count ? hostile[index] : mutator.mutate(mutator.element(seeds), donor: mutator.element(seeds))
            let (type, id) = index % 8 == 0 ? (mutator.text(), mutator.text()) : ("Item", "i\(index)")
            index += 1
            var command = parsed
            (command.type, command.id) = (type, id)
            await tally.run(input) { tally in
                var output = ""
                try await command.execute(&output) { Data(input) }
                // The key as text shows it: controls in a fuzzed type or id are escaped.
                if !output.contains("added \(Rendering.key(RecordKey(type: type, id: id)))") { tally.fail(input, "put printed \(output)") }
            }
            await _Concurrency.Task.yield()
        }
        tally.report()
    }
}
