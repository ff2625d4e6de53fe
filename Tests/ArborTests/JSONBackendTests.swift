import ArborJSON
import Foundation
import Synchronization
import Testing
@testable import Arbor

/// The JSON adapter: a folder a person can read, that reports damage instead of crashing.
@Suite struct JSONBackendTests {
    func withStore(_ body: (String, Store, Version) async throws -> Void) async throws {
        let path = temporaryPath("jsonstore")
        defer { removeItem(path) }
        let store = Store(backend: try JSONBackend.create(.init(path: path)))
        let version = try await store.save(Task(id: "t", title: "hello", done: false, notes: [Note(id: "n", text: "note")]))
        try await body(path, store, version)
    }

    func objectFile(_ path: String, _ hash: Hash) -> String { "\(path)/objects/\(hash.hex.prefix(2))/\(hash.hex).json" }

    func fresh(_ path: String) throws -> Store { Store(backend: try JSONBackend.open(.init(path: path)), configuration: .init(nodeCacheCapacity: 0)) }

    /// The lock file deleted (by hand, as a "stale" lock) while a store has it open, then made
    /// and locked by another process: a swap of the open store waits for that process, as it
    /// would have for the old file's holder, rather than lock the deleted file and swap beside
    /// it. Once that process lets go, the swap goes through, and the lock file is there again.
    @Test func aLockFileReplacedUnderAnOpenStoreStillExcludesOthers() async throws {
        let path = temporaryPath("jsonstore")
        defer { removeItem(path) }
        let store = Store(backend: try JSONBackend.create(.init(path: path, lockTimeout: .milliseconds(300))))
        let first = try await store.save(Task(id: "t", title: "first", done: false))
        try FileManager.default.removeItem(atPath: path + "/refs.lock")
        let other = open(path + "/refs.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(other >= 0 && flock(other, LOCK_EX) == 0)
        await #expect { try await store.save(Task(id: "t", title: "second", done: false)) } throws: {
            ($0 as? ArborError)?.code == .io && "\($0)".contains("could not take the lock")
        }
        #expect(try await store.heads().map(\.id) == [first.id])
        flock(other, LOCK_UN)
        close(other)
        let second = try await store.save(Task(id: "t", title: "second", done: false))
        #expect(try await store.heads().map(\.id) == [second.id])
        #expect(FileManager.default.fileExists(atPath: path + "/refs.lock"))
    }

    /// Swaps waiting for another process's lock on the refs wait off Swift's cooperative pool:
    /// while four of them wait, other tasks of the process still run (they used to block every
    /// pool thread, so nothing else ran until the lock was let go).
    @Test func swapsWaitingForAnotherProcessesLockLeaveThePoolFree() async throws {
        try await withStore { path, store, version in
            // Another holder of the lock, as another process would be (flock is per open file).
            let descriptor = open(path + "/refs.lock", O_RDWR | O_CLOEXEC)
            try #require(descriptor >= 0 && flock(descriptor, LOCK_EX) == 0)
            let flags = LockFlags()
            // The lock is let go once the check below has run, or after a minute: other tests may
            // hold the pool's threads for a while, but not that long.
            DispatchQueue.global().async {
                let deadline = Date().addingTimeInterval(60)
                while !flags.checked.load(ordering: .sequentiallyConsistent) && Date() < deadline { usleep(10_000) }
                flags.released.store(true, ordering: .sequentiallyConsistent)
                flock(descriptor, LOCK_UN)
                close(descriptor)
            }
            let swaps = (0..<4).map { index in
                _Concurrency.Task {
                    let swapped = try await store.backend.compareAndSwap(ref: "waiting-\(index)", expected: nil, new: version.id)
                    // It waited for the lock.
                    return swapped && flags.released.load(ordering: .sequentiallyConsistent)
                }
            }
            try await _Concurrency.Task.sleep(for: .milliseconds(200))
            // Runs while the lock is held, or, with the pool's threads all held, only after.
            let ranWhileLocked = await _Concurrency.Task {
                let locked = !flags.released.load(ordering: .sequentiallyConsistent)
                flags.checked.store(true, ordering: .sequentiallyConsistent)
                return locked
            }.value
            #expect(ranWhileLocked)
            for swap in swaps { #expect(try await swap.value) }
        }
    }

    @Test func openingAndCreatingReportMistakes() async throws {
        try await withStore { path, store, version in
            #expect { try JSONBackend.create(.init(path: path)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            #expect(try await fresh(path).head()?.id == version.id, "a refused create leaves the store as it was")
            #expect { try JSONBackend.open(.init(path: path + "-missing")) } throws: { ($0 as? ArborError)?.code == .notFound }
            #expect { try JSONBackend.create(.init(path: "/nonexistent-\(UUID())/store")) } throws: { $0 is ArborError }

            let other = temporaryPath("other")
            defer { removeItem(other) }
            try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
            #expect { try JSONBackend.open(.init(path: other)) } throws: { ($0 as? ArborError)?.code == .notFound }
            // A folder of other things is not a store, said as another program's database is.
            let photos = temporaryPath("photos")
            defer { removeItem(photos) }
            try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: URL(fileURLWithPath: photos + "/beach.jpg"))
            #expect { try JSONBackend.open(.init(path: photos)) } throws: { error in
                (error as? ArborError)?.code == .unsupportedFormat && "\(error)".contains("beach.jpg")
            }
            #expect { try JSONBackend.create(.init(path: photos)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            // A store that lost only its marker is a damaged store, not another program's files.
            let markerless = temporaryPath("markerless")
            defer { removeItem(markerless) }
            let damaged = Store(backend: try JSONBackend.create(.init(path: markerless)))
            try await damaged.save(Task(id: "t", title: "x", done: false))
            try FileManager.default.removeItem(atPath: markerless + "/arbor-store.json")
            #expect { try JSONBackend.open(.init(path: markerless)) } throws: { error in
                (error as? ArborError)?.code == .corruptObject && "\(error)".contains("no arbor-store.json")
            }
            try Data("{\"format\": \"something-else\"}".utf8).write(to: URL(fileURLWithPath: other + "/arbor-store.json"))
            #expect { try JSONBackend.open(.init(path: other)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
            try Data("{\"format\": \"arbor-json-store\", \"version\": 2}".utf8).write(to: URL(fileURLWithPath: other + "/arbor-store.json"))
            #expect { try JSONBackend.open(.init(path: other)) } throws: { "\($0)".contains("version 2") }
            try Data("not json".utf8).write(to: URL(fileURLWithPath: other + "/arbor-store.json"))
            #expect { try JSONBackend.open(.init(path: other)) } throws: { ($0 as? ArborError)?.code == .unsupportedFormat }
            // A non-empty folder that is not a store is not taken over.
            #expect { try JSONBackend.create(.init(path: other)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
            // A file is not a folder, as LMDB says too; it is not said to be missing.
            let file = other + "/arbor-store.json"
            #expect { try JSONBackend.open(.init(path: file)) } throws: {
                ($0 as? ArborError)?.code == .unsupportedFormat && "\($0)".contains("\(file) is not a folder")
            }
        }
    }

    /// A create killed before it wrote the store's marker leaves empty folders (and perhaps the
    /// marker's temporary file): creating again finishes the store; anything else in the folder
    /// still makes it refused.
    @Test func aCreateKilledBeforeItsMarkerIsFinishedByTheNext() async throws {
        let path = temporaryPath("json-unfinished")
        defer { removeItem(path) }
        for folder in ["", "/objects", "/refs", "/tmp"] { try FileManager.default.createDirectory(atPath: path + folder, withIntermediateDirectories: true) }
        try Data("{\"form".utf8).write(to: URL(fileURLWithPath: path + "/tmp/arbor-store.json"))
        try Data("{\"form".utf8).write(to: URL(fileURLWithPath: path + "/tmp/arbor-store.json.1234.tmp"))
        let store = Store(backend: try JSONBackend.create(.init(path: path)))
        try await store.save(Person(id: "p", name: "finished"))
        #expect(try await fresh(path).value(Person.self, id: "p")?.name == "finished")
        try await store.close()

        let other = temporaryPath("json-not-unfinished")
        defer { removeItem(other) }
        for folder in ["", "/objects", "/refs"] { try FileManager.default.createDirectory(atPath: other + folder, withIntermediateDirectories: true) }
        try Data("keep".utf8).write(to: URL(fileURLWithPath: other + "/refs/someone-else"))
        #expect { try JSONBackend.create(.init(path: other)) } throws: { ($0 as? ArborError)?.code == .alreadyExists }
        #expect(FileManager.default.fileExists(atPath: other + "/refs/someone-else"))
    }

    /// A process that holds the refs' lock and never lets go (stopped with Ctrl-Z) used to hold
    /// every swap of the store for as long; now a swap fails after the lock timeout, changing
    /// nothing, and works once the lock is free.
    @Test func aSwapFailsWhenTheRefsLockIsHeldPastItsTimeout() async throws {
        let path = temporaryPath("json-lock-timeout")
        defer { removeItem(path) }
        let backend = try JSONBackend.create(.init(path: path, lockTimeout: .milliseconds(300)))
        let descriptor = open(path + "/refs.lock", O_RDWR | O_CLOEXEC)
        try #require(descriptor >= 0 && flock(descriptor, LOCK_EX) == 0)
        let start = ContinuousClock.now
        await #expect {
            _ = try await backend.compareAndSwap(ref: "heads", expected: nil, new: Hash.of([1]))
        } throws: { error in
            (error as? ArborError)?.code == .io && "\(error)".contains("refs.lock")
        }
        // Not the 300 ms itself: a loaded machine (the whole suite at once on two processors)
        // can take seconds to run the wait; what matters is that it ends, not with the holder.
        #expect(ContinuousClock.now - start < .seconds(120))
        #expect(try await backend.ref("heads") == nil)
        flock(descriptor, LOCK_UN)
        close(descriptor)
        #expect(try await backend.compareAndSwap(ref: "heads", expected: nil, new: Hash.of([1])))
        try await backend.close()
    }

    /// Two creators racing on one fresh folder: one makes the store, the other is told it
    /// exists. They used to write the marker through one temporary file, so one could empty
    /// the other's marker before its rename, or find its own file renamed away (`notFound`).
    @Test func racingCreatorsLeaveOneSoundStore() async throws {
        for round in 0..<100 {
            let path = temporaryPath("json-race-\(round)")
            defer { removeItem(path) }
            let outcomes = await withTaskGroup(of: ArborError.Code?.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        do {
                            try await JSONBackend.create(.init(path: path, synchronous: false)).close()
                            return nil
                        } catch {
                            return (error as? ArborError)?.code ?? .engine
                        }
                    }
                }
                return await group.reduce(into: [ArborError.Code?]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == nil }.count >= 1, "round \(round): \(outcomes)")
            #expect(outcomes.allSatisfy { $0 == nil || $0 == .alreadyExists }, "round \(round): \(outcomes)")
            let store = try fresh(path)
            try await store.save(Person(id: "p", name: "raced"))
            try await store.close()
        }
    }

    /// What other programs and killed writes leave in a store's folder: copies a file manager
    /// made of a ref and macOS's AppleDouble files are not refs (an AppleDouble file made every
    /// head read fail as a corrupt ref); a .DS_Store does not stop a create; temporary files a
    /// killed write left go at the next open once an hour old, younger ones stay (another
    /// process may be writing them).
    @Test func leftoversOfOtherProgramsAndKilledWritesAreIgnored() async throws {
        try await withStore { path, store, version in
            let heads = try Data(contentsOf: URL(fileURLWithPath: path + "/refs/heads.json"))
            try heads.write(to: URL(fileURLWithPath: path + "/refs/heads copy.json"))
            try Data([0x00, 0x05, 0x16, 0x07, 0x00, 0x02, 0x00, 0x00]).write(to: URL(fileURLWithPath: path + "/refs/._heads.json"))
            try Data().write(to: URL(fileURLWithPath: path + "/refs/.DS_Store"))
            #expect(try await fresh(path).backend.refs().keys.sorted() == ["heads"])
            #expect(try await fresh(path).heads().map(\.id) == [version.id])

            let (old, young) = (path + "/tmp/1234.tmp", path + "/tmp/5678.tmp")
            for file in [old, young] { try Data("partial".utf8).write(to: URL(fileURLWithPath: file)) }
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -7_200)], ofItemAtPath: old)
            _ = try JSONBackend.open(.init(path: path))
            #expect(!FileManager.default.fileExists(atPath: old))
            #expect(FileManager.default.fileExists(atPath: young))
        }
        let finderFolder = temporaryPath("json-finder")
        defer { removeItem(finderFolder) }
        try FileManager.default.createDirectory(atPath: finderFolder, withIntermediateDirectories: true)
        try Data().write(to: URL(fileURLWithPath: finderFolder + "/.DS_Store"))
        let created = Store(backend: try JSONBackend.create(.init(path: finderFolder)))
        try await created.save(Person(id: "p", name: "in a folder Finder showed"))
        #expect(try await fresh(finderFolder).value(Person.self, id: "p") != nil)
    }

    /// Refs whose names differ only in case keep files whose names differ otherwise too, so that
    /// they stay two on a file system that ignores case (where `Main` and `main` were one file,
    /// and a ref `HEADS` could replace the heads); a ref an earlier version wrote as `Name.json`
    /// is read, and moves to its new name at its next swap.
    @Test func refsThatDifferOnlyInCaseKeepFilesOfTheirOwn() async throws {
        try await withStore { path, store, _ in
            let backend = store.backend
            let heads = try #require(try await backend.refs()["heads"])
            let (a, b, c) = (Hash.of([1]), Hash.of([2]), Hash.of([3]))
            #expect(try await backend.compareAndSwap(ref: "Main", expected: nil, new: a))
            #expect(try await backend.compareAndSwap(ref: "main", expected: nil, new: b))
            #expect(try await backend.compareAndSwap(ref: "team/HEADS", expected: nil, new: c))
            let files = try FileManager.default.contentsOfDirectory(atPath: path + "/refs").sorted()
            #expect(files == ["^main.json", "heads.json", "main.json", "team~^h^e^a^d^s.json"])
            #expect(Set(files.map { $0.lowercased() }).count == files.count)
            let refs = try await backend.refs()
            #expect(refs == ["heads": heads, "Main": a, "main": b, "team/HEADS": c])

            try FileManager.default.copyItem(atPath: path + "/refs/main.json", toPath: path + "/refs/Legacy.json")
            #expect(try await backend.refs()["Legacy"] == b)
            #expect(!(try await backend.compareAndSwap(ref: "Legacy", expected: nil, new: a)))
            #expect(try await backend.compareAndSwap(ref: "Legacy", expected: b, new: a))
            #expect(!FileManager.default.fileExists(atPath: path + "/refs/Legacy.json"))
            #expect(FileManager.default.fileExists(atPath: path + "/refs/^legacy.json"))
            #expect(try await backend.refs()["Legacy"] == a)
            #expect(try await backend.compareAndSwap(ref: "Legacy", expected: a, new: nil))
            #expect(try await backend.refs()["Legacy"] == nil)

            // Where a ref HEADS is swapped beside heads, the file HEADS.json, which opens heads.json
            // where case is ignored, is no old file of HEADS's: only the listing says so.
            #expect(try await backend.compareAndSwap(ref: "HEADS", expected: nil, new: a))
            #expect(try await backend.compareAndSwap(ref: "HEADS", expected: a, new: b))
            #expect(try await backend.refs()["heads"] == heads)

            // 200 capitals would make a 405-byte file name: such a name keeps its letters.
            let long = String(repeating: "L", count: 200)
            #expect(try await backend.compareAndSwap(ref: long, expected: nil, new: a))
            #expect(FileManager.default.fileExists(atPath: path + "/refs/\(long).json"))
            #expect(try await backend.compareAndSwap(ref: long, expected: a, new: b))
            #expect(try await backend.refs()[long] == b)
        }
    }

    @Test func objectsAreReadableJSON() async throws {
        try await withStore { path, _, version in
            let commit = try JSONValue.parse(try Array(Data(contentsOf: URL(fileURLWithPath: objectFile(path, version.id)))))
            #expect(commit["kind"] == .string("commit"))
            #expect(commit["root"] == .string(version.root.hex))
            let root = try JSONValue.parse(try Array(Data(contentsOf: URL(fileURLWithPath: objectFile(path, version.root)))))
            #expect(root["kind"] == .string("leaf"))
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: objectFile(path, version.root))), as: UTF8.self)
            #expect(text.contains("\"title\": \"hello\""))
        }
    }

    /// A damaged object file nothing reaches is garbage: gc removes it with the rest. The JSON
    /// adapter refuses to read it, and that used to stop every collection of the store, while
    /// `verify` said the store was intact.
    @Test func aDamagedObjectNothingReachesIsCollected() async throws {
        try await withStore { path, store, version in
            // The first version becomes garbage once the heads name only a second, without parents.
            var changes = ChangeSet()
            try changes.save(Task(id: "t", title: "second", done: true))
            let second = try await store.commit(changes, message: "apart", parents: [])
            let head = try await store.backend.ref(RefName.heads)
            let set = try HeadSet.encode([second.id])
            try await store.backend.put([(Hash.of(set), set)])
            #expect(try await store.backend.compareAndSwap(ref: RefName.heads, expected: head, new: Hash.of(set)))
            let file = objectFile(path, version.id)
            try Data("damaged".utf8).write(to: URL(fileURLWithPath: file))
            let report = try await fresh(path).collectGarbage(gracePeriod: .zero)
            #expect(report.removedObjects >= 1)
            #expect(!FileManager.default.fileExists(atPath: file))
            #expect(try await fresh(path).verify().isIntact)
            #expect(try await fresh(path).value(Task.self, id: "t")?.title == "second")
        }
    }

    @Test func damagedFilesAreNamedInErrors() async throws {
        try await withStore { path, _, version in
            let file = objectFile(path, version.root)
            let original = try Data(contentsOf: URL(fileURLWithPath: file))
            let damages: [(String, Data)] = [
                ("truncated", original.prefix(original.count / 2)),
                ("garbage", Data([0xFF, 0x00, 0x41])),
                ("empty", Data()),
                ("edited", Data(String(decoding: original, as: UTF8.self).replacingOccurrences(of: "hello", with: "HELLO").utf8)),
            ]
            for (label, bytes) in damages {
                try bytes.write(to: URL(fileURLWithPath: file))
                await #expect("\(label)") { try await fresh(path).value(Task.self, id: "t") } throws: { error in
                    (error as? ArborError)?.code == .corruptObject && "\(error)".contains(file)
                }
            }
            try original.write(to: URL(fileURLWithPath: file))
            #expect(try await fresh(path).value(Task.self, id: "t")?.title == "hello")

            // A damaged ref file is reported, not read as "no ref".
            let ref = path + "/refs/heads.json"
            let refBytes = try Data(contentsOf: URL(fileURLWithPath: ref))
            try Data("{\"hash\": \"abc".utf8).write(to: URL(fileURLWithPath: ref))
            await #expect { try await fresh(path).heads() } throws: { "\($0)".contains(ref) }
            try refBytes.write(to: URL(fileURLWithPath: ref))
        }
    }

    @Test func aCopiedFolderIsTheSameStore() async throws {
        try await withStore { path, store, version in
            let copy = temporaryPath("copy")
            defer { removeItem(copy) }
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            let copied = try fresh(copy)
            #expect(try await copied.heads().map(\.id) == [version.id])
            #expect(try await copied.value(Task.self, id: "t") == store.value(Task.self, id: "t"))
            // And it can be written independently of the original.
            try await copied.save(Person(id: "p", name: "copy only"))
            #expect(try await store.value(Person.self, id: "p") == nil)
        }
    }

}

/// Whether a held lock was let go, and whether a check ran: shared with a dispatch queue and tasks.
final class LockFlags: Sendable {
    let released = Atomic<Bool>(false)
    let checked = Atomic<Bool>(false)
}
