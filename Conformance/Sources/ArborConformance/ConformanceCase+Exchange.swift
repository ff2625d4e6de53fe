import Arbor

extension ConformanceCase {
    /// Exchange, sync and migration between the adapter and the in-memory reference adapter, in
    /// both directions: the same heads hashes and records on both sides afterwards.
    static let exchangeCases: [ConformanceCase] = [
        ConformanceCase(.exchange, "to-reference", "an exchange to the in-memory reference adapter carries every version, with the same heads hash and records") { context in
            try await Transfers.checkExchange(context, from: context.store(), to: context.store(MemoryBackend()))
        },
        ConformanceCase(.exchange, "from-reference", "an exchange from the in-memory reference adapter carries every version, with the same heads hash and records") { context in
            try await Transfers.checkExchange(context, from: context.store(MemoryBackend()), to: context.store())
        },
        ConformanceCase(.exchange, "sync-with-reference", "after edits on both sides, a sync with the reference adapter leaves one head, the same on both") { context in
            try await Transfers.checkSync(context, context.store(), context.store(MemoryBackend(), replica: "reference"))
        },
        ConformanceCase(.exchange, "migrate-with-reference", "a verified migration to and from the reference adapter gives the same heads hash and records") { context in
            try await Transfers.checkMigration(context, from: context.store(MemoryBackend()), to: context.store())
            try await Transfers.checkMigration(context, from: context.store(), to: context.store(MemoryBackend()), commit: false)
        },
        ConformanceCase(.exchange, "repair-with-reference", "a store with a fifth of its objects deleted and others corrupted is repaired from the in-memory reference adapter, and the reference from it, to the same heads and records; an object no replica holds is reported, not invented") { context in
            // The reference is damaged first: the second check leaves the adapter's store damaged.
            try await Transfers.checkRepair(context, damaged: context.store(MemoryBackend()), replica: context.store(), damagedIsAdapter: false)
            try await Transfers.checkRepair(context, damaged: context.store(), replica: context.store(MemoryBackend()), damagedIsAdapter: true, label: "-2")
        },
    ]
}
