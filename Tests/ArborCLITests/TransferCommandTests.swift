@testable import Arbor
@testable import ArborCLI
import Foundation
import Testing

/// `arbor exchange`, `sync`, `migrate` and `clone` from the command line.
@Suite struct TransferCommandTests {
    /// Runs `body` with a fresh folder for stores, removed afterwards.
    func withFolder(_ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-transfer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body(folder.path)
    }

    @Test func parsing() throws {
        let exchange = try #require(try ArborCommand.parseAsRoot(["exchange", "json:/a", "sqlite:/b", "--json", "--batch-size", "50"]) as? ExchangeCommand)
        #expect(exchange.stores.from == "json:/a" && exchange.stores.to == "sqlite:/b" && exchange.format.json && exchange.batchSize == 50)
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["exchange", "json:/a", "sqlite:/b", "--batch-size", "0"]) }
        let byDefault = try #require(try ArborCommand.parseAsRoot(["exchange", "json:/a", "lmdb:/b"]) as? ExchangeCommand)
        #expect(byDefault.batchSize == nil, "without --batch-size, the target's engine chooses")
        let sync = try #require(try ArborCommand.parseAsRoot(["sync", "json:/a", "lmdb:/b", "--strategy", "theirs"]) as? SyncCommand)
        #expect(sync.strategy == .theirs)
        let migrate = try #require(try ArborCommand.parseAsRoot(["migrate", "json:/a", "lmdb:/b", "--latest", "--no-verify"]) as? MigrateCommand)
        #expect(migrate.latest && !migrate.verify)
        #expect(try (ArborCommand.parseAsRoot(["migrate", "json:/a", "lmdb:/b"]) as? MigrateCommand)?.verify == true)
        #expect(try ArborCommand.parseAsRoot(["clone", "json:/a", "lmdb:/b"]) is CloneCommand)
        #expect(throws: (any Error).self) { try ArborCommand.parseAsRoot(["exchange", "json:/a"]) }
    }

    @Test func exchangeSyncMigrateAndCloneAcrossEngines() async throws {
        try await withFolder { folder in
            let (a, b, c, d) = ("sqlite:\(folder)/a.db", "json:\(folder)/b", "lmdb:\(folder)/c", "sqlite:\(folder)/d.db")
            _ = try await arbor("init", a)
            _ = try await arbor("init", b)
            for index in 0..<3 { _ = try await arbor("put", a, "Task", "t\(index)", "{\"title\": \"task \(index)\"}") }

            let first = try json(try await arbor("exchange", a, b, "--json"))
            #expect(first["versions"] == .number("3"))
            #expect(first["alreadyInSync"] == .bool(false))
            #expect(try await arbor("exchange", a, b).hasPrefix("already in sync"))

            // Concurrent edits with a conflict, then sync: one head on both sides.
            _ = try await arbor("put", a, "Task", "t0", "{\"title\": \"from a\"}")
            _ = try await arbor("put", b, "Task", "t0", "{\"title\": \"from b\"}")
            _ = try await arbor("put", b, "Task", "t9", "{\"title\": \"only b\"}")
            let synced = try await arbor("sync", a, b)
            #expect(synced.contains("1 conflict settled"))
            #expect(synced.contains("both stores are at"))
            let headsA = try await arbor("heads", a)
            #expect(try await arbor("heads", b) == headsA)
            #expect(lines(headsA).count == 1)

            // Migrate to LMDB (created), verified; again (as after a Ctrl-C once the copy was
            // done) it finds the copy finished, verifies it and copies nothing.
            let migrated = try json(try await arbor("migrate", b, c, "--json"))
            #expect(migrated["verified"] == .bool(true))
            #expect(migrated["heads"]?.elements.first?.stringValue.map { headsA.hasPrefix(String($0.prefix(12))) } == true)
            let again = try json(try await arbor("migrate", a, c, "--json"))
            #expect(again["verified"] == .bool(true) && again["objects"] == .number("0") && again["heads"] == migrated["heads"])
            #expect(try await arbor("get", c, "Task", "t9").contains("only b"))
            // A store with other versions is refused, and left as it was.
            _ = try await arbor("put", a, "Task", "t10", "{\"title\": \"newer\"}")
            let refused = try #require(await arborError("migrate", a, c))
            #expect(refused.code == .alreadyExists)
            #expect(try await arbor("heads", c) == headsA)

            // Clone and a latest-state migration.
            #expect(try await arbor("clone", c, d).contains("verified"))
            #expect(try await arbor("log", d) == (try await arbor("log", c)))
            let latest = try json(try await arbor("migrate", a, "json:\(folder)/e", "--latest", "--json"))
            #expect(latest["latestOnly"] == .bool(true) && latest["versions"] == .number("1"))
            #expect(lines(try await arbor("log", "json:\(folder)/e")).count == 1)
        }
    }

    /// A migration whose source moved on during it says how to catch up: an exchange for a copy
    /// of the whole history, another migration for a --latest copy, which shares no version
    /// with its source (an exchange would bring the whole history and leave two heads).
    @Test func aMovedSourceIsCaughtUpAsTheCopyAllows() {
        for latest in [false, true] {
            var report = MigrationReport(latestOnly: latest)
            report.verified = true
            report.sourceChangedSinceCopy = true
            let text = Rendering.lines(report).joined(separator: "\n")
            #expect(text.contains("arbor exchange FROM TO") == !latest && text.contains("migrate --latest into a new store") == latest, "\(text)")
        }
    }

    /// Two stores without versions sync to nothing, and say so (not "0 heads … conflicts").
    @Test func syncingTwoEmptyStoresSaysTheyAreEmpty() async throws {
        try await withFolder { folder in
            let (a, b) = ("json:\(folder)/a", "sqlite:\(folder)/b.db")
            _ = try await arbor("init", a)
            _ = try await arbor("init", b)
            #expect(try await arbor("sync", a, b).hasSuffix("both stores are empty\n"))
        }
    }

    @Test func manualSyncPrintsTheConflictsAndKeepsBothHeads() async throws {
        try await withFolder { folder in
            let (a, b) = ("json:\(folder)/a", "lmdb:\(folder)/b")
            _ = try await arbor("init", a)
            _ = try await arbor("put", a, "Task", "t", "{\"title\": \"base\"}")
            _ = try await arbor("clone", a, b)
            _ = try await arbor("put", a, "Task", "t", "{\"title\": \"left\"}")
            _ = try await arbor("put", b, "Task", "t", "{\"title\": \"right\"}")
            let output = try json(try await arborStopping("sync", a, b, "--strategy", "manual", "--json"))
            #expect(output["merge"]?["result"] == .string("conflicts"))
            #expect(output["heads"]?.elements.count == 2)
        }
    }

    @Test func badInputGetsClearErrors() async throws {
        try await withFolder { folder in
            let a = "json:\(folder)/a"
            _ = try await arbor("init", a)
            #expect(await arborError("exchange", a, "sqlite:\(folder)/missing.db")?.code == .notFound)
            #expect(await arborError("exchange", "lmdb:\(folder)/missing", a)?.code == .notFound)
            #expect(await arborError("migrate", a, "nonsense:x")?.code == .invalidInput)
            // A refused connection names the server without its password.
            let command = try #require(try ArborCommand.parseAsRoot(["exchange", a, "postgres://me:s3cret@127.0.0.1:1/db"]) as? ExchangeCommand)
            var output = ""
            do {
                try await command.execute(&output)
                Issue.record("expected a connection error")
            } catch {
                let message = command.errorMessage(for: error)
                #expect(message.contains("127.0.0.1") && !message.contains("s3cret"))
            }
        }
    }

    @Test func demoSyncsMigratesAndVerifies() async throws {
        try await withFolder { folder in
            var arguments = ["demo", "--folder", folder + "/demo"]
            var dropDatabase: (@Sendable () -> Void)?
            if PostgresConcurrencyTests.isEnabled {
                let (url, drop) = try ExchangeKillTests.makeStore(.postgres)
                arguments += ["--postgres", url]
                dropDatabase = drop
            }
            defer { dropDatabase?() }
            let command = try #require(try ArborCommand.parseAsRoot(arguments) as? DemoCommand)
            var output = ""
            try await command.execute(&output)
            #expect(output.contains("1 conflict settled"))
            #expect(output.contains("Both are at"))
            #expect(output.contains("Migrated the phone's store to LMDB"))
            #expect(output.contains("Migrated the phone's store to PostgreSQL") == PostgresConcurrencyTests.isEnabled)
            #expect(output.contains("the same content has the same hash"))
            let heads = try await arbor("heads", "lmdb:\(folder)/demo/archive.lmdb")
            #expect(try await arbor("heads", "sqlite:\(folder)/demo/phone.sqlite") == heads)
            #expect(try await arbor("heads", "json:\(folder)/demo/laptop") == heads)
            // The demo never writes over a folder that holds something.
            #expect(await arborError("demo", "--folder", folder + "/demo")?.code == .alreadyExists)
        }
    }

    @Test func demoInterruptedRemovesItsTemporaryFolder() async throws {
        try await withFolder { folder in
            // The demo is short: a run that ends before the signal lands proves nothing, so try again.
            for _ in 0..<5 {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: try ChildProcess.executable("arbor"))
                process.arguments = ["demo"]
                process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": folder]) { _, new in new }
                let output = Pipe(), errors = Pipe()
                process.standardOutput = output
                process.standardError = errors
                try process.run()
                // Its first line names the folder, which exists by then.
                var printed = Data()
                while !printed.contains(UInt8(ascii: "\n")) {
                    let chunk = output.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    printed += chunk
                }
                let scratch = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("arbor-demo-") }
                #expect(scratch.count == 1)
                process.interrupt()
                let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                _ = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("arbor-demo-") }.isEmpty)
                guard process.terminationStatus == 130 else {
                    #expect(process.terminationStatus == 0, "\(said)")
                    continue
                }
                #expect(said.contains("temporary stores were removed"))
                return
            }
            Issue.record("the demo finished before Ctrl-C five times over")
        }
    }

    @Test func progressLineShowsCountsRateAndETA() {
        let progress = TransferProgress(versionsDone: 3, versionsTotal: 10, objects: 12_345, bytes: 4_500_000, seconds: 2, fractionDone: 0.4)
        let text = progress.line
        #expect(text.contains("40%") && text.contains("versions 3/10") && text.contains("12345 objects"))
        #expect(text.contains("4.5 MB") && text.contains("2.2 MB/s") && text.contains("ETA 0:03"))
        var verifying = progress
        verifying.phase = .verifying
        #expect(verifying.line.contains("verifying") && !verifying.line.contains("versions") && verifying.line.contains("12345 objects"))
        // Drawn in one row of the terminal, however narrow, leaving its last column free.
        let drawn = "migrate " + text
        #expect(drawn.count > 79)
        #expect(ProgressBar.fitted(drawn, columns: 80) == String(drawn.prefix(79)))
        #expect(ProgressBar.fitted(drawn, columns: 200) == drawn)
        #expect(ProgressBar.fitted(drawn, columns: 0).count == 1)
    }
}
