import ArborJSON
import ArborLMDB
import ArborPostgres
import ArborSQLite
import Foundation
import Testing
@testable import Arbor

/// A store on a file system mounted read-only (a snapshot, a backup): it opens for reading on
/// every engine that keeps its store in files, so it can be inspected, verified and migrated
/// off, and every write says why it cannot be done.
@Suite struct ReadOnlyDiskTests {
    typealias Engine = OnDiskAdapterTests.Engine

    static func isReadOnlyRefusal(_ error: any Error) -> Bool {
        isArborError(error, .permissionDenied, mentioning: "read-only file system")
    }

    @Test(arguments: Engine.allCases) func aStoreOnAReadOnlyDiskIsReadAndMigratedButNotChanged(engine: Engine) async throws {
        guard let disk = SmallDisk.mount(megabytes: 16) else { return }
        defer { disk.unmount() }
        let path = disk.path + "/store"
        var store = Store(backend: try engine.create(path))
        try await FullDiskTests.commit(FullDiskTests.tasks(50, from: 0), to: store)
        let head = try await FullDiskTests.commit(FullDiskTests.tasks(50, from: 1_000), to: store)
        try await store.close()
        try disk.remount(readOnly: true)

        store = Store(backend: try engine.open(path))
        #expect(try await store.head()?.id == head.id)
        #expect(try await store.value(Task.self, id: "t1000")?.title.count == 1_000)
        #expect(try await store.verify().isIntact)
        let copy = Store(backend: MemoryBackend())
        let report = try await store.migrate(to: copy)
        #expect(report.verified && report.heads == [head.id])
        await #expect { try await store.save(Task(id: "new", title: "refused", done: false)) } throws: { Self.isReadOnlyRefusal($0) }
        await #expect { try await store.collectGarbage(gracePeriod: .zero) } throws: { Self.isReadOnlyRefusal($0) }
        try await store.close()

        // Writable again, the same store takes commits.
        try disk.remount(readOnly: false)
        store = Store(backend: try engine.open(path))
        let next = try await store.save(Task(id: "new", title: "accepted", done: false))
        #expect(next.parents == [head.id])
        try await store.close()
    }

    /// Commits still in a SQLite store's `-wal` file are only read through its shared-memory
    /// index, which a read-only file system cannot hold: the store is refused, saying why,
    /// rather than read without them.
    @Test func aSQLiteStoreWithCommitsInItsWALIsRefusedOnAReadOnlyDisk() async throws {
        guard let disk = SmallDisk.mount(megabytes: 16) else { return }
        defer { disk.unmount() }
        let path = disk.path + "/store.sqlite"
        let copy = disk.path + "/copy.sqlite"
        let store = Store(backend: try SQLiteBackend.create(.init(path: path)))
        let head = try await FullDiskTests.commit(FullDiskTests.tasks(20, from: 0), to: store)
        // While the store is open, its last commits are in the -wal file: copy both files, as a
        // snapshot taken at that moment would hold them.
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix) }
        try await store.close()
        try disk.remount(readOnly: true)

        #expect { try SQLiteBackend.open(.init(path: copy)) } throws: { isArborError($0, .permissionDenied, mentioning: "-wal", copy) }
        try disk.remount(readOnly: false)
        let reopened = Store(backend: try SQLiteBackend.open(.init(path: copy)))
        #expect(try await reopened.head()?.id == head.id)
        try await reopened.close()
    }

    /// PostgreSQL's read-only databases (a standby; here `default_transaction_read_only`): the
    /// store is read and migrated off, and a write says the database is read-only.
    @Test(.enabled(if: PostgresTestServer.isEnabled))
    func aReadOnlyPostgreSQLDatabaseIsReadAndMigratedButNotChanged() async throws {
        let (url, drop) = try PostgresTestServer.makeDatabase()
        defer { drop() }
        var store = Store(backend: try await PostgresBackend.create(.init(url: url)))
        let head = try await FullDiskTests.commit(FullDiskTests.tasks(50, from: 0), to: store)
        try await store.close()
        // The database's owner makes new sessions read-only; its name is the URL's last part.
        let name = try #require(url.split(separator: "/").last.map { String($0.split(separator: "?")[0]) })
        let owner = try PostgresSession(url: url)
        try owner.execute("ALTER DATABASE \(name) SET default_transaction_read_only = on")

        store = Store(backend: try await PostgresBackend.open(.init(url: url)))
        #expect(try await store.head()?.id == head.id)
        #expect(try await store.verify().isIntact)
        let report = try await store.migrate(to: Store(backend: MemoryBackend()))
        #expect(report.verified && report.heads == [head.id])
        await #expect { try await store.save(Task(id: "new", title: "refused", done: false)) } throws: { error in
            let password = PostgresTestServer.password ?? ""
            return isArborError(error, .permissionDenied, mentioning: "read-only") && (password.isEmpty || !"\(error)".contains(password))
        }
        try await store.close()
    }
}
