import Arbor
@testable import ArborCLI
@testable import ArborLMDB
@testable import ArborSQLite
import Foundation
import Testing

/// `arbor compact`, and `--deltas` on the commands that move versions between stores.
@Suite struct CompactCommandTests {
    func withFolder(_ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-compact-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body(folder.path)
    }

    @Test func parsing() throws {
        let compact = try #require(try ArborCommand.parseAsRoot(["compact", "sqlite:/a", "--json"]) as? CompactCommand)
        #expect(compact.store.url == "sqlite:/a" && compact.format.json && !compact.space.vacuum)
        #expect(try (ArborCommand.parseAsRoot(["compact", "sqlite:/a", "--vacuum"]) as? CompactCommand)?.space.vacuum == true)
        #expect(try (ArborCommand.parseAsRoot(["gc", "sqlite:/a", "--vacuum"]) as? GarbageCollectCommand)?.space.vacuum == true)
        let exchange = try #require(try ArborCommand.parseAsRoot(["exchange", "json:/a", "lmdb:/b", "--deltas"]) as? ExchangeCommand)
        #expect(exchange.stores.deltas)
        #expect(try (ArborCommand.parseAsRoot(["exchange", "json:/a", "lmdb:/b"]) as? ExchangeCommand)?.stores.deltas == false)
        #expect(try (ArborCommand.parseAsRoot(["sync", "sqlite:/a", "lmdb:/b", "--deltas"]) as? SyncCommand)?.stores.deltas == true)
        #expect(try (ArborCommand.parseAsRoot(["migrate", "json:/a", "lmdb:/b", "--deltas"]) as? MigrateCommand)?.stores.deltas == true)
    }

    /// A store written whole is compacted: its nodes become deltas, every version reads as
    /// before and verifies; compacting again keeps nothing more; --vacuum (after compact or gc)
    /// shrinks a SQLite file, and is refused for LMDB. An exchange with --deltas keeps what it
    /// brings as deltas; an engine that cannot is refused.
    @Test func compactAndExchangeWithDeltas() async throws {
        try await withFolder { folder in
            let (whole, copy) = ("sqlite:\(folder)/a.db", "lmdb:\(folder)/b")
            _ = try await arbor("init", whole)
            for index in 0..<40 { _ = try await arbor("put", whole, "Task", String(format: "t%03d", index), "{\"title\": \"\(String(repeating: "x", count: 60))\"}") }
            for index in 0..<5 { _ = try await arbor("put", whole, "Task", String(format: "t%03d", index * 7), "{\"title\": \"edited \(index)\"}") }
            let before = try await arbor("get", whole, "Task", "t014")
            #expect(try await ExchangeKillTests.deltaCount(whole) == 0)

            let report = try json(try await arbor("compact", whole, "--json"))
            #expect(report["versions"] == .number("45"))
            let kept = try await ExchangeKillTests.deltaCount(whole)
            #expect(kept > 0)
            #expect(try await arbor("compact", whole).hasPrefix("compacted 45 versions"))
            #expect(try await ExchangeKillTests.deltaCount(whole) == kept, "compacting again keeps nothing more")
            #expect(try await arbor("get", whole, "Task", "t014") == before)
            #expect(try await arbor("verify", whole).hasPrefix("intact"))

            _ = try await arbor("init", copy, "--deltas")
            let exchanged = try json(try await arbor("exchange", whole, copy, "--deltas", "--json"))
            #expect(exchanged["versions"] == .number("45"))
            #expect(try await ExchangeKillTests.deltaCount(copy) > 0)
            #expect(exchanged["restatements"] != nil && exchanged["restatements"] != .number("0"))
            #expect(try await arbor("heads", copy) == (try await arbor("heads", whole)))

            let vacuumed = try json(try await arbor("compact", whole, "--vacuum", "--json"))
            guard case .number(let bytesBefore)? = vacuumed["bytesBefore"], case .number(let bytesAfter)? = vacuumed["bytesAfter"],
                  let beforeBytes = Int(bytesBefore), let afterBytes = Int(bytesAfter) else {
                Issue.record("no sizes in \(vacuumed)")
                return
            }
            #expect(afterBytes < beforeBytes, "the file shrank: \(beforeBytes) -> \(afterBytes) bytes")
            #expect(try await arbor("get", whole, "Task", "t014") == before)
            #expect(try await arbor("compact", whole, "--vacuum").contains("vacuumed: "))
            let collected = try json(try await arbor("gc", whole, "--grace", "0", "--vacuum", "--json"))
            #expect(collected["bytesAfter"] != nil && collected["removedObjects"] != nil && collected["logTruncated"] == .bool(true), "\(collected)")
            #expect(try await arbor("gc", whole, "--grace", "0", "--vacuum").contains("vacuumed: "))
            #expect { try ArborCommand.parseAsRoot(["gc", copy, "--vacuum"]) } throws: { ArborCommand.message(for: $0).contains("sqlite: files only") }
            #expect { try ArborCommand.parseAsRoot(["gc", "memory:", "--vacuum"]) } throws: {
                let message = ArborCommand.message(for: $0)
                return message.contains("sqlite: files only") && !message.contains("lmdb")
            }
            #expect { try ArborCommand.parseAsRoot(["compact", copy, "--vacuum"]) } throws: {
                ArborCommand.message(for: $0).contains("arbor migrate lmdb:OLD lmdb:NEW --deltas")
            }

            await #expect { try await arbor("compact", "memory:") } throws: { ($0 as? ArborError)?.code == .invalidInput }
            await #expect { try await arbor("compact", "json:\(folder)/a") } throws: { error in
                (error as? ArborError)?.code == .invalidInput && "\(error)".contains("[json] compact: compact keeps") && !"\(error)".contains("--deltas")
            }
            _ = try await arbor("init", "json:\(folder)/c")
            await #expect { try await arbor("exchange", whole, "json:\(folder)/c", "--deltas") } throws: {
                ($0 as? ArborError)?.code == .invalidInput && "\($0)".contains("--deltas")
            }
        }
    }

    /// `migrate` and `clone` with --deltas into a store that has versions (the wrong target, or
    /// the arguments swapped) refuse it and leave it in its own format, which earlier Arbor
    /// opens: opening it for deltas would have given it the delta format before the refusal. An
    /// empty store, or a new one, takes the delta format and keeps deltas.
    @Test func aMigrationWithDeltasRefusesAStoreWithVersionsWithoutChangingItsFormat() async throws {
        try await withFolder { folder in
            let source = "json:\(folder)/source"
            _ = try await arbor("init", source)
            for index in 0..<3 { _ = try await arbor("put", source, "Task", "t\(index)", "{\"title\": \"\(index)\"}") }
            let (sqlite, lmdb) = ("\(folder)/kept.db", "\(folder)/kept")
            for target in ["sqlite:" + sqlite, "lmdb:" + lmdb] {
                _ = try await arbor("init", target)
                _ = try await arbor("put", target, "Task", "own", "{\"title\": \"its own\"}")
                for command in ["migrate", "clone"] {
                    let error = await arborError(command, source, target, "--deltas")
                    #expect(error?.code == .alreadyExists, "\(command) into \(target): \(String(describing: error))")
                }
                #expect(try await arbor("get", target, "Task", "own").contains("its own"))
            }
            let sqliteBackend = try SQLiteBackend.open(.init(path: sqlite))
            #expect(try sqliteBackend.metaValue("version") == "1" && !sqliteBackend.hasDeltaColumns)
            try await sqliteBackend.close()
            let lmdbBackend = try LMDBBackend.open(.init(path: lmdb))
            #expect(try lmdbBackend.formatVersionRecorded() == "1")
            try await lmdbBackend.close()

            // An empty store is filled, in the delta format.
            let empty = "\(folder)/empty.db"
            _ = try await arbor("init", "sqlite:" + empty)
            _ = try await arbor("migrate", source, "sqlite:" + empty, "--deltas")
            let filled = try SQLiteBackend.open(.init(path: empty))
            #expect(try filled.metaValue("version") == "3")
            try await filled.close()
            #expect(try await arbor("get", "sqlite:" + empty, "Task", "t2").contains("2"))
        }
    }
}
