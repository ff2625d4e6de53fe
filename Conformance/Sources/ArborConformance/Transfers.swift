import Arbor
import Foundation

/// The checks the exchange cases and the matrix share: a history to move, and proof that two
/// stores hold the same history and the same records.
enum Transfers {
    /// The record types the store and merge cases commit.
    static let types = ["Attachment", "Kinds", "Note", "Person", "Task"]

    /// A history with a 1,000-record base, edits on two branches and their merge, a value tree
    /// with a blob, and a second head: what an exchange has to carry.
    @discardableResult
    static func history(_ store: Store, label: String = "") async throws -> [Hash] {
        var ids = try await ConformanceCase.referenceHistory(store)
        let tree = try await store.save(SuiteTask(
            id: "tree\(label)", title: "a tree", done: false,
            notes: [SuiteNote(id: "n\(label)", text: "note", attachments: [SuiteAttachment(id: "a\(label)", data: Data(repeating: 9, count: 5000))])]))
        let side = try await store.change(on: try await store.version(ids[0]), "side") { try $0.save(SuitePerson(id: "side\(label)", name: "side")) }
        ids += [tree.id, side.id]
        return ids
    }

    /// Fails unless `target` holds what `source` holds: the same `heads` ref (the same hash), the
    /// same versions reachable from it, and at every head the same records of every type.
    static func expectSameContent(_ context: ConformanceContext, _ source: Store, _ target: Store, _ what: String) async throws {
        let (sourceRef, targetRef) = try await context.step("reading both heads refs after \(what)") {
            (try await source.backend.ref(RefName.heads), try await target.backend.ref(RefName.heads))
        }
        try expectEqual(targetRef, sourceRef, "the hash of the heads ref after \(what) from \(source.backend.engineName) to \(target.backend.engineName)")
        let (sourceLog, targetLog) = try await context.step("reading both histories after \(what)") {
            (try await source.log().map(\.id), try await target.log().map(\.id))
        }
        try expectEqual(targetLog, sourceLog, "the versions reachable from the heads after \(what)")
        for head in try await source.heads() {
            for type in types {
                let (expected, actual) = try await context.step("reading the \(type) records of head \(head.id.abbreviated()) after \(what)") {
                    (try await source.records(ofType: type, at: head.id), try await target.records(ofType: type, at: head.id))
                }
                try expectEqual(actual, expected, "the \(type) records at head \(head.id.abbreviated()) after \(what)")
            }
        }
    }

    /// Gives `replica` a history and exchanges both ways, so that both stores hold the same
    /// versions; then deletes every fifth object of `damaged` and corrupts every fifth one after
    /// those (through the context where `damaged` is the adapter's store); a repair from
    /// `replica` must leave it intact with the same content. Then a version only `damaged` holds
    /// loses its index root: a repair must report it as missing and left so.
    static func checkRepair(_ context: ConformanceContext, damaged: Store, replica: Store, damagedIsAdapter: Bool, label: String = "") async throws {
        try await context.step("committing a history on \(replica.backend.engineName)") { try await history(replica, label: label) }
        try await context.step("exchanging between the two stores") {
            _ = try await replica.exchange(to: damaged)
            _ = try await damaged.exchange(to: replica)
        }
        let hashes = try await context.step("listing the objects") { try await damaged.backend.allHashes().sorted() }
        let deleted = stride(from: 0, to: hashes.count, by: 5).map { hashes[$0] }
        let corrupted = stride(from: 2, to: hashes.count, by: 5).map { hashes[$0] }
        try await context.step("deleting \(deleted.count) of \(hashes.count) objects") { try await damaged.backend.delete(deleted) }
        for (index, hash) in corrupted.enumerated() {
            let bytes = Array("damaged \(index)".utf8)
            if damagedIsAdapter {
                _ = try await context.corrupt(hash, with: bytes)
            } else {
                try await context.step("corrupting an object of \(damaged.backend.engineName)") {
                    try await damaged.backend.delete([hash])
                    try await damaged.backend.put([(hash, bytes)])
                }
            }
        }
        let before = try await context.step("verifying the damaged store") { try await damaged.verify() }
        try expect(!before.isIntact, "verify of a store with objects deleted and corrupted", expected: "damage", actual: "intact")
        let report = try await context.step("repairing it from \(replica.backend.engineName)") { try await damaged.repair(from: replica) }
        try expect(report.isIntact && report.unrepaired.isEmpty, "a repair from a replica that holds every object", expected: "an intact store",
                   actual: "\(report.verification.missingCount) missing, \(report.verification.corruptCount) corrupt: \(report.unrepaired.prefix(3).map(\.detail))")
        try expect(report.objectsWritten >= before.missingCount + before.corruptCount, "the objects a repair wrote",
                   expected: "at least the \(before.missingCount + before.corruptCount) found damaged", actual: "\(report.objectsWritten)")
        let after = try await context.step("verifying the repaired store") { try await damaged.verify() }
        try expect(after.isIntact, "verify after a repair", expected: "intact", actual: "\(after.missingCount) missing, \(after.corruptCount) corrupt")
        try await expectSameContent(context, replica, damaged, "a repair")
        let only = try await context.step("committing a version only the repaired store holds") {
            try await damaged.save(SuitePerson(id: "only\(label)", name: "only here"))
        }
        try await context.step("deleting its index root") { try await damaged.backend.delete([only.root]) }
        let left = try await context.step("repairing again") { try await damaged.repair(from: replica) }
        try expect(!left.isIntact && left.verification.missingCount == 1 && left.unrepaired.map(\.hash) == [only.root]
                       && left.unrepaired.allSatisfy { $0.kind == .missing && $0.detail.contains("does not hold") },
                   "a repair of an object the replica lacks", expected: "that object alone reported missing, as the replica does not hold it",
                   actual: "intact \(left.isIntact), \(left.unrepaired.map { "\($0.kind) \($0.hash.abbreviated()): \($0.detail)" })")
    }

    /// Exchanges a history from `source` to an empty `target`, then one more version, then
    /// nothing: the target ends with the same content and the last exchange finds it in sync.
    static func checkExchange(_ context: ConformanceContext, from source: Store, to target: Store) async throws {
        try await context.step("committing a history on \(source.backend.engineName)") { try await history(source) }
        let first = try await context.step("exchanging to \(target.backend.engineName)") { try await source.exchange(to: target) }
        try expect(first.versions > 0, "the first exchange", expected: "versions copied", actual: "\(first.versions)")
        try await expectSameContent(context, source, target, "an exchange")
        try await context.step("committing one more version") { _ = try await source.save(SuitePerson(id: "late", name: "late")) }
        let second = try await context.step("exchanging again") { try await source.exchange(to: target) }
        try expectEqual(second.versions, 1, "versions copied by an exchange after one more commit")
        try await expectSameContent(context, source, target, "a second exchange")
        let third = try await context.step("exchanging once more") { try await source.exchange(to: target) }
        try expect(third.alreadyInSync && third.objects == 0, "an exchange between stores in sync", expected: "nothing copied",
                   actual: "\(third.objects) objects copied, alreadyInSync \(third.alreadyInSync)")
    }

    /// Gives both stores a common history, edits each on its own (a conflict included), syncs
    /// `a` with `b`: both end with the same single head, the same hash, and the same records.
    static func checkSync(_ context: ConformanceContext, _ a: Store, _ b: Store) async throws {
        try await context.step("committing a history on \(a.backend.engineName) and exchanging it") {
            try await history(a)
            try await a.exchange(to: b)
        }
        try await context.step("editing both stores on their own") {
            _ = try await a.save(SuitePerson(id: "p1", name: "from \(a.backend.engineName)"))
            _ = try await a.save(SuiteTask(id: "only-a", title: "a", done: false))
            _ = try await b.save(SuitePerson(id: "p1", name: "from the other"))
            _ = try await b.save(SuiteTask(id: "only-b", title: "b", done: true))
        }
        let report = try await context.step("syncing") { try await a.sync(with: b) }
        let (aHeads, bHeads) = try await context.step("reading both heads") { (try await a.heads().map(\.id), try await b.heads().map(\.id)) }
        try expectEqual(aHeads.count, 1, "heads after a sync")
        try expectEqual(bHeads, aHeads, "the other store's heads after a sync")
        try expectEqual(report.heads, aHeads, "the heads the sync reports")
        try expectEqual(try await b.values(SuiteTask.self).map(\.id).filter { $0.hasPrefix("only") }, ["only-a", "only-b"], "edits of both sides after a sync")
        try await expectSameContent(context, a, b, "a sync")
    }

    /// Migrates a history from `source` (committed first when `commit`) into an empty `target`,
    /// verified: the same heads ref and content. Then only the latest state, into a memory store:
    /// heads with the same roots.
    static func checkMigration(_ context: ConformanceContext, from source: Store, to target: Store, commit: Bool = true) async throws {
        if commit { try await context.step("committing a history on \(source.backend.engineName)") { try await history(source) } }
        let report = try await context.step("migrating to \(target.backend.engineName)") { try await source.migrate(to: target) }
        try expect(report.verified, "a migration with verification", expected: "verified", actual: "not verified")
        try await expectSameContent(context, source, target, "a migration")
        // Run again on its finished copy, a migration verifies it and copies nothing; into a
        // store with other versions, it is refused.
        let again = try await context.step("migrating again onto the finished copy") { try await source.migrate(to: target) }
        try expect(again.verified && again.exchange.objects == 0, "a migration run again on its finished copy",
                   expected: "verified, nothing copied", actual: "verified \(again.verified), \(again.exchange.objects) objects copied")
        let other = context.store(MemoryBackend())
        try await context.step("committing to another store") { try await other.save(SuiteTask(id: "other", title: "other", done: false)) }
        try await expectError(.alreadyExists, "a migration into a store with other versions") { try await other.migrate(to: target) }
        let latest = context.store(MemoryBackend())
        let (latestReport, roots, latestRoots) = try await context.step("migrating the latest state only") {
            let report = try await source.migrate(to: latest, latestOnly: true)
            return (report, Set(try await source.heads().map(\.root)), Set(try await latest.heads().map(\.root)))
        }
        try expect(latestReport.verified, "a migration of the latest state with verification", expected: "verified", actual: "not verified")
        try expectEqual(latestRoots, roots, "the index roots of the heads after migrating the latest state")
    }
}
