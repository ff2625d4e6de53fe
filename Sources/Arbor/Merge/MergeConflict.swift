/// One conflict of a merge: what the common ancestor and the two sides hold.
///
/// For a property conflict, `property` names it and the values are that property's (`nil`:
/// absent). For a record deleted on one side and changed on the other, `property` is `nil` and
/// each value is the whole record's properties as a `.map` (`nil`: the record is absent).
/// A child both sides placed in different places (each moved it, or added it with the same key,
/// to different records or to different properties of one record) is a conflict on each
/// property one side put it in and the other did not, even where each property merges cleanly
/// by itself: the child can have one place. Moves on both sides that close a cycle of holders
/// (each side moved a record into the other's tree) are a conflict on each property a move of
/// the cycle put a child in.
public struct MergeConflict: Hashable, Sendable {
    public var key: RecordKey
    public var property: String?
    public var base: PropertyValue?
    public var ours: PropertyValue?
    public var theirs: PropertyValue?

    public init(key: RecordKey, property: String?, base: PropertyValue?, ours: PropertyValue?, theirs: PropertyValue?) {
        self.key = key
        self.property = property
        self.base = base
        self.ours = ours
        self.theirs = theirs
    }

    /// Conflicts sort by record key, then property name (record-level conflicts first).
    static func canonicalOrder(_ a: MergeConflict, _ b: MergeConflict) -> Bool {
        if a.key != b.key { return a.key < b.key }
        switch (a.property, b.property) {
        case (nil, nil): return false
        case (nil, _): return true
        case (_, nil): return false
        case (let x?, let y?): return utf8Less(x, y)
        }
    }
}
