import Arbor
import Foundation

/// Where a store lives, parsed from a store URL.
///
/// | URL                                              | Store                              |
/// |--------------------------------------------------|------------------------------------|
/// | `memory:`                                        | in memory, gone when the command ends |
/// | `json:PATH`                                      | a folder of JSON files (relative or absolute path, `~/` expanded) |
/// | `sqlite:PATH`                                    | an SQLite database file             |
/// | `lmdb:PATH`                                      | an LMDB environment folder          |
/// | `postgres://user:password@host:port/database`    | a PostgreSQL database (`postgresql://` too) |
///
/// The description of a location never shows a password: it is replaced by `***`.
public enum StoreLocation: Hashable, Sendable, CustomStringConvertible {
    case memory
    case json(path: String)
    case sqlite(path: String)
    case lmdb(path: String)
    case postgres(PostgresConnection)

    /// The URL forms accepted, for help texts and errors.
    static let supportedForms = "memory:, json:PATH, sqlite:PATH, lmdb:PATH, postgres://user:password@host:port/database"

    /// Parses a store URL. Throws ``ArborError/Code/invalidInput`` for a malformed URL or an
    /// unknown scheme; the error never repeats a password.
    public init(parsing text: String) throws {
        guard let colon = text.firstIndex(of: ":") else {
            throw ArborError(.invalidInput, "\(Self.quoted(text)) is not a store URL; use one of \(Self.supportedForms)")
        }
        let scheme = text[..<colon].lowercased()
        let rest = String(text[text.index(after: colon)...])
        switch scheme {
        case "memory":
            guard rest.isEmpty else { throw ArborError(.invalidInput, "a memory: store takes no path; write memory:, or json:PATH for a store on disk") }
            self = .memory
        case "json": self = .json(path: try Self.path(rest, scheme: "json"))
        case "sqlite": self = .sqlite(path: try Self.path(rest, scheme: "sqlite"))
        case "lmdb": self = .lmdb(path: try Self.path(rest, scheme: "lmdb"))
        case "postgres", "postgresql": self = .postgres(try PostgresConnection(parsing: text))
        default:
            // Only the scheme is repeated: the rest of an unknown URL may hold a password.
            let shownScheme = scheme.count <= 40 && scheme.allSatisfy { $0.isLetter || $0.isNumber || "+-.".contains($0) }
                ? "\"\(scheme)\"" : "of this URL"
            throw ArborError(.invalidInput, "the scheme \(shownScheme) is not supported; use one of \(Self.supportedForms)")
        }
    }

    /// The URL scheme, such as `"json"`.
    public var scheme: String {
        switch self {
        case .memory: "memory"
        case .json: "json"
        case .sqlite: "sqlite"
        case .lmdb: "lmdb"
        case .postgres: "postgres"
        }
    }

    /// The location as a URL, with any password replaced by `***`.
    public var redacted: String {
        switch self {
        case .memory: "memory:"
        case .json(let path), .sqlite(let path), .lmdb(let path): "\(scheme):\(path)"
        case .postgres(let connection): connection.redacted
        }
    }

    public var description: String { redacted }

    private static func path(_ text: String, scheme: String) throws -> String {
        guard !text.isEmpty else {
            throw ArborError(.invalidInput, "\(scheme): needs a path, as in \(scheme):./my-store or \(scheme):/var/data/store")
        }
        // "sqlite://tasks.db" would be the path //tasks.db, which is /tasks.db; and conventions
        // differ on what "sqlite:///x" means (SQLAlchemy: the relative path x).
        guard !text.hasPrefix("//") else {
            throw ArborError(.invalidInput, "\(scheme): takes a path without //, as in \(scheme):./my-store or \(scheme):/var/data/store")
        }
        // The shell expands ~ only at the start of a word, never after "json:".
        return text == "~" || text.hasPrefix("~/") ? NSString(string: text).expandingTildeInPath : text
    }

    private static func quoted(_ text: String) -> String {
        String(reflecting: String(redactingSecrets(of: text, in: text).prefix(200)))
    }

    // MARK: Redaction

    /// The secrets a URL's text carries (see ``URLSecrets/secrets(in:)``).
    static func secrets(in url: String) -> [String] { URLSecrets.secrets(in: url) }

    /// `text` with every secret that `url` carries replaced by `***`.
    public static func redactingSecrets(of url: String, in text: String) -> String {
        URLSecrets.redacting(url, in: text)
    }
}

/// A PostgreSQL connection URL, `postgres://user:password@host:port/database`.
///
/// Its description and its reflection (`dump`, `debugPrint`, test failure messages) show the
/// password as `***`; only ``url`` and ``password`` hold it, for the adapter to connect with.
public struct PostgresConnection: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The URL as given, password included.
    public let url: String
    public let user: String?
    public let password: String?
    public let host: String
    public let port: Int?
    public let database: String?

    /// Parses `postgres://` and `postgresql://` URLs. Errors never repeat the URL.
    init(parsing text: String) throws {
        let form = "postgres://user:password@host:port/database"
        // libpq takes several hosts, each with its port (db1:5432,db2:5433), which URL parsers
        // refuse; the URL goes to libpq as given, and is checked here by its first host.
        guard let components = URLComponents(string: text) ?? Self.firstHostOnly(text).flatMap(URLComponents.init(string:)) else {
            throw ArborError(.invalidInput, "the PostgreSQL URL is malformed; write it as \(form), percent-encoding special characters in the password")
        }
        // libpq's `host` (or `hostaddr`) parameter may name the host instead, and wins over the
        // URL's, as in libpq: a name, an address, or the folder of a Unix socket
        // (postgres://user@/database?host=/var/run/postgresql).
        let parameters = components.queryItems ?? []
        let hostParameter = parameters.last { $0.name == "host" }?.value
        let addressParameter = parameters.last { $0.name == "hostaddr" }?.value
        guard let host = [hostParameter, addressParameter, components.host].compactMap({ $0 }).first(where: { !$0.isEmpty }) else {
            throw ArborError(.invalidInput, "the PostgreSQL URL names no host; write it as \(form), or for a Unix socket postgres://user@/database?host=/path/to/socket-folder")
        }
        let path = components.path
        guard path.isEmpty || !path.dropFirst().contains("/") else {
            throw ArborError(.invalidInput, "the PostgreSQL URL has more than a database name after the host; write it as \(form)")
        }
        url = text
        user = components.user
        password = components.password
        self.host = host
        port = components.port
        database = path.count > 1 ? String(path.dropFirst()) : nil
    }

    /// `text` with only the first of the hosts its authority lists (`host:port,host:port`), or
    /// `nil` if it lists one.
    private static func firstHostOnly(_ text: String) -> String? {
        guard let schemeEnd = text.range(of: "://") else { return nil }
        let rest = text[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { "/?#".contains($0) } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let hostsStart = authority.lastIndex(of: "@").map(authority.index(after:)) ?? authority.startIndex
        guard let comma = authority[hostsStart...].firstIndex(of: ",") else { return nil }
        return String(text[..<comma]) + String(rest[authorityEnd...])
    }

    /// The URL with the password replaced by `***`.
    public var redacted: String { StoreLocation.redactingSecrets(of: url, in: url) }

    public var description: String { redacted }
    public var debugDescription: String { "PostgresConnection(\(redacted))" }
    public var customMirror: Mirror {
        // The host and the database are redacted too: in a mistyped URL they may hold the password.
        let hidden = { (text: String) in StoreLocation.redactingSecrets(of: url, in: text) }
        return Mirror(self, children: ["url": redacted, "host": hidden(host), "port": port as Any, "database": database.map(hidden) as Any])
    }
}

extension StoreLocation {
    /// `error`, or a copy of it without the secrets `url` carries, so that no failure of any
    /// layer — parser, adapter, engine — can print a password.
    static func redactingSecrets(of url: String, in error: any Error) -> any Error {
        let secrets = secrets(in: url)
        let text = String(describing: error)
        // Compared as redacted text, not with `contains`, which matches characters, not bytes.
        guard !secrets.isEmpty, URLSecrets.redacting(secrets, in: text) != text else { return error }
        guard var arborError = error as? ArborError else {
            return ArborError(.engine, redactingSecrets(of: url, in: String(describing: error)))
        }
        arborError.message = redactingSecrets(of: url, in: arborError.message)
        if let underlying = arborError.underlying {
            // An underlying error cannot be edited: keep its redacted text in the message instead.
            let text = String(describing: underlying)
            let redacted = URLSecrets.redacting(secrets, in: text)
            if redacted != text {
                arborError.message += " (\(redacted))"
                arborError.underlying = nil
            }
        }
        return arborError
    }
}
