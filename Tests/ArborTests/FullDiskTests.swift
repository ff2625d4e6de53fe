import ArborJSON
import ArborLMDB
import ArborPostgres
import ArborSQLite
import Foundation
import Testing
@testable import Arbor

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A full disk, for real, on every engine that keeps its store in files: a clear error that
/// names the cause, nothing lost or half-applied, and the same operation succeeds once there
/// is room again.
@Suite struct FullDiskTests {
    typealias Engine = OnDiskAdapterTests.Engine

    /// `count` tasks whose titles are random, so that no engine compresses them away.
    static func tasks(_ count: Int, from first: Int, titleBytes: Int = 1_000) -> [Task] {
        var generator = SeededGenerator(seed: UInt64(first))
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return (first..<first + count).map { index in
            let title = String((0..<titleBytes).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
            return Task(id: "t\(index)", title: title, done: false)
        }
    }

    /// Commits `tasks` as one version.
    @discardableResult
    static func commit(_ tasks: [Task], to store: Store) async throws -> Version {
        var changes = ChangeSet()
        for task in tasks { try changes.save(task) }
        return try await store.commit(changes)
    }

    /// Commits batches of about 300 KB to `store`, on a disk of `megabytes`, until one fails;
    /// checks that it failed for a full disk, saying so without a password, and that the heads
    /// are still at the last version that landed. Returns that version and the batch that failed.
    static func commitUntilFull(_ store: Store, megabytes: Int) async throws -> (lastGood: Version, failed: [Task]) {
        var lastGood = try await commit(tasks(10, from: 0), to: store)
        for round in 1...(megabytes * 10) {
            let batch = tasks(300, from: round * 1_000)
            do { lastGood = try await commit(batch, to: store) } catch {
                #expect(isDiskFull(error), "not a clear disk-full error: \(error)")
                if let password = PostgresTestServer.password, !password.isEmpty { #expect(!"\(error)".contains(password)) }
                #expect(try await store.head()?.id == lastGood.id)
                return (lastGood, batch)
            }
        }
        throw ArborError(.invalidInput, "\(megabytes) MB never filled up")
    }

    static func isDiskFull(_ error: any Error) -> Bool {
        isArborError(error, .io, mentioning: "full")
    }

    @Test(arguments: Engine.allCases) func aCommitThatFillsTheDiskFailsAndLosesNothing(engine: Engine) async throws {
        guard let disk = SmallDisk.mount(megabytes: 4) else { return }
        defer { disk.unmount() }
        let path = disk.path + "/store"
        var store = Store(backend: try engine.create(path))
        let (lastGood, batch) = try await Self.commitUntilFull(store, megabytes: 4)
        #expect(try await store.value(Task.self, id: batch[0].id) == nil)
        try await store.close()

        // Still full: the store opens, at the last version that landed, intact.
        store = Store(backend: try engine.open(path), configuration: .init(nodeCacheCapacity: 0))
        #expect(try await store.head()?.id == lastGood.id)
        #expect(try await store.verify().isIntact)
        try await store.close()

        // With room again, the same commit lands.
        try disk.resize(megabytes: 64)
        store = Store(backend: try engine.open(path))
        let version = try await Self.commit(batch, to: store)
        #expect(version.parents == [lastGood.id])
        #expect(try await store.value(Task.self, id: batch[0].id) == batch[0])
        #expect(try await store.verify().isIntact)
        try await store.close()
    }

    /// Before the lock file's blocks were reserved, creating an LMDB environment on a full disk
    /// killed the process with SIGBUS (LMDB writes its lock file through a memory map).
    @Test(arguments: Engine.allCases) func creatingAStoreOnAFullDiskFailsAndLeavesNothing(engine: Engine) async throws {
        guard let disk = SmallDisk.mount(megabytes: 1) else { return }
        defer { disk.unmount() }
        disk.fill()
        let path = disk.path + "/store"
        #expect { try engine.create(path) } throws: { Self.isDiskFull($0) }
        let left = try FileManager.default.contentsOfDirectory(atPath: disk.path).sorted()
        #expect(left == ["filler"], "a failed create left \(left)")

        disk.removeFiller()
        let store = Store(backend: try engine.create(path))
        let version = try await store.save(Task(id: "t", title: "room again", done: false))
        #expect(try await store.head()?.id == version.id)
        try await store.close()
    }

    @Test(arguments: Engine.allCases) func aMigrationOntoAFullDiskRunsAgainOnceThereIsRoom(engine: Engine) async throws {
        let source = Store(backend: MemoryBackend())
        for round in 0..<4 { try await Self.commit(Self.tasks(500, from: round * 1_000), to: source) }
        guard let disk = SmallDisk.mount(megabytes: 1) else { return }
        defer { disk.unmount() }
        let path = disk.path + "/store"
        var target = Store(backend: try engine.create(path))
        await #expect { try await source.migrate(to: target) } throws: { Self.isDiskFull($0) }
        #expect(try await target.heads().isEmpty)
        try await target.close()

        try disk.resize(megabytes: 64)
        target = Store(backend: try engine.open(path))
        let report = try await source.migrate(to: target)
        #expect(try await target.heads() == source.heads())
        #expect(report.exchange.objects > 0)
        #expect(try await target.verify().isIntact)
        try await target.close()
    }

    /// PostgreSQL on a full disk: the store's database lives in a tablespace on a small tmpfs
    /// (the fixture's server runs on this machine, as the `postgres` user when the tests run as
    /// root). The server refuses the batch (SQLSTATE 53100) and rolls it back.
    @Test(.enabled(if: PostgresTestServer.isEnabled))
    func aPostgreSQLCommitThatFillsTheDiskFailsAndLosesNothing() async throws {
        let base = try PostgresTestServer.requireURL()
        // Creating a tablespace takes a superuser: the fixture's `postgres`, over its socket.
        guard let superuser = PostgresTestServer.superuserURL else {
            print("⚠️  PostgreSQL full-disk test skipped: ARBOR_TEST_POSTGRES_DIR (set by scripts/postgres-fixture.sh) names no cluster")
            return
        }
        let owner = getuid() == 0 ? getpwnam("postgres").map { (uid: $0.pointee.pw_uid, gid: $0.pointee.pw_gid) } : nil
        guard getuid() != 0 || owner != nil, let disk = SmallDisk.mount(megabytes: 8, owner: owner) else { return }
        defer { disk.unmount() }
        let name = "arbor_full_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let admin = try PostgresSession(url: superuser)
        // Generated identifiers and a path this test made: no data in the SQL.
        try admin.execute("CREATE TABLESPACE \(name) LOCATION '\(disk.path)'")
        defer {
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            _ = try? admin.execute("DROP TABLESPACE IF EXISTS \(name)")
        }
        try admin.execute("CREATE DATABASE \(name) OWNER arbor TABLESPACE \(name)")
        let url = PostgresTestServer.url(base, database: name)

        var store = Store(backend: try await PostgresBackend.create(.init(url: url)))
        let (lastGood, batch) = try await Self.commitUntilFull(store, megabytes: 8)
        #expect(try await store.value(Task.self, id: batch[0].id) == nil)
        #expect(try await store.verify().isIntact)
        try await store.close()

        try disk.resize(megabytes: 128)
        store = Store(backend: try await PostgresBackend.open(.init(url: url)))
        let version = try await Self.commit(batch, to: store)
        #expect(version.parents == [lastGood.id])
        #expect(try await store.value(Task.self, id: batch[0].id) == batch[0])
        #expect(try await store.verify().isIntact)
        try await store.close()
    }
}
