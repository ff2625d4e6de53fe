import Arbor
import Foundation

extension SQLiteBackend {
    /// What ``SQLiteBackend/vacuum()`` did.
    public struct VacuumReport: Sendable {
        /// The bytes of the database and its write-ahead log, before and after.
        public var bytesBefore: Int
        public var bytesAfter: Int
        /// Whether the log was emptied at the end. `false` when another connection's read
        /// snapshot kept the checkpoint from finishing: the log then holds the rewritten pages
        /// (and the file may be larger than before) until a checkpoint can finish, at the latest
        /// when the last connection to the store closes.
        public var logTruncated: Bool
        public var seconds: Double
    }

    /// The bytes the store's files take: the database and its write-ahead log.
    public var fileBytes: Int {
        [configuration.path, configuration.path + "-wal"].reduce(0) { total, path in
            total + ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0)
        }
    }

    /// Gives the space the file holds free back to the file system: rewrites the database
    /// without its free pages (`VACUUM`), then checkpoints the write-ahead log and truncates it.
    /// SQLite keeps the pages a compaction into deltas (``Store/compactHistory(progress:)``) or a
    /// collection freed for later writes; this shrinks the file to what the data takes.
    ///
    /// Holds the store's write lock while it runs: writers of other processes wait for it, and
    /// fail once it has run longer than their busy timeout; readers go on, on the snapshot they
    /// hold. Needs free disk space about twice the size of the data: SQLite first builds a copy
    /// in its temporary directory (`SQLITE_TMPDIR`, `TMPDIR`, else `/var/tmp` or `/tmp`), then
    /// writes every page of it to the log beside the store. A vacuum that fails (a full disk, a
    /// writer that held the lock too long) leaves the data as it was (the log then truncated
    /// again, when it can be).
    ///
    /// - Complexity: O(*d*) for *d* bytes of data.
    @discardableResult
    public func vacuum() async throws -> VacuumReport {
        try checkWritable("vacuum")
        let start = ContinuousClock.now
        let before = fileBytes
        let truncated = try await onWriter("vacuum") { db in
            try db.endLeftoverTransaction()
            do {
                try db.execute("VACUUM")
            } catch {
                // What it wrote to the log before it failed goes, where it can.
                _ = try? db.checkpointTruncating()
                throw error
            }
            return try db.checkpointTruncating()
        }
        let elapsed = ContinuousClock.now - start
        return VacuumReport(
            bytesBefore: before, bytesAfter: fileBytes, logTruncated: truncated,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}
