import Arbor
import Foundation

extension SQLiteBackend {
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
    /// Holds the store's write lock while it runs: writers of other processes wait for it, up
    /// to the busy timeout, then fail; readers go on, on the snapshot they hold. Needs free disk
    /// space about the size of the data, for SQLite's temporary copy. A vacuum that fails (a full
    /// disk, a writer that held the lock too long) leaves the file as it was. A reader that holds
    /// a snapshot meanwhile keeps the log from being truncated: it shrinks at a later checkpoint.
    ///
    /// - Returns: the bytes of the database and its log, before and after.
    /// - Complexity: O(*d*) for *d* bytes of data.
    @discardableResult
    public func vacuum() async throws -> (before: Int, after: Int) {
        try checkWritable("vacuum")
        let before = fileBytes
        try await onWriter("vacuum") { db in
            try db.execute("VACUUM")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        return (before, fileBytes)
    }
}
