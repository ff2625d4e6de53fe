import ArborJSON
import ArborLMDB
import ArborSQLite
import Foundation
import Testing
@testable import Arbor

/// What every adapter that keeps its store at a path must do: survive a close and a reopen,
/// and refuse to create a store over an existing one.
@Suite struct OnDiskAdapterTests {
    enum Engine: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case json, sqlite, lmdb
        var testDescription: String { rawValue }

        func create(_ path: String) throws -> any Backend {
            switch self {
            case .json: try JSONBackend.create(.init(path: path))
            case .sqlite: try SQLiteBackend.create(.init(path: path))
            case .lmdb: try LMDBBackend.create(.init(path: path))
            }
        }

        func open(_ path: String) throws -> any Backend {
            switch self {
            case .json: try JSONBackend.open(.init(path: path))
            case .sqlite: try SQLiteBackend.open(.init(path: path))
            case .lmdb: try LMDBBackend.open(.init(path: path))
            }
        }

        /// A fresh path for a store, and a cleanup that removes all it may have created.
        func path() -> (String, @Sendable () -> Void) {
            let path = temporaryPath("\(rawValue)-store")
            return (path, { for suffix in ["", "-wal", "-shm", "-journal"] { removeItem(path + suffix) } })
        }
    }

    @Test(arguments: Engine.allCases) func createAndReopen(engine: Engine) async throws {
        let (path, cleanup) = engine.path()
        defer { cleanup() }
        let store = Store(backend: try engine.create(path))
        let version = try await store.save(Task(id: "t", title: "hello", done: false))
        try await store.close()
        let reopened = Store(backend: try engine.open(path), configuration: .init(nodeCacheCapacity: 0))
        #expect(try await reopened.head()?.id == version.id)
        #expect(try await reopened.value(Task.self, id: "t")?.title == "hello")
        try await reopened.close()
        await #expect { try await reopened.heads() } throws: { ($0 as? ArborError)?.code == .closed }
    }

    @Test(arguments: Engine.allCases) func createOnAnExistingStoreLeavesItIntact(engine: Engine) async throws {
        let (path, cleanup) = engine.path()
        defer { cleanup() }
        let store = Store(backend: try engine.create(path))
        let version = try await store.save(Task(id: "t", title: "kept", done: true))
        #expect { try engine.create(path) } throws: { error in
            (error as? ArborError)?.code == .alreadyExists && "\(error)".contains(path)
        }
        try await store.close()
        let reopened = Store(backend: try engine.open(path), configuration: .init(nodeCacheCapacity: 0))
        #expect(try await reopened.head()?.id == version.id)
        #expect(try await reopened.value(Task.self, id: "t")?.title == "kept")
        try await reopened.close()
    }
}
