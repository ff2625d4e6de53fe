import Arbor
import ArborCLI
import Foundation

/// A child process for the multi-process and crash tests:
///
///     arbor-worker commit URL COUNT REPLICA
///
/// commits COUNT versions to the store at URL, each saving one record `Counter/REPLICA-i`, and
/// prints each version's full hash on its own line as soon as the commit has returned (so a test
/// that kills the worker knows which commits were acknowledged). Exits 1 with `error: …` on
/// standard error if anything fails.
@main
struct ArborWorker {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count == 4, arguments[0] == "commit", let count = Int(arguments[2]), count >= 0 else {
            FileHandle.standardError.write(Data("usage: arbor-worker commit URL COUNT REPLICA\n".utf8))
            exit(2)
        }
        let (url, replica) = (arguments[1], arguments[3])
        do {
            let location = try StoreLocation(parsing: url)
            let store = Store(backend: try openBackend(location, create: false), configuration: .init(replica: replica))
            for index in 0..<count {
                var changes = ChangeSet()
                try changes.save(Record(type: "Counter", id: "\(replica)-\(index)", properties: ["n": .int(Int64(index)), "replica": .string(replica)]))
                let version = try await store.commit(changes, message: "\(replica) \(index)")
                FileHandle.standardOutput.write(Data("\(version.id.hex)\n".utf8))
            }
            try await store.close()
        } catch {
            FileHandle.standardError.write(Data("error: \(StoreLocation.redactingSecrets(of: url, in: String(describing: error)))\n".utf8))
            exit(1)
        }
    }
}
