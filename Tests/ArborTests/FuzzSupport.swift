import Foundation
import Testing
@testable import Arbor

/// How many inputs each fuzz target tries: 20,000 by default, which keeps every target within a
/// few seconds of a debug build; `ARBOR_FUZZ_ITERATIONS` raises it for a long run, and
/// `ARBOR_FUZZ_SEED` changes the seed (the same seed always gives the same inputs, so a failure
/// reproduces from the seed the report prints).
enum FuzzSettings {
    static let iterations: Int = {
        let text = ProcessInfo.processInfo.environment["ARBOR_FUZZ_ITERATIONS"] ?? ""
        return Int(text).map { max($0, 1) } ?? 20_000
    }()

    static let seed: UInt64 = {
        let text = ProcessInfo.processInfo.environment["ARBOR_FUZZ_SEED"] ?? ""
        return UInt64(text) ?? 0xA5B0_2026
    }()

    /// The most processor time a single input may take: far above what any input needs
    /// (milliseconds), so that only a hang-like blow-up (quadratic work, a runaway loop) trips
    /// it. Inputs that await are not timed: they may wait for a thread as long as other tests
    /// hold them, and their parsing and decoding are timed by the targets that run them alone.
    static let perInputLimit: Duration = .seconds(2)
}

/// Turns valid inputs into damaged ones, deterministically: the damage real files and hostile
/// peers produce (flipped bits, lost and doubled bytes, truncation, lengths inflated to the
/// largest varint, garbage, two objects spliced together), plus dictionary tokens for text
/// formats so that mutations reach past the first syntax check.
struct Mutator {
    private var random: SeededGenerator
    /// Fragments worth inserting whole (JSON tokens, escapes, invalid UTF-8).
    var tokens: [[UInt8]]

    init(seed: UInt64, tokens: [[UInt8]] = []) {
        random = SeededGenerator(seed: seed)
        self.tokens = tokens
    }

    /// A number in `0..<bound` (`bound` > 0).
    mutating func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    /// Boundary values, chosen more often than their share: they are where parsers go wrong.
    private static let interesting: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xA1, 0x22, 0x5C, 0x7B, 0x5B]

    mutating func byte() -> UInt8 {
        chance(30) ? Self.interesting[below(Self.interesting.count)] : UInt8(truncatingIfNeeded: random.next())
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(count)
        for _ in 0..<count { result.append(byte()) }
        return result
    }

    mutating func element<T>(_ elements: [T]) -> T { elements[below(elements.count)] }

    /// `input` with one to four mutations stacked; `donor` is spliced in by some of them.
    mutating func mutate(_ input: [UInt8], donor: [UInt8] = []) -> [UInt8] {
        var bytes = input
        for _ in 0...below(4) { mutateOnce(&bytes, donor: donor) }
        return bytes
    }

    private mutating func mutateOnce(_ bytes: inout [UInt8], donor: [UInt8]) {
        let position = below(bytes.count + 1)
        switch below(tokens.isEmpty ? 11 : 13) {
        case 0 where !bytes.isEmpty:  // flip one to eight bits
            for _ in 0...below(8) { bytes[below(bytes.count)] ^= 1 << UInt8(below(8)) }
        case 1 where !bytes.isEmpty:  // overwrite a byte
            bytes[below(bytes.count)] = byte()
        case 2:  // insert a few bytes
            bytes.insert(contentsOf: self.bytes(1 + below(8)), at: position)
        case 3 where !bytes.isEmpty:  // delete a run
            let start = below(bytes.count)
            bytes.removeSubrange(start..<min(bytes.count, start + 1 + below(16)))
        case 4:  // truncate
            bytes.removeSubrange(position...)
        case 5:  // a varint inflated to its largest or a non-minimal form
            let forms: [[UInt8]] = [
                [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], [0xFF, 0xFF, 0xFF, 0xFF, 0x0F],
                [0x80, 0x00], [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
            ]
            let form = element(forms)
            if !bytes.isEmpty && chance(50) {
                let at = below(bytes.count)
                bytes.replaceSubrange(at..<min(bytes.count, at + 1), with: form)
            } else {
                bytes.insert(contentsOf: form, at: position)
            }
        case 6:  // garbage
            bytes = self.bytes(below(chance(90) ? 64 : 1024))
        case 7 where !donor.isEmpty:  // splice: our prefix, the donor's suffix
            bytes = Array(bytes[..<position]) + Array(donor[below(donor.count + 1)...])
        case 8 where !bytes.isEmpty:  // repeat a run
            let start = below(bytes.count)
            let run = bytes[start..<min(bytes.count, start + 1 + below(64))]
            bytes.insert(contentsOf: Array(repeating: Array(run), count: 1 + below(8)).joined(), at: position)
        case 9 where bytes.count > 1:  // swap two bytes
            bytes.swapAt(below(bytes.count), below(bytes.count))
        case 10 where !bytes.isEmpty:  // a byte nudged by one: counts, lengths, tags, digits
            let at = below(bytes.count)
            bytes[at] = chance(50) ? bytes[at] &+ 1 : bytes[at] &- 1
        case 11:  // a dictionary token inserted
            bytes.insert(contentsOf: element(tokens), at: position)
        case 12 where !bytes.isEmpty:  // a run replaced by a dictionary token
            let start = below(bytes.count)
            bytes.replaceSubrange(start..<min(bytes.count, start + 1 + below(8)), with: element(tokens))
        default:
            bytes.insert(byte(), at: position)
        }
    }
}

/// What a fuzz target saw: inputs tried, accepted, rejected with a clear error, and anything
/// else (an error that is not an ``ArborError``, an empty message, a broken invariant), which
/// fails the test with the input that caused it.
struct FuzzTally: Sendable {
    let target: String
    /// The error codes a rejection may carry.
    let allowedCodes: Set<ArborError.Code>
    private(set) var inputs = 0
    private(set) var accepted = 0
    private(set) var rejected = 0
    private(set) var failures: [String] = []
    private(set) var failureCount = 0
    /// The most processor time one input took (inputs that await are not timed).
    private(set) var slowest: Duration = .zero
    private let started = ContinuousClock.now

    init(_ target: String, allowing codes: Set<ArborError.Code> = [.corruptObject, .unsupportedFormat, .invalidInput]) {
        self.target = target
        allowedCodes = codes
    }

    /// Runs one input: `body` returns normally when the input is accepted and throws when it is
    /// rejected; it may call ``fail(_:_:)`` for a broken invariant.
    mutating func run(_ input: [UInt8], _ body: (inout FuzzTally) throws -> Void) {
        let start = threadProcessorTime()
        let outcome = Result { try body(&self) }
        count(input, outcome, took: threadProcessorTime() - start)
    }

    /// ``run(_:_:)-(_,(inout FuzzTally)->Void)`` for an input that takes async calls.
    mutating func run(_ input: [UInt8], _ body: (inout FuzzTally) async throws -> Void) async {
        let outcome: Result<Void, any Error>
        do { outcome = .success(try await body(&self)) } catch { outcome = .failure(error) }
        count(input, outcome, took: nil)
    }

    private mutating func count(_ input: [UInt8], _ outcome: Result<Void, any Error>, took elapsed: Duration?) {
        inputs += 1
        switch outcome {
        case .success: accepted += 1
        case .failure(let error as ArborError) where allowedCodes.contains(error.code) && !error.message.isEmpty: rejected += 1
        case .failure(let error as ArborError): fail(input, "unclear error \(error.code): \(error)")
        case .failure(let error): fail(input, "not an ArborError: \(type(of: error)): \(error)")
        }
        guard let elapsed else { return }
        slowest = max(slowest, elapsed)
        if elapsed > FuzzSettings.perInputLimit { fail(input, "took \(elapsed) of processor time") }
    }

    /// Records a broken invariant for `input` (the first few are kept, with the input in hex).
    mutating func fail(_ input: [UInt8], _ why: String) {
        if failures.count < 5 {
            let hex = input.prefix(512).map { String(format: "%02x", $0) }.joined()
            failures.append("\(why) — input (\(input.count) bytes): \(hex)\(input.count > 512 ? "…" : "")")
        }
        failureCount += 1
    }

    /// `duration` in seconds, to the millisecond.
    static func seconds(_ duration: Duration) -> String {
        String(format: "%.3f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// Prints the counts, one line per target, and fails the test on any input that did not end
    /// in a decode or a clear error.
    func report(sourceLocation: SourceLocation = #_sourceLocation) {
        let elapsed = ContinuousClock.now - started
        print("fuzz \(target): \(inputs) inputs, \(accepted) decoded, \(rejected) rejected with clear errors, \(failureCount) failures (seed \(FuzzSettings.seed), \(Self.seconds(elapsed)) s\(slowest > .zero ? ", slowest input \(Self.seconds(slowest)) s of processor time" : ""))")
        #expect(failureCount == 0, "fuzz \(target): \(failureCount) failures:\n\(failures.joined(separator: "\n"))", sourceLocation: sourceLocation)
        #expect(inputs > 0, sourceLocation: sourceLocation)
    }
}

// MARK: - Random valid values

extension Mutator {
    /// Strings that have broken parsers and encoders before: empty, NUL, quotes and SQL,
    /// escapes, combining marks (canonically equal to another string), emoji, `$` tags.
    static let awkwardTexts = [
        "", "a", "\u{0}", "a\u{0}b", "'", "\"", "\\", "'; DROP TABLE arbor_objects; --", "héllo", "e\u{301}", "\u{e9}",
        "\u{301}", "🌳", "👩‍👩‍👧", "$date", "$map", "../x", "%2e%2e/", "\u{FEFF}", "\u{10FFFF}", "\r\n\t", "\u{7F}",
    ]

    mutating func text() -> String {
        if chance(50) { return element(Self.awkwardTexts) }
        let scalars = (0..<below(24)).compactMap { _ in Unicode.Scalar(UInt32(chance(80) ? 0x20 + below(0x5F) : below(0x11_0000))) }
        return String(String.UnicodeScalarView(scalars))
    }

    /// A type name that ``RecordKey/validate()`` accepts.
    mutating func typeName() -> String {
        let name = text().replacingOccurrences(of: "\u{0}", with: "")
        return name.isEmpty || name.utf8.count > 255 ? "Item" : name
    }

    mutating func double() -> Double {
        element([0.0, -0.0, .nan, .infinity, -.infinity, .greatestFiniteMagnitude, 0.1, 1e16, .leastNonzeroMagnitude, Double(bitPattern: random.next())])
    }

    /// A random property value nested at most `depth` levels; `children` allows `.child` links.
    mutating func value(depth: Int = 3, children: Bool = true) -> PropertyValue {
        switch below(depth > 0 ? 12 : 10) {
        case 0: return .null
        case 1: return .bool(chance(50))
        case 2: return .int(Int64(bitPattern: random.next()) >> Int64(below(64)))
        case 3: return .double(double())
        case 4: return .string(text())
        case 5: return .date(Date(timeIntervalSinceReferenceDate: chance(50) ? 800_000_000.5 : double()))
        case 6: return .bytes(bytes(below(40)))
        case 7: return .reference(RecordKey(type: typeName(), id: text()))
        case 8: return children ? .child(RecordKey(type: typeName(), id: text())) : .string(text())
        case 9: return .string(String(repeating: text(), count: below(4)))
        case 10: return .array((0..<below(5)).map { _ in value(depth: depth - 1, children: children) })
        default: return .map(properties(count: below(5), depth: depth - 1, children: children))
        }
    }

    mutating func properties(count: Int, depth: Int = 3, children: Bool = true) -> [String: PropertyValue] {
        var result = [String: PropertyValue]()
        for _ in 0..<count { result[text()] = value(depth: depth, children: children) }
        return result
    }
}

/// Replaces the content of the file at `path` without flushing it to disk: damage for the next
/// read to find, thousands of times a test, where `Data.write` would fsync every one.
func overwriteFile(_ path: String, with bytes: [UInt8]) throws {
    let descriptor = open(path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { throw ArborError(.io, "cannot open \(path) (errno \(errno))") }
    defer { close(descriptor) }
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written > 0 else { throw ArborError(.io, "cannot write \(path) (errno \(errno))") }
        offset += written
    }
}

extension FuzzTally {
    /// Runs `check` on every seed, then on mutations of them (spliced with `donors`) until
    /// `iterations` inputs were tried, and reports: one fuzz target, start to end.
    static func fuzz(
        _ target: String, seeds: [[UInt8]], donors: [[UInt8]]? = nil, tokens: [[UInt8]] = [], salt: UInt64,
        iterations: Int = FuzzSettings.iterations, sourceLocation: SourceLocation = #_sourceLocation,
        _ check: @escaping @Sendable ([UInt8], inout FuzzTally) throws -> Void
    ) async {
        let tally = await onTheFuzzQueue {
            var mutator = Mutator(seed: FuzzSettings.seed ^ salt, tokens: tokens)
            var tally = FuzzTally(target)
            for seed in seeds { tally.run(seed) { try check(seed, &$0) } }
            while tally.inputs < iterations {
                let input = mutator.mutate(mutator.element(seeds), donor: mutator.element(donors ?? seeds))
                tally.run(input) { try check(input, &$0) }
            }
            return tally
        }
        tally.report(sourceLocation: sourceLocation)
        // The seeds are valid inputs: a target that decodes none of them tests nothing.
        #expect(tally.accepted > 0, "fuzz \(target): no input was decoded", sourceLocation: sourceLocation)
    }
}

/// The processor time the calling thread has used: unlike the wall clock, it does not grow
/// while other work on a busy machine holds the processor.
func threadProcessorTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
}

/// One fuzz loop at a time, on a thread of its own.
private let fuzzQueue = DispatchQueue(label: "arbor.tests.fuzz")

/// Runs `body` on the fuzz queue and waits for it. A fuzz loop computes for seconds without ever
/// suspending: on Swift's few cooperative threads it would hold up every other test for as long,
/// and several at once would take every processor from tests that time something. Serialized on
/// one queue, the loops use one processor between them.
func onTheFuzzQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        fuzzQueue.async { continuation.resume(returning: body()) }
    }
}
