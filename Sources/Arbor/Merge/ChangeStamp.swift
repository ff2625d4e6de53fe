/// When a record changed on one side of a merge: the commit time, ties broken by the version id.
struct ChangeStamp: Comparable {
    var time: HybridTime
    var id: Hash

    static func < (a: ChangeStamp, b: ChangeStamp) -> Bool {
        a.time != b.time ? a.time < b.time : a.id < b.id
    }
}
