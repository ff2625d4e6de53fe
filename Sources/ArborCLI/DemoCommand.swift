import Arbor
import ArborJSON
import ArgumentParser
import Foundation

/// `arbor demo [--folder PATH]`: Arbor's main job on an embedded store, told step by step.
public struct DemoCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Walk through Arbor on an embedded JSON store: value trees, versions, diffs, history, concurrent writers.",
        discussion: """
            Creates a store in a new folder (a temporary one unless --folder is given, which must not \
            exist yet or be empty), commits a project with its tasks and notes, edits it, lets two \
            writers commit on the same version, reopens the store from disk and checks that the same \
            records give the same root hash in any order. Prints what happened at each step.
            """)

    @Option(help: "The folder to create the store in (default: a new temporary folder, removed afterwards).")
    public var folder: String?

    public init() {}

    public func run() async throws {
        var output = StandardStream.output
        do {
            try await execute(&output)
        } catch {
            var errors = StandardStream.error
            print("error: \(error)", to: &errors)
            throw ExitCode.failure
        }
    }

    public func execute(_ output: inout some TextOutputStream) async throws {
        let keep = folder != nil
        let path = folder ?? FileManager.default.temporaryDirectory.appendingPathComponent("arbor-demo-\(UUID().uuidString)").path
        defer { if !keep { try? FileManager.default.removeItem(atPath: path) } }
        func say(_ line: String = "") { print(line, to: &output) }

        say("Arbor demo: a versioned store of Swift values, kept as JSON files in \(path)")
        say()
        let laptop = Store(backend: try JSONBackend.create(.init(path: path)), configuration: .init(replica: "laptop"))

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
        say("1. Committed a project with 2 tasks and 2 notes, and 2 people: one version, \(first.recordCount) records.")
        say("   version \(first.id.abbreviated())  root \(first.root.abbreviated())")

        // 2. Edit the tree: change a property, drop a note (deleted with the commit), add one.
        project.tasks[0].done = true
        project.tasks[0].notes.removeLast()
        project.tasks[1].notes.append(DemoNote(id: "cli-1", text: "argument parser"))
        let second = try await laptop.save(project, message: "Finish the core")
        say()
        say("2. Saved the edited project as a new version \(second.id.abbreviated()). What changed, property by property:")
        for line in Rendering.lines(try await laptop.diff(from: first.id, to: second.id)) { say("   " + line) }

        // 3. Every version stays readable.
        let before = try await laptop.value(DemoProject.self, id: "arbor", at: first.id)
        say()
        say("3. The first version is still there: task \"core\" done = \(before?.tasks[0].done == true), "
            + "notes = \(before?.tasks[0].notes.map(\.id) ?? []).")
        let history = try await laptop.history(of: RecordKey(type: "Task", id: "core"))
        say("   Task/core changed in \(history.count) versions: \(history.map { $0.id.abbreviated() }.joined(separator: ", ")).")

        // 4. Two writers on the same version, as two devices or processes would: both land.
        let phone = Store(backend: try JSONBackend.open(.init(path: path)), configuration: .init(replica: "phone"))
        var fromLaptop = ChangeSet()
        try fromLaptop.save(DemoPerson(id: "ada", name: "Ada Lovelace"))
        var fromPhone = ChangeSet()
        try fromPhone.save(DemoPerson(id: "grace", name: "Grace Hopper"))
        async let laptopCommit = laptop.commit(fromLaptop, message: "Full name for Ada", parents: [second.id])
        async let phoneCommit = phone.commit(fromPhone, message: "Full name for Grace", parents: [second.id])
        _ = try await (laptopCommit, phoneCommit)
        let heads = try await phone.heads()
        say()
        say("4. Two writers committed on the same version at once; nothing is lost, the store has \(heads.count) heads:")
        for head in heads { say("   " + Rendering.line(head)) }
        say("   (merging heads into one is the merge feature's job; reads use the newest head.)")
        try await phone.close()
        try await laptop.close()

        // 5. Reopen from disk: the folder is the store.
        let reopened = Store(backend: try JSONBackend.open(.init(path: path)))
        let log = try await reopened.log()
        let objectFiles = try countFiles(in: path + "/objects")
        say()
        say("5. Reopened the folder: \(log.count) versions, \(objectFiles) object files (readable JSON), newest first:")
        for version in log { say("   " + Rendering.line(version)) }

        // 6. History independence: the same records in another order give the same root hash.
        let head = try await reopened.resolve("HEAD")
        var records = [Record]()
        for type in ["Note", "Person", "Project", "Task"] { records += try await reopened.records(ofType: type, at: head.id) }
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
        say("6. Rebuilt the head's \(records.count) records one commit each, in random order, in a memory store:")
        say("   root \(rebuilt.root.abbreviated()) \(rebuilt.root == head.root ? "==" : "!=") \(head.root.abbreviated()) — "
            + (rebuilt.root == head.root ? "the same content has the same hash, whatever its history." : "MISMATCH"))
        try await reopened.close()
        guard rebuilt.root == head.root else {
            throw ArborError(.corruptObject, "history independence failed: \(rebuilt.root) != \(head.root)")
        }
        say()
        say(keep ? "The store stays in \(path); try: arbor log json:\(path)" : "Done; the temporary store was removed.")
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
