import ArborPostgres
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// Sixteen clients, each with a store of its own, syncing with one PostgreSQL hub for a bounded
/// time, each committing edits of its own and edits of one record all of them change: at the end
/// every client and the hub have one head, the same one, and no commit is lost.
///
/// `ARBOR_LOAD_SECONDS` sets how long the clients run (default 6).
@Suite struct LoadTests {
    static let seconds = Double(ProcessInfo.processInfo.environment["ARBOR_LOAD_SECONDS"] ?? "") ?? 6

    struct Shared: Storable, Equatable {
        var id: String
        var owner: String
        var counter: Int
    }

    @Test(.enabled(if: PostgresTestServer.isEnabled), .timeLimit(.minutes(10)))
    func sixteenClientsSyncingWithOnePostgresHubConverge() async throws {
        let (url, drop) = try PostgresTestServer.makeDatabase()
        defer { drop() }
        try await PostgresBackend.create(.init(url: url)).close()
        let clients = 16
        let deadline = ContinuousClock.now + .seconds(Self.seconds)
        let stores = (0..<clients).map { Store(backend: MemoryBackend(), configuration: .init(replica: "client\($0)")) }

        // Each client: commit its own record and an edit of the shared one, then sync; repeat.
        let outcomes = try await withThrowingTaskGroup(of: (commits: [Hash], syncs: Int).self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    let hub = Store(backend: try await PostgresBackend.open(.init(url: url, maximumConnections: 2)), configuration: .init(replica: "hub\(index)"))
                    var commits = [Hash]()
                    var syncs = 0
                    var round = 0
                    // At least one round each, however late a client starts on a loaded machine.
                    repeat {
                        var changes = ChangeSet()
                        try changes.save(Shared(id: "own-\(index)", owner: "client\(index)", counter: round))
                        try changes.save(Shared(id: "hot", owner: "client\(index)", counter: round))
                        commits.append(try await store.commit(changes, message: "client \(index) round \(round)").id)
                        try await store.sync(with: hub)
                        syncs += 1
                        round += 1
                    } while ContinuousClock.now < deadline
                    try await hub.close()
                    return (commits, syncs)
                }
            }
            return try await group.reduce(into: [(commits: [Hash], syncs: Int)]()) { $0.append($1) }
        }

        // Two settling rounds: the first gathers everything on the hub, the second brings it back.
        let hub = Store(backend: try await PostgresBackend.open(.init(url: url)), configuration: .init(replica: "hub"))
        for _ in 0..<2 {
            for store in stores { try await store.sync(with: hub) }
        }
        let hubHeads = try await hub.heads().map(\.id)
        #expect(hubHeads.count == 1)
        for store in stores {
            #expect(try await store.heads().map(\.id) == hubHeads)
        }
        let history = Set(try await hub.log().map(\.id))
        let committed = outcomes.flatMap(\.commits)
        let lost = committed.filter { !history.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) of \(committed.count) commits lost")
        #expect(try await hub.values(Shared.self).count == clients + 1)
        #expect(try await hub.verify().isIntact)
        let syncs = outcomes.reduce(0) { $0 + $1.syncs }
        print("load: \(clients) clients for \(Self.seconds) s: \(committed.count) commits, \(syncs) syncs with the PostgreSQL hub, \(history.count) versions on the hub, one head everywhere, none lost")
        try await hub.close()
    }
}
