import Foundation

/// How far a transfer (exchange, sync or migration) has come; handed to a progress handler as
/// it goes, a few times a second at most.
public struct TransferProgress: Sendable {
    /// What a transfer is doing.
    public enum Phase: String, Sendable {
        /// Copying versions and objects (the counts are of objects written).
        case copying
        /// A migration proving its copy (the counts are of the target's objects checked).
        case verifying
    }

    /// ``Phase/copying``, but for a migration's verification.
    public var phase: Phase
    /// Versions copied so far, and how many the transfer copies in all.
    public var versionsDone: Int
    public var versionsTotal: Int
    /// Objects and bytes written to the target so far (checked, while verifying).
    public var objects: Int
    public var bytes: Int
    /// Seconds since the transfer (or its verification) started.
    public var seconds: Double
    /// An estimate of the part done, from 0 to 1: versions done, plus the records of the
    /// current version already copied or found present.
    public var fractionDone: Double

    public init(
        versionsDone: Int, versionsTotal: Int, objects: Int, bytes: Int, seconds: Double, fractionDone: Double, phase: Phase = .copying
    ) {
        self.phase = phase
        self.versionsDone = versionsDone
        self.versionsTotal = versionsTotal
        self.objects = objects
        self.bytes = bytes
        self.seconds = seconds
        self.fractionDone = fractionDone
    }

    /// Bytes written (or checked) per second so far.
    public var bytesPerSecond: Double { seconds > 0 ? Double(bytes) / seconds : 0 }

    /// Seconds left at the rate so far, once there is enough to go on.
    public var secondsRemaining: Double? {
        guard fractionDone > 0.01, fractionDone < 1, seconds > 0.5 else { return nil }
        return seconds * (1 - fractionDone) / fractionDone
    }
}

/// A closure that receives progress reports; called from the transferring task.
public typealias TransferProgressHandler = @Sendable (TransferProgress) -> Void

/// What an exchange did.
public struct ExchangeReport: Sendable, Hashable {
    /// Versions the target lacked and received.
    public var versions: Int = 0
    /// Objects written to the target: index nodes, blobs and commits (not the head set the
    /// target's heads ref is then swapped to).
    public var objects: Int = 0
    /// Bytes written to the target.
    public var bytes: Int = 0
    /// Requests that asked the target which objects it already holds (not every request: an
    /// exchange also reads refs, commits and objects, and writes batches).
    public var rounds: Int = 0
    /// Whether the two stores had the same heads already; then nothing was read or written.
    public var alreadyInSync = false
    /// The target's heads afterwards.
    public var heads: [Hash] = []
    public var seconds: Double = 0
    /// Of ``seconds``, the time the target spent storing batches of objects (one transaction
    /// each on the transactional engines). Writes overlap the reading of the next objects, so
    /// this is the target engine's share, not a part to subtract.
    public var writeSeconds: Double = 0
    /// Index nodes the target was asked to keep as deltas against the nodes that replaced
    /// them, in the versions it received: none unless it keeps deltas
    /// (``Backend/acceptsRestatements``).
    public var restatements: Int = 0
}
