import Arbor
import ArborCLI
import Foundation

/// Runs the executables this package builds (`arbor`, `arbor-worker`) as child processes.
enum ChildProcess {
    /// The path of executable `name`, built beside the test bundle by `swift build`
    /// (scripts/test.sh builds everything first).
    static func executable(_ name: String) throws -> String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // On Linux the tests run from the build folder; on macOS from a toolchain's test runner
        // that loads the `.xctest` bundle, which sits in the build folder, as does the package's
        // own `.build/debug` for a plain `swift test`.
        let bundles = Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" }.map { $0.deletingLastPathComponent() }
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] + bundles + [package.appendingPathComponent(".build/debug")] {
            let path = candidate.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw ArborError(.notFound, "the \(name) executable is not built next to \(directory.path); run `swift build` first (scripts/test.sh does)")
    }

    /// Runs executable `name` with `arguments` and returns its standard output; a non-zero exit
    /// throws with its standard error, any password of `url` redacted.
    ///
    /// The process is waited for on a dispatch queue, not the cooperative pool, so that several
    /// children started at once really run at once.
    static func run(_ name: String, _ arguments: [String], redacting url: String? = nil) async throws -> String {
        let path = try executable(name)
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: path)
                    process.arguments = arguments
                    let output = Pipe()
                    let errors = Pipe()
                    process.standardOutput = output
                    process.standardError = errors
                    try process.run()
                    // Standard error is read on another thread so that neither pipe can fill and stall the child.
                    nonisolated(unsafe) var errorData = Data()
                    let errorReader = DispatchGroup()
                    DispatchQueue.global().async(group: errorReader) { errorData = errors.fileHandleForReading.readDataToEndOfFile() }
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    errorReader.wait()
                    process.waitUntilExit()
                    guard process.terminationStatus == 0 else {
                        var message = String(decoding: errorData, as: UTF8.self)
                        if let url { message = StoreLocation.redactingSecrets(of: url, in: message) }
                        throw ArborError(.engine, "\(name) \(arguments.first ?? "") failed (status \(process.terminationStatus)): \(message)")
                    }
                    continuation.resume(returning: String(decoding: data, as: UTF8.self))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Starts executable `name` with `arguments`, standard output to a pipe (read it after the
    /// process ends: what a killed process printed is kept), standard error discarded.
    static func startCapturing(_ name: String, _ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable(name))
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, output)
    }

    /// What `pipe` gives first (empty at its end), waited for on a dispatch queue rather than a
    /// thread of the Swift pool.
    static func firstOutput(of pipe: Pipe) async -> Data {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: pipe.fileHandleForReading.availableData) }
        }
    }

    /// Sends SIGINT to `process` a second after it catches SIGINT (or a minute, whichever comes
    /// first; at once if it ends): before, SIGINT would end it outright, and on a loaded machine
    /// its start-up can outlast any fixed pause. Returns when it was sent.
    static func interruptOnceHandled(_ process: Process) async throws -> ContinuousClock.Instant {
        let handling = ContinuousClock.now + .seconds(60)
        while !catchesInterrupts(process.processIdentifier), process.isRunning, ContinuousClock.now < handling {
            try await _Concurrency.Task.sleep(for: .milliseconds(20))
        }
        try await _Concurrency.Task.sleep(for: .seconds(1))
        let sent = ContinuousClock.now
        process.interrupt()
        return sent
    }

    /// Whether process `pid` catches SIGINT (its `SigCgt` mask in `/proc`, Linux): `arbor` does
    /// once its handler is in place (ignoring it, `SigIgn`, comes just before, when a SIGINT
    /// would be lost). Elsewhere, `true`.
    private static func catchesInterrupts(_ pid: Int32) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
              let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return true }
        return mask & (1 << (UInt64(SIGINT) - 1)) != 0
    }

    /// Starts executable `name` with `arguments`, its output discarded, and returns at once.
    static func start(_ name: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable(name))
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }
}

extension Process {
    /// Sends `signal` to the process (SIGKILL: no chance to clean up, as a crash or power cut).
    func terminate(signal: Int32) {
        if isRunning { kill(processIdentifier, signal) }
    }
}
