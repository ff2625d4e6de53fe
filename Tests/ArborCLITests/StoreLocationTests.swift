import Arbor
import ArborPostgres
import Foundation
import Testing
@testable import ArborCLI

/// Store URLs parse into locations, bad ones fail clearly, and no password is ever shown.
@Suite struct StoreLocationTests {
    @Test func parsesEverySupportedScheme() throws {
        #expect(try StoreLocation(parsing: "memory:") == .memory)
        #expect(try StoreLocation(parsing: "json:relative/store") == .json(path: "relative/store"))
        #expect(try StoreLocation(parsing: "json:/absolute/store") == .json(path: "/absolute/store"))
        #expect(try StoreLocation(parsing: "JSON:/upper") == .json(path: "/upper"))
        #expect(try StoreLocation(parsing: "sqlite:data.db") == .sqlite(path: "data.db"))
        #expect(try StoreLocation(parsing: "lmdb:/var/lmdb") == .lmdb(path: "/var/lmdb"))

        guard case .postgres(let connection) = try StoreLocation(parsing: "postgresql://bob:s3cret@db.example:6543/arbor") else {
            Issue.record("postgresql:// is not a PostgreSQL location")
            return
        }
        #expect(connection.user == "bob")
        #expect(connection.password == "s3cret")
        #expect(connection.host == "db.example")
        #expect(connection.port == 6543)
        #expect(connection.database == "arbor")
    }

    @Test func expandsATildeInPaths() throws {
        let home = NSString(string: "~").expandingTildeInPath
        #expect(try StoreLocation(parsing: "json:~/store") == .json(path: home + "/store"))
        #expect(try StoreLocation(parsing: "json:~") == .json(path: home))
    }

    @Test(arguments: ["json:", "sqlite:", "lmdb:", "memory:extra", "no-scheme", "ftp://host/x", "postgres://", "postgres://bob:pw@/db",
                      "sqlite://tasks.db", "lmdb:///var/lmdb", "json://store"])
    func rejectsMalformedURLsClearly(url: String) {
        #expect {
            try StoreLocation(parsing: url)
        } throws: { error in
            guard let error = error as? ArborError, error.code == .invalidInput else { return false }
            // Each message shows a form that works.
            return ["json:./", "json:PATH", "postgres://user:password@host"].contains(where: error.message.contains)
                || error.message.contains("\(url.prefix { $0 != ":" }):./my-store")
        }
    }

    /// libpq's several hosts, each with its port, which URL parsers refuse: read by the first,
    /// and handed to libpq as given.
    @Test func severalHostsAreTakenAsLibpqTakesThem() throws {
        let text = "postgres://bob:p%40ss@db1:5432,db2:5433/app?target_session_attrs=read-write"
        guard case .postgres(let connection) = try StoreLocation(parsing: text) else { throw ArborError(.invalidInput, "not PostgreSQL") }
        #expect(connection.url == text)
        #expect(connection.host == "db1" && connection.port == 5432 && connection.database == "app" && connection.user == "bob")
        guard case .postgres(let bare) = try StoreLocation(parsing: "postgresql://db1,db2") else { throw ArborError(.invalidInput, "not PostgreSQL") }
        #expect(bare.host.hasPrefix("db1") && bare.database == nil)
    }

    /// libpq's `host` parameter stands for a missing host: a Unix socket's folder, as a local
    /// server with peer or trust authentication is reached.
    @Test func aUnixSocketIsNamedByTheHostParameter() async throws {
        let location = try StoreLocation(parsing: "postgres://bob@/db?host=/var/run/postgresql")
        guard case .postgres(let connection) = location else { throw ArborError(.invalidInput, "not a PostgreSQL location: \(location)") }
        #expect(connection.host == "/var/run/postgresql" && connection.database == "db" && connection.user == "bob")
        // As in libpq, the parameter wins over the URL's host, and hostaddr names one too.
        guard case .postgres(let overridden) = try StoreLocation(parsing: "postgresql://localhost/db?host=/tmp") else { throw ArborError(.invalidInput, "not PostgreSQL") }
        #expect(overridden.host == "/tmp")
        guard case .postgres(let address) = try StoreLocation(parsing: "postgres://bob@/db?hostaddr=127.0.0.1") else { throw ArborError(.invalidInput, "not PostgreSQL") }
        #expect(address.host == "127.0.0.1")
        let error = try #require(await arborError("log", "postgres://bob:s3cret@/db?host="))
        #expect(error.code == .invalidInput && error.message.contains("?host=/path/to/socket-folder") && !error.description.contains("s3cret"))

        // The test cluster listens on a socket in its folder, trusting local connections.
        let environment = ProcessInfo.processInfo.environment
        guard let folder = environment["ARBOR_TEST_POSTGRES_DIR"], !folder.isEmpty,
            let tcp = environment["ARBOR_TEST_POSTGRES_URL"].flatMap({ URLComponents(string: $0) }), let port = tcp.port, let user = tcp.user
        else {
            if ["true", "1", "yes"].contains(environment["CI"]?.lowercased() ?? "") {
                Issue.record("CI=true but ARBOR_TEST_POSTGRES_URL and ARBOR_TEST_POSTGRES_DIR are not set; run scripts/test.sh")
            } else {
                print("PostgreSQL Unix-socket test skipped: set ARBOR_TEST_POSTGRES_URL and ARBOR_TEST_POSTGRES_DIR or run scripts/test.sh")
            }
            return
        }
        // A fresh database, made over TCP, then used through the socket alone.
        let name = "arbor_socket_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let admin = try PostgresSession(url: tcp.string ?? "")
        try admin.execute("CREATE DATABASE \(name)")
        defer { _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
        let url = "postgresql://\(user)@/\(name)?host=\(folder)&port=\(port)"
        _ = try await arbor("init", url)
        let version = try committedHash(try await arbor("put", url, "Task", "1", #"{"title": "over a socket"}"#))
        #expect(lines(try await arbor("log", url)).first?.hasPrefix(version) == true)
    }

    @Test func unknownSchemesListTheSupportedOnes() {
        #expect {
            try StoreLocation(parsing: "redis://localhost")
        } throws: { error in
            let message = (error as? ArborError)?.message ?? ""
            return message.contains("\"redis\"") && message.contains("memory:, json:PATH, sqlite:PATH, lmdb:PATH, postgres://")
        }
    }

    @Test func everySchemeOpensItsAdapter() async throws {
        // A store that does not exist is reported as such by each engine's adapter.
        for url in ["sqlite:/nonexistent-arbor-dir/x.db", "lmdb:/nonexistent-arbor-dir/x", "json:/nonexistent-arbor-dir/x"] {
            let error = try #require(await arborError("log", url))
            #expect(error.code == .notFound || error.code == .io || error.code == .permissionDenied, "\(url): \(error)")
        }
        // A PostgreSQL server that is not there is a connection error, without the password.
        let error = try #require(await arborError("log", "postgres://bob:s3cret@127.0.0.1:1/db"))
        #expect(error.code == .connection && !error.description.contains("s3cret"))
    }

    /// A password that is also ordinary text (the image default postgres, a one-digit one) is
    /// hidden where it is the password, and leaves the rest of the message readable: the
    /// engine's tag, the address, the port.
    @Test func aCommonOrShortPasswordLeavesTheRestOfTheMessageReadable() async throws {
        for (url, secret) in [("postgres://postgres:postgres@127.0.0.1:1/postgres", ":postgres@"), ("postgres://bob:1@127.0.0.1:1/db", ":1@")] {
            let command = try #require(try ArborCommand.parseAsRoot(["log", url]) as? LogCommand)
            var output = ""
            var caught: (any Error)?
            do { try await command.execute(&output) } catch { caught = error }
            let message = command.errorMessage(for: try #require(caught))
            #expect(message.hasPrefix("[postgres] open: "), "\(message)")
            #expect(message.contains("127.0.0.1") && message.contains(":***@") && !message.contains(secret), "\(message)")
        }
        #expect(URLSecrets.redacting(["1"], in: "postgres://bob:1@host:5432/db1?password=1&n=10") == "postgres://bob:***@host:5432/db1?password=***&n=10")
        // As libpq quotes a token it cannot decode, and before a fragment.
        #expect(URLSecrets.redacting(["a%z"], in: #"invalid percent-encoded token: "a%z""#) == #"invalid percent-encoded token: "***""#)
        #expect(URLSecrets.redacting(["ab"], in: "postgres://h/db?password=ab#x") == "postgres://h/db?password=***#x")
    }

    // MARK: Redaction

    static let secretURLs = [
        "postgres://bob:s3cret@localhost/db",
        "postgresql://bob:s3cret@localhost:5432/db",
        "postgres://bob:s3cret@localhost:notaport/db",
        "postgres://bob:s3cret@/db",
        "postgres://bob:s3%63ret@localhost/db",
        "postgres://bob:pa/s3cret@localhost/db",
        "postgres://bob:s3cret@localhost/db/extra",
        "postgres://localhost/db?user=bob&password=s3cret",
        "mysql://bob:s3cret@localhost/db",
        "bob:s3cret@localhost/db",
    ]

    @Test func redactedDescriptionsHideThePassword() throws {
        let location = try StoreLocation(parsing: "postgres://bob:s3cret@localhost/db")
        #expect(location.redacted == "postgres://bob:***@localhost/db")
        #expect(location.description == "postgres://bob:***@localhost/db")
        #expect(!String(reflecting: location).contains("s3cret"))
        #expect(!"\(location)".contains("s3cret"))
        var dumped = ""
        dump(location, to: &dumped)
        #expect(!dumped.contains("s3cret"))
        #expect(dumped.contains("***"))

        let query = try StoreLocation(parsing: "postgres://localhost/db?user=bob&password=s3cret")
        #expect(query.redacted == "postgres://localhost/db?user=bob&password=***")
        #expect(try StoreLocation(parsing: "postgres://bob@localhost/db").redacted == "postgres://bob@localhost/db")
    }

    @Test(arguments: secretURLs)
    func noErrorOrOutputShowsThePassword(url: String) async throws {
        if let location = try? StoreLocation(parsing: url) {
            #expect(!location.redacted.contains("s3cret"))
            #expect(!String(reflecting: location).contains("s3cret"))
        }
        for arguments in [["init", url], ["get", url, "Task", "1"], ["log", url, "--json"], ["put", url, "Task", "1", "{}"]] {
            let command = try #require(try ArborCommand.parseAsRoot(arguments) as? any StoreCommand)
            var output = ""
            do {
                try await command.execute(&output)
                Issue.record("\(arguments[0]) succeeded on a store that cannot be opened")
            } catch {
                #expect(!String(describing: error).contains("s3cret"))
                #expect(!String(reflecting: error).contains("s3cret"))
                #expect(!command.errorMessage(for: error).contains("s3cret"))
            }
            #expect(!output.contains("s3cret"))
        }
    }

    @Test func errorsFromAnyLayerAreRedacted() {
        let url = "postgres://bob:s3%63ret@localhost/db"
        struct EngineFailure: Error, CustomStringConvertible {
            var description: String { "authentication failed for bob:s3cret" }
        }
        let leaky = ArborError(.connection, "cannot connect to \(url)", backend: "postgres", underlying: EngineFailure())
        let redacted = StoreLocation.redactingSecrets(of: url, in: leaky)
        let text = String(describing: redacted)
        #expect(!text.contains("s3cret") && !text.contains("s3%63ret"))
        #expect(text.contains("postgres://bob:***@localhost/db"))
        #expect(text.contains("authentication failed for bob:***"))
        #expect((redacted as? ArborError)?.code == .connection)

        let foreign = StoreLocation.redactingSecrets(of: url, in: EngineFailure())
        #expect(!String(describing: foreign).contains("s3cret"))

        // Errors without the secret pass through as they are.
        let harmless = ArborError(.notFound, "no store")
        #expect((StoreLocation.redactingSecrets(of: url, in: harmless) as? ArborError)?.message == "no store")
    }
}

/// The parser's own messages quote unexpected arguments; a store URL among them is redacted.
@Suite struct ParserMessageRedactionTests {
    @Test(arguments: [
        ["nosuch", "postgres://bob:s3cret@localhost/db"],
        ["heads", "json:x", "postgres://bob:s3cret@localhost/db"],
        ["log", "postgres://bob:s3cret@localhost/db", "--limit", "0"],
    ])
    func parserErrorsNeverShowThePassword(arguments: [String]) throws {
        let error = try #require(throws: (any Error).self) { try ArborCommand.parseAsRoot(arguments) }
        #expect(ArborCommand.fullMessage(for: error).isEmpty == false)
        let message = ArborCommand.redactedMessage(for: error, arguments: arguments)
        #expect(!message.isEmpty)
        #expect(!message.contains("s3cret"))
    }
}
