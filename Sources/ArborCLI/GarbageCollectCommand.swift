import Arbor
import ArgumentParser
import Foundation

/// `arbor gc URL [--grace SECONDS] [--vacuum] [--json]`: removes what no ref reaches.
public struct GarbageCollectCommand: StoreCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Remove the objects no ref reaches, safely while others commit.",
        discussion: """
            Marks everything the refs reach (a damaged store is refused: run arbor verify), waits the grace \
            period, marks again (keeping what commits in flight wrote meanwhile), then removes the rest in \
            batches, writing back anything a commit that landed during the sweep re-used. Safe while other \
            processes commit, as long as no commit takes longer than the grace period; an exchange into the \
            store that runs over a second claims it while it copies, and gc removes nothing meanwhile \
            (stoppedForExchange: run gc again later; one still in flight after ten minutes has all that gc removed \
            written back, restoredForExchange); that needs a grace period over 26 seconds. SQLite and \
            LMDB keep the space freed for later writes: --vacuum then shrinks a sqlite: file to what its data \
            takes (holding the write lock meanwhile: other processes' commits wait for it, and fail past their \
            busy timeout; it is skipped while an exchange is in flight). With --json: {"reachableObjects", "removedObjects", \
            "removedBytes", "keptLate", "rescued", "stoppedForExchange", "restoredForExchange", "seconds"}, and with --vacuum \
            {"bytesBefore", "bytesAfter", "logTruncated", "vacuumSeconds"} (or {"vacuumSkipped"}) too.
            """)

    @OptionGroup public var store: StoreOptions

    @Option(help: ArgumentHelp("Seconds to wait between finding garbage and removing it.", valueName: "seconds"))
    public var grace: Double = 60

    @OptionGroup public var format: OutputOptions

    @OptionGroup public var space: VacuumOptions

    public init() {}

    public func validate() throws {
        try space.check(store)
        // Bounded so that the milliseconds fit an Int64 (a billion seconds is over 31 years).
        guard grace >= 0, grace <= 1e9 else { throw ValidationError("--grace must be a number of seconds from 0 to 1000000000") }
    }

    public func run() async throws {
        // The first Ctrl-C stops the collection where it is safe to: before its sweep, at once;
        // during it, after the batch in hand, a grace period later, once what writers re-used
        // meanwhile is written back. A second stops the process at once.
        let work = Task { try await executeOnStandardOutput() }
        let watch = Interruption.cancelOnInterrupt(work, saying: Self.stoppingMessage)
        defer { watch.cancel() }
        try await work.value
    }

    private static let stoppingMessage: StaticString = "\nstopping: a collection that has begun removing waits its grace period for writers that found removed objects present, and writes those back (with an exchange claiming the store, all it removed); Ctrl-C again to stop at once (then run arbor verify)\n"

    public func execute(_ output: inout some TextOutputStream) async throws {
        let (report, vacuumed): (GarbageCollectionReport, VacuumOptions.Outcome?)
        do {
            (report, vacuumed) = try await store.withStore { store in
                let report = try await store.collectGarbage(gracePeriod: .milliseconds(Int64((grace * 1000).rounded())))
                // An exchange writing into the store would wait for the vacuum's lock, and may fail.
                let busy = report.stoppedForExchange ? "an exchange into the store was in flight; run arbor gc --vacuum again once it is done" : nil
                return (report, await space.run(on: store, skipping: busy))
            }
        } catch is CancellationError {
            var errors = StandardStream.error
            print("interrupted: the collection stopped safely; what it removed stays removed, and what a commit landing meanwhile used was written back. Run arbor gc again to finish.", to: &errors)
            throw ExitCode(130)
        }
        if format.json {
            print(JSONValue.object([
                ("reachableObjects", .number(String(report.reachableObjects))), ("removedObjects", .number(String(report.removedObjects))),
                ("removedBytes", .number(String(report.removedBytes))), ("keptLate", .number(String(report.keptLate))),
                ("rescued", .number(String(report.rescued))), ("stoppedForExchange", .bool(report.stoppedForExchange)),
                ("restoredForExchange", .number(String(report.restoredForExchange))),
                ("seconds", Rendering.number(report.seconds)),
            ] + VacuumOptions.fields(vacuumed)).serialized(pretty: true), to: &output)
        } else {
            print("removed \(Rendering.count(report.removedObjects, "object", "objects")) (\(ProgressBar.bytes(report.removedBytes))); "
                  + "kept \(report.reachableObjects) reachable, \(report.keptLate) written by commits in flight, "
                  + "\(report.rescued) written back; \(Rendering.seconds(report.seconds))", to: &output)
            for line in VacuumOptions.lines(vacuumed) { print(line, to: &output) }
            if report.stoppedForExchange {
                print("an exchange into the store was in flight, so the sweep stopped: run arbor gc again once it is done", to: &output)
            }
            if report.restoredForExchange > 0 {
                print("it was still in flight when the collection stopped waiting for it: the \(Rendering.count(report.restoredForExchange, "object", "objects")) removed were written back, unchecked", to: &output)
            }
        }
        try VacuumOptions.throwIfFailed(vacuumed)
    }
}
