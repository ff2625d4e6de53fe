import Arbor
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A store another user owns, opened by `arbor` running as `nobody`: the error says that access
/// was refused, not that there is no store (a folder this user cannot read hides its files, and
/// SQLite's own message, "unable to open database file", names no cause). Needs root, to make
/// the stores and to run the command as `nobody`; elsewhere it says so and returns.
@Suite struct AnotherUsersStoreTests {
    /// Runs the built `arbor` as `nobody`; its exit status and standard error, or `nil` if this
    /// machine cannot (not root, no `runuser` or `nobody`, or a build folder `nobody` cannot reach).
    static func arborAsNobody(_ arguments: [String]) throws -> (status: Int32, errors: String)? {
        guard getuid() == 0, getpwnam("nobody") != nil else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["runuser", "-u", "nobody", "--", try ChildProcess.executable("arbor")] + arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // 126/127: the shell could not run it (no runuser, or a path nobody cannot reach).
        guard ![126, 127].contains(process.terminationStatus) else { return nil }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// A new folder everyone may enter and read, for stores this (root) user makes.
    static func storeOfRoot() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arbor-other-user-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        return folder
    }

    @Test(arguments: ["json", "sqlite", "lmdb"]) func anotherUsersStoreIsRefusedAccessNotCalledMissing(scheme: String) async throws {
        let folder = try Self.storeOfRoot()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The adapters make their folders and files readable by their owner only.
        let url = "\(scheme):\(folder)/store"
        _ = try await arbor("init", url)
        _ = try await arbor("put", url, "Task", "t", #"{"title": "private"}"#)
        guard let (status, errors) = try Self.arborAsNobody(["heads", url]) else {
            print("⚠️  test skipped: it runs arbor as nobody, which needs root and runuser")
            return
        }
        #expect(status != 0)
        #expect(errors.contains("Permission denied") && errors.contains("another user"), "\(errors)")
        #expect(!errors.contains("missing") && !errors.contains("does not exist"), "\(errors)")
    }

    /// A SQLite store this user may read, in a folder it may not write: WAL mode needs a shared
    /// memory file beside the database, which cannot be made. SQLite says "unable to open
    /// database file" for that as for a missing file; the system's error tells them apart.
    @Test func aReadableSQLiteStoreInAFolderThatCannotBeWrittenIsRefusedAccess() async throws {
        let folder = try Self.storeOfRoot()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let url = "sqlite:\(folder)/store.db"
        _ = try await arbor("init", url)
        _ = try await arbor("put", url, "Task", "t", #"{"title": "shared"}"#)
        #expect(chmod(folder + "/store.db", 0o644) == 0)
        for suffix in ["-wal", "-shm"] { unlink(folder + "/store.db" + suffix) }
        guard let (status, errors) = try Self.arborAsNobody(["heads", url]) else {
            print("⚠️  test skipped: it runs arbor as nobody, which needs root and runuser")
            return
        }
        #expect(status != 0)
        #expect(errors.contains("Permission denied"), "\(errors)")
        #expect(!errors.contains("no store") && !errors.contains("does not exist"), "\(errors)")
    }
}
