// Feeds arbitrary bytes to every decoder of stored or received data, and to a store whose
// index root is those bytes. A peer or a damaged file can hand Arbor any object whose hash is
// right, so each of these must throw `ArborError` and never trap, hang or allocate without
// bound. Built with `-sanitize=fuzzer` by scripts/fuzz.sh; crashes become regression tests.
@testable import Arbor
import Dispatch

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let mode = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch mode % 11 {
    case 0:
        // The point-read view of a node must accept exactly what the decoder accepts.
        let node = try? IndexNode.decode(bytes)
        let view = try? NodeBytes(validating: bytes)
        precondition((node == nil) == (view == nil), "NodeBytes and IndexNode.decode disagree")
        // A leaf searched where an engine lends it refuses exactly what the decoder refuses.
        let probe = node?.entries.first?.key ?? Array(bytes.prefix(8))
        let lentAccepted = (try? { _ = try NodeBytes.payload(inLentLeaf: bytes, for: probe, checked: true); return true }()) ?? false
        precondition(lentAccepted == (node?.level == 0), "a leaf read in place and IndexNode.decode disagree")
        if let node, let view {
            precondition(view.count == node.entries.count)
            for (index, entry) in node.entries.enumerated() {
                precondition(view.key(at: index) == entry.key && (try? view.payload(at: index)) == entry.payload)
                let other = (index + 1) % node.entries.count
                precondition(view.compareKey(index, with: view, other) == compareKeys(entry.key, node.entries[other].key))
                precondition(view.hasSamePayload(index, as: view, other) == (entry.payload == node.entries[other].payload))
                if node.level == 0 {
                    precondition((try? view.payload(for: entry.key)) == entry.payload)
                    for checked in [true, false] {
                        precondition((try? NodeBytes.payload(inLentLeaf: bytes, for: entry.key, checked: checked)) == entry.payload)
                    }
                } else if case .node(let child, _) = node.entries[node.childIndex(covering: entry.key)].payload {
                    precondition((try? view.child(covering: entry.key)) == child)
                }
            }
        }
    case 1: _ = try? Version.Content.decode(bytes)
    case 2: _ = try? HeadSet.decode(bytes)
    case 3:
        // Verification's check of a record must refuse exactly what reads refuse.
        let decoded = (try? RecordCoding.decode(bytes)) != nil
        let checked = (try? bytes.withUnsafeBufferPointer { try RecordCoding.check($0) }) != nil
        precondition(decoded == checked, "RecordCoding.check and decode disagree")
        _ = try? RecordCoding.childKeys(bytes)
    case 4: _ = try? Blob.decode(bytes)
    case 5:
        if let json = try? JSONValue.parse(bytes) { _ = try? ObjectJSON.canonicalBytes(json) }
    case 6: _ = ObjectJSON.render(bytes)
    case 7: _ = try? ObjectLinks(bytes)
    case 8:
        let text = String(decoding: bytes, as: UTF8.self)
        _ = Hash(hex: text)
        _ = URLSecrets.redacting(text, in: "opening \(text) failed")
    case 9: _ = try? JSONValue.parse(String(decoding: bytes, as: UTF8.self))
    default: runStore(root: bytes)
    }
    return 0
}

/// A store whose only version's index root is `root`: every read path must refuse a bad node.
private func runStore(root: [UInt8]) {
    let done = DispatchSemaphore(value: 0)
    Task {
        defer { done.signal() }
        let backend = MemoryBackend()
        let rootHash = Hash.of(root)
        let commit = Version.Content(
            root: rootHash, parents: [], time: HybridTime(milliseconds: 1), replica: "fuzz", message: "", recordCount: 1
        ).encoded()
        let commitHash = Hash.of(commit)
        do {
            let heads = try HeadSet.encode([commitHash])
            try await backend.put([(rootHash, root), (commitHash, commit), (Hash.of(heads), heads)])
            _ = try await backend.compareAndSwap(ref: RefName.heads, expected: nil, new: Hash.of(heads))
        } catch { return }
        let store = Store(backend: backend)
        _ = try? await store.record(RecordKey(type: "a", id: "b"))
        _ = try? await store.records(ofType: "a")
        _ = try? await store.diff(from: nil, to: commitHash)
        _ = try? await store.verify()
    }
    done.wait()
}

// SwiftPM links an executable target's `main` from `<module>_main`; libFuzzer's own driver
// does the work.
@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ body: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

@_cdecl("arbor_fuzz_main")
public func fuzzMain(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { fuzzOneInput($0, $1) }
}
