import Arbor

extension Rendering {
    /// The lines `arbor merge` prints for `outcome` (`nil`: an empty store).
    static func lines(_ outcome: MergeOutcome?) -> [String] {
        switch outcome {
        case nil:
            return ["nothing to merge: the store has no versions"]
        case .fastForward(let version)?:
            return ["\(version.id.abbreviated()) is the only head: nothing to merge"]
        case .merged(let version, let report)?:
            var lines = ["\(version.id.abbreviated()) merged \(version.parents.map { $0.abbreviated() }.joined(separator: " and ")): "
                         + "\(count(report.clean.count, "record", "records")) merged cleanly, \(count(report.resolved.count, "conflict", "conflicts")) settled"]
            lines += report.clean.map { "  = \(key($0))" }
            lines += report.resolved.map { "  " + line($0) }
            return lines
        case .conflicts(let conflicts)?:
            return ["\(count(conflicts.count, "conflict", "conflicts")); nothing committed"] + conflicts.map { "  " + line($0) }
        }
    }

    /// `! TYPE/ID PROPERTY: base …, ours …, theirs …`.
    static func line(_ conflict: MergeConflict) -> String {
        let name = conflict.property.map { " " + printable($0) } ?? ""
        return "! \(key(conflict.key))\(name): base \(text(conflict.base)), ours \(text(conflict.ours)), theirs \(text(conflict.theirs))"
    }

    /// `{"type", "id", "property", "base", "ours", "theirs"}`, absent members left out.
    static func json(_ conflict: MergeConflict) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("type", .string(conflict.key.type)), ("id", .string(conflict.key.id))]
        if let property = conflict.property { members.append(("property", .string(property))) }
        for (name, value) in [("base", conflict.base), ("ours", conflict.ours), ("theirs", conflict.theirs)] {
            if let value { members.append((name, JSONValue(propertyValue: value))) }
        }
        return .object(members)
    }

    /// The `--json` document of `arbor merge`.
    static func json(_ outcome: MergeOutcome?) -> JSONValue {
        switch outcome {
        case nil:
            return .object([("result", .string("empty"))])
        case .fastForward(let version)?:
            return .object([("result", .string("fast-forward")), ("version", .string(version.id.hex))])
        case .merged(let version, let report)?:
            var members: [(key: String, value: JSONValue)] = [("result", .string("merged")), ("version", .string(version.id.hex))]
            if let ancestor = report.ancestor { members.append(("ancestor", .string(ancestor.hex))) }
            members.append(("clean", .array(report.clean.map { .object([("type", .string($0.type)), ("id", .string($0.id))]) })))
            members.append(("conflicts", .array(report.resolved.map(json))))
            return .object(members)
        case .conflicts(let conflicts)?:
            return .object([("result", .string("conflicts")), ("conflicts", .array(conflicts.map(json)))])
        }
    }
}
