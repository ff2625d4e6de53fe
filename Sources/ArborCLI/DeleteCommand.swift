import Arbor
import ArgumentParser

/// `arbor delete URL TYPE ID [-m MESSAGE]`: commits a version without one record and the
/// records it owns.
public struct DeleteCommand: StoreCommand {
    public static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete a record and the records it owns, committing a new version.",
        discussion: "Fails if the record does not exist at HEAD. Prints the new version's abbreviated hash and what was removed.")

    @OptionGroup public var store: StoreOptions

    @Argument(help: "The record's type name.")
    public var type: String

    @Argument(help: "The record's id.")
    public var id: String

    @OptionGroup public var commit: CommitOptions

    public init() {}

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let key = RecordKey(type: type, id: id)
        let (version, changes) = try await store.withStore(configuration: commit.storeConfiguration) { store in
            let base: Version?
            if let parent = commit.parent { base = try await store.resolve(parent) } else { base = try await store.head() }
            guard let head = base else {
                throw ArborError(.notFound, "no \(key): the store has no versions yet")
            }
            guard try await store.record(key, at: head.id) != nil else {
                throw ArborError(.notFound, "no \(key) at \(head.id.abbreviated())")
            }
            var changeSet = ChangeSet()
            changeSet.delete(key)
            // Built on the head just checked, so the record is known to exist in the parent.
            let version = try await store.commit(changeSet, message: commit.message ?? "delete \(key)", parents: [head.id])
            return (version, try await store.changes(in: version.id))
        }
        var summary = "\(version.id.abbreviated()) deleted \(Rendering.key(key))"
        let owned = changes.filter { $0.key != key }.count
        if owned > 0 { summary += " and \(Rendering.count(owned, "owned record", "owned records"))" }
        print(summary, to: &output)
    }
}
