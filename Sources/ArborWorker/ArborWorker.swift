import Arbor
import ArborCLI
import ArborLMDB
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
///
///     arbor-worker grow-lmdb-under-limit FOLDER
///
/// (Linux) creates an LMDB store in FOLDER with a 16 MiB map, limits its own address space
/// (`RLIMIT_AS`) to 200 MiB more than it uses, and puts 1 MiB objects until a put fails, as it
/// must once the map cannot grow; then reads the store. Prints `ok: MESSAGE` (the put's error)
/// and exits 0 if the reads work after the failed put; a map that LMDB could not remap used to
/// kill the process on its next call instead.
@main
struct ArborWorker {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.count == 2, arguments[0] == "hold-lmdb-readers" { holdReaders(arguments[1]) }
        if arguments.count == 2, arguments[0] == "grow-lmdb-under-limit" { await growUnderLimit(arguments[1]) }
        guard arguments.count == 4, arguments[0] == "commit", let count = Int(arguments[2]), count >= 0 else {
            FileHandle.standardError.write(Data("usage: arbor-worker commit URL COUNT REPLICA\n".utf8))
            exit(2)
        }
        let (url, replica) = (arguments[1], arguments[3])
        do {
            let location = try StoreLocation(parsing: url)
            let store = Store(backend: try await openBackend(location, create: false), configuration: .init(replica: replica))
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

    private static func growUnderLimit(_ folder: String) async -> Never {
        #if os(Linux)
        do {
            let backend = try LMDBBackend.create(.init(path: folder, synchronous: false, initialMapSize: 16 << 20))
            func object(_ index: Int) -> (hash: Hash, bytes: [UInt8]) {
                let bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 1 << 20) + withUnsafeBytes(of: index) { Array($0) }
                return (Hash.of(bytes), bytes)
            }
            // Once before the limit, so that the threads and buffers a put needs exist.
            try await backend.put([object(0)])
            _ = try await backend.get([object(0).hash])
            guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
                  let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmSize:") }),
                  let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
            else { fail("cannot read VmSize") }
            var limit = rlimit()
            getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
            limit.rlim_cur = rlim_t(kilobytes << 10 + 200 << 20)
            guard setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0 else { fail("setrlimit failed") }
            var failure: ArborError?
            for index in 1..<2_000 {
                do {
                    try await backend.put([object(index)])
                } catch let error as ArborError {
                    failure = error
                    break
                }
            }
            guard let failure else { fail("every put landed: the map never stopped growing") }
            // The calls that crashed when the environment had lost its map.
            let fetched = try await backend.get([object(0).hash])
            _ = try await backend.refs()
            guard fetched[object(0).hash] == object(0).bytes else { fail("the first object did not read back") }
            print("ok: \(failure.message)")
            exit(0)
        } catch {
            fail("\(error)")
        }
        #else
        fail("grow-lmdb-under-limit runs on Linux only")
        #endif
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        exit(1)
    }
}
