import Foundation

/// The names and values of the refs that mark work in flight and name no object: exchanges'
/// claims (``TransferReservation``, `transfers/`) and collections' sweep markers
/// (``SweepMarker``, `sweeps/`). A name is `<prefix><start>-<id>`, the start in milliseconds
/// since 1970 and the id hexadecimal (FORMAT.md section 8.1); the value is the hash of the name.
enum StampedRef {
    /// The name of the ref with `prefix` for `id`, started at `date`.
    static func name(_ prefix: String, id: String, startedAt date: Date) -> String {
        "\(prefix)\(milliseconds(date))-\(id)"
    }

    /// A fresh id: 64 random bits in hexadecimal.
    static func newID() -> String { String(UInt64.random(in: 0...UInt64.max), radix: 16) }

    /// The start (milliseconds since 1970) and id in `ref`, a name with `prefix`; `nil` for one
    /// that does not parse.
    static func parts(of ref: String, prefix: String) -> (start: Int64, id: String)? {
        let parts = ref.dropFirst(prefix.count).split(separator: "-")
        guard parts.count == 2, let start = Int64(parts[0]) else { return nil }
        return (start, String(parts[1]))
    }

    /// How long before `now` `ref` (a name with `prefix`) started: negative when its maker's
    /// clock is ahead; `nil` for a name that does not parse.
    static func ageMilliseconds(of ref: String, prefix: String, now: Date) -> Int64? {
        parts(of: ref, prefix: prefix).map { milliseconds(now) - $0.start }
    }

    /// What such a ref holds: a hash of its name, naming no object (every object begins with
    /// the format marker, and a name never does).
    static func value(of ref: String) -> Hash { Hash.of(Array(ref.utf8)) }

    /// Whether `ref`, holding `hash`, is such a ref under `prefix`: one there holding anything
    /// else is an ordinary ref.
    static func isStamped(_ ref: String, holding hash: Hash, prefix: String) -> Bool {
        ref.hasPrefix(prefix) && hash == value(of: ref)
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    /// `duration` in whole milliseconds, as ages are counted.
    static func milliseconds(_ duration: Duration) -> Int64 { duration.components.seconds * 1000 }
}
