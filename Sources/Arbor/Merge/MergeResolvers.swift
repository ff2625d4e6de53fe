/// Per-type overrides of the merge strategy: a fixed strategy, or a resolver the application
/// writes in Swift, given the ancestor's, our and their value of its own type.
///
/// ```swift
/// var resolvers = MergeResolvers()
/// resolvers.register(Task.self) { base, ours, theirs in
///     var merged = ours
///     merged.done = ours.done || theirs.done
///     return merged
/// }
/// ```
///
/// A resolver is called for records of its type with property conflicts on both sides; a record
/// deleted on one side and changed on the other is settled by the merge's strategy. Resolvers
/// must be deterministic (pure functions of their inputs), or replicas will not converge. An
/// explicit ``MergeStrategy/manual`` merge ignores every override.
public struct MergeResolvers: Sendable {
    /// Resolves the record `key` from the roots of the ancestor (`nil`: none), ours and theirs,
    /// returning the merged value's records, root first.
    typealias Resolve = @Sendable (_ store: Store, _ key: RecordKey, _ base: Hash?, _ ours: Hash, _ theirs: Hash) async throws -> [Record]

    enum Rule: Sendable {
        case strategy(MergeStrategy)
        case resolver(Resolve)
    }

    private var rules = [String: Rule]()

    public init() {}

    /// Whether a type's conflicts go to one side (``MergeStrategy/ours`` or ``MergeStrategy/theirs``):
    /// a sync then tells the sides apart as it does for those strategies.
    var takesSides: Bool {
        rules.values.contains { rule in
            if case .strategy(let strategy) = rule { [MergeStrategy.ours, .theirs].contains(strategy) } else { false }
        }
    }

    /// Records of `type` settle their conflicts with `strategy`.
    public mutating func register<Value: Storable>(_ type: Value.Type, strategy: MergeStrategy) {
        rules[Value.typeName] = .strategy(strategy)
    }

    /// Records of `type` with conflicting properties are merged by `resolve`, given the
    /// ancestor's value (`nil` if it had none), ours and theirs, each with its whole value tree.
    /// The value returned (with the same id) replaces the record and its children, but for a
    /// child that one side moved from it to another record: as for any merged record, an array
    /// of the value lets that child go, so that it has one owner.
    public mutating func register<Value: Storable>(
        _ type: Value.Type, _ resolve: @escaping @Sendable (_ base: Value?, _ ours: Value, _ theirs: Value) throws -> Value
    ) {
        rules[Value.typeName] = .resolver { store, key, base, ours, theirs in
            guard let ourValue = try await store.value(Value.self, key: key, root: ours),
                  let theirValue = try await store.value(Value.self, key: key, root: theirs) else {
                throw ArborError(.invalidInput, "the resolver for \(Value.typeName) needs \(key) on both sides")
            }
            let baseValue = try await base.asyncMap { try await store.value(Value.self, key: key, root: $0) } ?? nil
            let records = try RecordEncoder.records(of: try resolve(baseValue, ourValue, theirValue))
            guard records.first?.key == key else {
                throw ArborError(.invalidInput, "the resolver for \(Value.typeName) returned a value other than \(key)")
            }
            return records
        }
    }

    func rule(for typeName: String) -> Rule? { rules[typeName] }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
