import Foundation

/// The proof that a migration copied a store faithfully: same heads, every object intact and
/// from the source, and the index of every head complete.
struct MigrationCheck {
    let source: any Backend
    let target: any Backend
    let latestOnly: Bool

    func run(_ report: inout MigrationReport) async throws {
        let started = ContinuousClock.now
        let sourceState = try await Transfer.headState(of: source)
        let targetState = try await Transfer.headState(of: target)
        let targetVersions = try await versions(targetState.heads, in: target)
        var allowedNew = Set<Hash>()
        if latestOnly {
            let sourceRoots = try await versions(sourceState.heads, in: source).map(\.root).sorted()
            guard sourceRoots == targetVersions.map(\.root).sorted() else {
                throw failure("the target's heads have other index roots than the source's heads")
            }
            allowedNew = Set(targetState.heads)
            if let ref = targetState.ref { allowedNew.insert(ref) }
        } else {
            guard sourceState.ref == targetState.ref else {
                throw failure("the heads ref names \(targetState.ref.map(\.description) ?? "nothing") in the target but \(sourceState.ref.map(\.description) ?? "nothing") in the source")
            }
        }

        // Every object the target holds matches its hash and comes from the source.
        var objects = 0
        var bytes = 0
        let mayBeNew = allowedNew
        try await target.enumerateHashes(batchSize: Transfer.requestSize) { batch in
            // The source answers while the target's bytes are read and hashed: two engines,
            // often two processes, working at once.
            let asked = batch.filter { !mayBeNew.contains($0) }
            async let inSource = source.contains(asked)
            let fetched = try await target.get(batch)
            for hash in batch {
                guard let object = fetched[hash] else { throw failure("object \(hash) is listed but cannot be read") }
                guard Hash.of(object) == hash else { throw failure("object \(hash) does not match its hash") }
                bytes += object.count
            }
            let found = try await inSource
            if let foreign = asked.first(where: { !found.contains($0) }) {
                throw failure("object \(foreign) is not in the source")
            }
            objects += batch.count
        }

        // The index of every head is complete: verify's walk, stopped at its first damage.
        var walk = IntegrityWalk(backend: target, progress: nil)
        for version in targetVersions {
            try await walk.checkIndex(root: version.root, records: version.recordCount, version: version.id)
            if let damage = walk.report.damage.first {
                throw ArborError(damage.kind == .missing ? .missingObject : .corruptObject,
                                 "verification failed: object \(damage.hash), \(damage.detail)", backend: target.engineName, operation: "verify")
            }
        }
        report.verified = true
        report.objectsChecked = objects
        report.bytesChecked = bytes
        report.verifySeconds = started.secondsUntilNow
    }

    private func versions(_ ids: [Hash], in backend: any Backend) async throws -> [Version] {
        let objects = try await ObjectFetch.verified(ids, from: backend)
        return try ids.map { Version(id: $0, content: try Version.Content.decode(objects[$0] ?? [])) }
    }

    private func failure(_ message: String) -> ArborError {
        ArborError(.corruptObject, "verification failed: \(message)", backend: target.engineName, operation: "verify")
    }
}
