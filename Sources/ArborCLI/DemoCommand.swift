import Arbor
import ArborJSON
import ArgumentParser
import Foundation

/// `arbor demo [--folder PATH] [--postgres URL]`: Arbor's main job on embedded stores, told
/// step by step.
public struct DemoCommand: OutputCommand {
    public static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Walk through Arbor's main job: value trees on a JSON and a SQLite store, concurrent edits, sync, migration.",
        discussion: """
            Creates stores in a new folder (a temporary one unless --folder is given, which must not exist yet \
            or be empty): commits a project with its tasks and notes to a JSON store, edits it, clones it to a \
            SQLite store, edits both at once (with one conflict), syncs them to one head, migrates the result \
            to LMDB (and to PostgreSQL with --postgres, into an empty database), verifies every copy, and \
            checks that the same records give the same root hash in any order. Prints what happened.
            """)

    @Option(help: "The folder to create the stores in (default: a new temporary folder, removed afterwards).")
    public var folder: String?

    @Option(help: ArgumentHelp("Also migrate to this PostgreSQL database (empty, or without an Arbor schema yet).", valueName: "url"))
    public var postgres: String?

    public init() {}

    public var storeURLs: [String] { postgres.map { [$0] } ?? [] }

    public func run() async throws { try await executeOnStandardOutput() }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let keep = folder != nil
        let path = folder ?? FileManager.default.temporaryDirectory.appendingPathComponent("arbor-demo-\(UUID().uuidString)").path
        try prepareEmptyFolder(path)
        // Ctrl-C removes the temporary folder too, as the end of the demo does.
        let interruptWatch = keep ? nil : Interruption.removeOnInterrupt(path)
        defer {
            interruptWatch?.cancel()
            if !keep { try? FileManager.default.removeItem(atPath: path) }
        }
        func say(_ line: String = "") { print(line, to: &output) }

        say("Arbor demo: versioned stores of Swift values, on several engines, in \(path)")
        say()
        let laptop = Store(backend: try await openBackend(.json(path: path + "/laptop"), create: true), configuration: .init(replica: "laptop"))

        // 1. A value tree: a project owns its tasks, a task owns its notes; the owner is a reference.
        var project = DemoProject(id: "arbor", name: "Ship Arbor", tasks: [
            DemoTask(id: "core", title: "Write the core", done: false,
                     notes: [DemoNote(id: "core-1", text: "prolly tree index"), DemoNote(id: "core-2", text: "canonical bytes")],
                     owner: Ref(id: "ada")),
            DemoTask(id: "cli", title: "Write the CLI", done: false, notes: [], owner: Ref(id: "grace")),
        ])
        var changes = ChangeSet()
        try changes.save(project)
        try changes.save(DemoPerson(id: "ada", name: "Ada"))
        try changes.save(DemoPerson(id: "grace", name: "Grace"))
        let first = try await laptop.commit(changes, message: "Plan the project")
        say("1. On the laptop's JSON store: committed a project with 2 tasks, 2 notes and 2 people: \(first.recordCount) records.")
        say("   version \(first.id.abbreviated())  root \(first.root.abbreviated())")

        // 2. Edit the tree: change a property, drop a note (deleted with the commit), add one.
        project.tasks[0].done = true
        project.tasks[0].notes.removeLast()
        project.tasks[1].notes.append(DemoNote(id: "cli-1", text: "argument parser"))
        let second = try await laptop.save(project, message: "Finish the core")
        say()
        say("2. Saved the edited project as version \(second.id.abbreviated()). What changed, property by property:")
        for line in Rendering.lines(try await laptop.diff(from: first.id, to: second.id)) { say("   " + line) }
        let before = try await laptop.value(DemoProject.self, id: "arbor", at: first.id)
        say("   The first version is still readable: task \"core\" done = \(before?.tasks[0].done == true).")

        // 3. A second replica on another engine: a clone into SQLite.
        let phone = Store(backend: try await openBackend(.sqlite(path: path + "/phone.sqlite"), create: true), configuration: .init(replica: "phone"))
        let clone = try await laptop.migrate(to: phone)
        say()
        say("3. Cloned the laptop's store into the phone's SQLite store: \(Rendering.count(clone.exchange.versions, "version", "versions")), "
            + "\(Rendering.count(clone.exchange.objects, "object", "objects")), verified (same heads ref on both).")

        // 4. Both replicas edit at once; both rename Ada: a conflict.
        @Sendable func editOnLaptop() async throws {
            try await laptop.save(DemoPerson(id: "ada", name: "Ada Lovelace"), message: "Full name for Ada")
            try await laptop.save(DemoNote(id: "core-1", text: "prolly tree index, fanout 16"), message: "Detail a note")
        }
        var finished = project.tasks[1]
        finished.done = true
        @Sendable func editOnPhone(_ task: DemoTask) async throws {
            try await phone.save(task, message: "CLI done")
            try await phone.save(DemoPerson(id: "ada", name: "Augusta Ada King"), message: "Ada's title")
        }
        async let onLaptop: Void = editOnLaptop()
        async let onPhone: Void = editOnPhone(finished)
        _ = try await (onLaptop, onPhone)
        say()
        say("4. Edited both at once: the laptop renamed Ada and detailed a note; the phone finished the CLI task and renamed Ada too.")

        // 5. Sync: exchange both ways, merge property by property, send the merge back.
        let sync = try await laptop.sync(with: phone)
        say()
        say("5. Synced laptop and phone:")
        say("   laptop -> phone: " + Rendering.line(sync.sent))
        say("   phone -> laptop: " + Rendering.line(sync.received))
        if let merge = sync.merge { for line in Rendering.lines(merge) { say("   " + line) } }
        let merged = try await phone.value(DemoProject.self, id: "arbor")
        let ada = try await phone.value(DemoPerson.self, id: "ada")
        say("   Both are at \(sync.heads.map { $0.abbreviated() }.joined(separator: ", ")): task cli done = \(merged?.tasks[1].done == true), "
            + "note core-1 = \"\(merged?.tasks[0].notes.first?.text ?? "")\", Ada = \"\(ada?.name ?? "")\" (the most recent edit wins).")
        guard sync.heads.count == 1, try await laptop.backend.ref(RefName.heads) == phone.backend.ref(RefName.heads) else {
            throw ArborError(.engine, "the replicas did not converge")
        }

        // 6. Migrate the result to LMDB (and PostgreSQL), verified.
        var targets: [(name: String, location: StoreLocation)] = [("LMDB", .lmdb(path: path + "/archive.lmdb"))]
        if let postgres { targets.append(("PostgreSQL", try StoreLocation(parsing: postgres))) }
        say()
        for (name, location) in targets {
            let backend = try await openBackend(location, create: true)
            let archive = Store(backend: backend)
            let report = try await phone.migrate(to: archive)
            say("6. Migrated the phone's store to \(name): \(Rendering.count(report.exchange.versions, "version", "versions")), "
                + "\(Rendering.count(report.exchange.objects, "object", "objects")) (\(ProgressBar.bytes(report.exchange.bytes))); verified: "
                + "same heads, \(report.objectsChecked) objects match their hashes, the head's index is complete.")
            let log = try await archive.log()
            say("   Its history, newest first:")
            for version in log { say("   " + Rendering.line(version)) }
            try await archive.close()
        }

        // 7. History independence: the same records in another order give the same root hash.
        let head = try await phone.resolve("HEAD")
        var records = [Record]()
        for type in ["Note", "Person", "Project", "Task"] { records += try await phone.records(ofType: type, at: head.id) }
        let shuffled = Store(backend: MemoryBackend())
        // A random order in which every record comes after the children it names.
        var pending = records.shuffled()
        var saved = Set<RecordKey>()
        while let index = pending.firstIndex(where: { $0.childKeys.allSatisfy(saved.contains) }) {
            let record = pending.remove(at: index)
            var single = ChangeSet()
            try single.save(record)
            try await shuffled.commit(single)
            saved.insert(record.key)
        }
        let rebuilt = try await shuffled.resolve("HEAD")
        say()
        say("7. Rebuilt the head's \(records.count) records one commit each, in random order, in a memory store:")
        say("   root \(rebuilt.root.abbreviated()) \(rebuilt.root == head.root ? "==" : "!=") \(head.root.abbreviated()) — "
            + (rebuilt.root == head.root ? "the same content has the same hash, whatever its history." : "MISMATCH"))
        let objectFiles = try countFiles(in: path + "/laptop/objects")
        try await laptop.close()
        try await phone.close()
        guard rebuilt.root == head.root else {
            throw ArborError(.corruptObject, "history independence failed: \(rebuilt.root) != \(head.root)")
        }
        say()
        say(keep
            ? "The stores stay in \(path) (the laptop's is \(objectFiles) readable JSON files); try: arbor log sqlite:\(path)/phone.sqlite"
            : "Done; the temporary stores were removed.")
    }

    /// Creates `path`, or checks that it is an empty folder: the demo never writes over anything.
    private func prepareEmptyFolder(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue, try FileManager.default.contentsOfDirectory(atPath: path).isEmpty else {
                throw ArborError(.alreadyExists, "\(path) is not an empty folder: give a new or an empty one")
            }
        } else {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    private func countFiles(in folder: String) throws -> Int {
        let enumerator = FileManager.default.enumerator(atPath: folder)
        var count = 0
        while let name = enumerator?.nextObject() as? String {
            if name.hasSuffix(".json") { count += 1 }
        }
        return count
    }
}
