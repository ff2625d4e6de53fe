import Arbor
import ArborPostgres
import Foundation

/// Fresh PostgreSQL databases for the suite, on the server of `ARBOR_TEST_POSTGRES_URL`
/// (scripts/test.sh starts a throwaway one). Without it the PostgreSQL runs are skipped with a
/// loud message, except under `CI=true`, where they run and fail.
enum PostgresDatabase {
    static let serverURL: String? = ProcessInfo.processInfo.environment["ARBOR_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    static let isEnabled: Bool = {
        let isCI = ["true", "1", "yes"].contains(ProcessInfo.processInfo.environment["CI"]?.lowercased() ?? "")
        if serverURL != nil || isCI { return true }
        FileHandle.standardError.write(Data("""

            ************************************************************************
            *  PostgreSQL conformance runs skipped: set ARBOR_TEST_POSTGRES_URL
            *  or run scripts/test.sh
            ************************************************************************

            """.utf8))
        return false
    }()

    /// Runs `body` with the URL of a new database, dropped afterwards.
    static func withDatabase<Value>(_ body: (String) async throws -> Value) async throws -> Value {
        let (url, drop) = try create()
        defer { drop() }
        return try await body(url)
    }

    /// Removes the Arbor tables from the database at `url`, making room for a fresh store:
    /// much faster than a new database for every case.
    static func dropTables(_ url: String) throws {
        try PostgresSession(url: url).execute("DROP TABLE IF EXISTS arbor_meta, arbor_objects, arbor_refs")
    }

    /// Creates a database; returns its URL and a cleanup that drops it.
    static func create() throws -> (url: String, drop: @Sendable () -> Void) {
        guard let serverURL, var components = URLComponents(string: serverURL) else {
            throw ArborError(.notFound, "ARBOR_TEST_POSTGRES_URL is not set (CI=true makes the PostgreSQL runs fail instead of skipping); run scripts/test.sh")
        }
        // A generated identifier (lowercase letters, digits, underscores), never data.
        let name = "arbor_conformance_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        try PostgresSession(url: serverURL).execute("CREATE DATABASE \(name)")
        components.path = "/" + name
        return (components.string ?? serverURL, {
            _ = try? PostgresSession(url: serverURL).execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        })
    }
}
