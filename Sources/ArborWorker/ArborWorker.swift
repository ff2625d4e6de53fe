import Arbor
import ArborCLI
import CLMDB
import Foundation

/// A child process for the multi-process and crash tests:
///
///     arbor-worker commit URL COUNT REPLICA
///
/// commits COUNT versions to the store at URL, each saving one record `Counter/REPLICA-i`, and
/// prints each version's full hash on its own line as soon as the commit has returned (so a test
/// that kills the worker knows which commits were acknowledged). Exits 1 with `error: …` on
/// standard error if anything fails.
///
///     arbor-worker hold-lmdb-readers FOLDER
///
/// opens the LMDB environment in FOLDER with raw LMDB calls, begins read transactions until its
/// reader table is full, prints how many it holds, and dies by SIGKILL holding them: a reader
/// process killed mid-read, whose slots only a reader check frees.
@main
struct ArborWorker {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.count == 2, arguments[0] == "hold-lmdb-readers" { holdReaders(arguments[1]) }
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

    private static func holdReaders(_ folder: String) -> Never {
        var env: OpaquePointer?
        guard mdb_env_create(&env) == 0, let env else { fail("mdb_env_create failed") }
        mdb_env_set_maxdbs(env, 8)
        let code = mdb_env_open(env, folder, UInt32(MDB_NOTLS), 0o600)
        guard code == 0 else { fail("mdb_env_open: \(String(cString: mdb_strerror(code)))") }
        var held = 0
        while true {
            var txn: OpaquePointer?
            guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { break }
            held += 1
        }
        FileHandle.standardOutput.write(Data("\(held)\n".utf8))
        kill(getpid(), SIGKILL)
        fail("still alive after SIGKILL")
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        exit(1)
    }
}
