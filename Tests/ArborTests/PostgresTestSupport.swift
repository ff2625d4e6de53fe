import Arbor
import ArborPostgres
import Foundation
import Testing

/// The PostgreSQL server the tests use: `ARBOR_TEST_POSTGRES_URL` (scripts/test.sh starts a
/// throwaway cluster and sets it). Every test gets a fresh database, dropped afterwards.
///
/// Without the variable the PostgreSQL tests are skipped with a loud message, except under
/// `CI=true`, where they run and fail.
enum PostgresTestServer {
    static let skipMessage = "PostgreSQL tests skipped: set ARBOR_TEST_POSTGRES_URL or run scripts/test.sh"

    static let url: String? = {
        let value = ProcessInfo.processInfo.environment["ARBOR_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }()

    static let isCI: Bool = ["true", "1", "yes"].contains(ProcessInfo.processInfo.environment["CI"]?.lowercased() ?? "")

    /// Whether the PostgreSQL tests run (and, without a URL under CI, fail).
    static let isEnabled: Bool = {
        if url != nil || isCI { return true }
        FileHandle.standardError.write(Data("""

            ************************************************************************
            *  \(skipMessage)
            ************************************************************************

            """.utf8))
        return false
    }()

    static func requireURL() throws -> String {
        guard let url else {
            throw ArborError(.notFound, "ARBOR_TEST_POSTGRES_URL is not set (CI=true makes the PostgreSQL tests fail instead of skipping); run scripts/test.sh, which starts a throwaway PostgreSQL")
        }
        return url
    }

    /// `url` with its database replaced by `database`.
    static func url(_ url: String, database: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let query = url[scheme.upperBound...].firstIndex(of: "?") ?? url.endIndex
        let pathStart = url[scheme.upperBound..<query].lastIndex(of: "@").flatMap { url[$0..<query].firstIndex(of: "/") }
            ?? url[scheme.upperBound..<query].firstIndex(of: "/") ?? query
        return String(url[..<pathStart]) + "/" + database + String(url[query...])
    }

    /// The fixture cluster's superuser (`postgres`, trusted over the socket in the cluster's
    /// folder), for what the `arbor` role may not do; `nil` without the fixture's folder.
    static var superuserURL: String? {
        guard let folder = ProcessInfo.processInfo.environment["ARBOR_TEST_POSTGRES_DIR"], !folder.isEmpty,
            let url, let port = URLComponents(string: url)?.port
        else { return nil }
        return "postgresql://postgres@/postgres?host=\(folder)&port=\(port)"
    }

    /// The password of the test URL (for checking that no message repeats it).
    static var password: String? {
        url.flatMap { URLComponents(string: $0)?.password }
    }

    /// Creates a fresh, empty database; returns its URL and a cleanup that drops it.
    static func makeDatabase() throws -> (url: String, drop: @Sendable () -> Void) {
        let base = try requireURL()
        // A generated identifier (lowercase letters, digits, underscores), never data.
        let name = "arbor_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20)
        let admin = try PostgresSession(url: base)
        try admin.execute("CREATE DATABASE \(name)")
        return (url(base, database: name), {
            guard let admin = try? PostgresSession(url: base) else { return }
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        })
    }

    /// A backend on a fresh database, and a cleanup that drops the database.
    static func makeBackend() throws -> (backend: any Backend, cleanup: @Sendable () -> Void) {
        let (url, drop) = try makeDatabase()
        do {
            return (try PostgresBackend.create(.init(url: url)), drop)
        } catch {
            drop()
            throw error
        }
    }
}
