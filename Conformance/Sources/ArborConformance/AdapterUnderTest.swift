import Arbor

/// An adapter as the conformance suite sees it: a name, what it can do, and a factory of fresh,
/// empty stores.
///
/// ```swift
/// let adapter = AdapterUnderTest(name: "sqlite", capabilities: .all) {
///     let path = temporaryPath()
///     return FreshBackend(
///         backend: try SQLiteBackend.create(.init(path: path)),
///         reopen: { try SQLiteBackend.open(.init(path: path)) },
///         openSecondHandle: { try SQLiteBackend.open(.init(path: path)) },
///         cleanup: { removeFiles(path) })
/// }
/// try await ConformanceSuite(adapter: adapter).runAll()
/// ```
public struct AdapterUnderTest: Sendable {
    /// The name reports and failures use, such as `"sqlite"`.
    public var name: String
    /// What the adapter can do. Cases that need a capability it lacks are reported as not
    /// applicable, never as passed.
    public var capabilities: AdapterCapabilities
    /// Makes a fresh, empty store; called once for every case that runs. The suite holds at most
    /// one fresh store at a time, so the factory may hand out the same (wiped) store each time.
    public var makeFresh: @Sendable () async throws -> FreshBackend

    /// An adapter that has `capabilities` (by default all of them: remove the ones it lacks).
    public init(
        name: String, capabilities: AdapterCapabilities = .all,
        makeFresh: @escaping @Sendable () async throws -> FreshBackend
    ) {
        self.name = name
        self.capabilities = capabilities
        self.makeFresh = makeFresh
    }
}

/// What an adapter can do beyond the core contract, which every adapter must keep.
public struct AdapterCapabilities: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The store outlives its handle: ``FreshBackend/reopen`` opens it again after `close()`,
    /// with every object and ref as they were.
    public static let reopen = AdapterCapabilities(rawValue: 1 << 0)
    /// Several handles — in practice several processes — share one store, with atomic refs
    /// across them. Checked through ``FreshBackend/openSecondHandle``, a second, independent
    /// handle opened while the first is in use, as another process would open it.
    public static let multiProcess = AdapterCapabilities(rawValue: 1 << 1)
    /// Objects of 64 MB are stored and read back whole.
    public static let largeObjects = AdapterCapabilities(rawValue: 1 << 2)

    /// Every capability.
    public static let all: AdapterCapabilities = [.reopen, .multiProcess, .largeObjects]

    /// Each capability with its name, in a fixed order.
    static let named: [(AdapterCapabilities, String)] = [(.reopen, "reopen"), (.multiProcess, "multiProcess"), (.largeObjects, "largeObjects")]

    /// The names of the capabilities in the set, such as `["reopen", "largeObjects"]`.
    public var names: [String] { Self.named.filter { contains($0.0) }.map(\.1) }

    /// The names, comma-separated, or `"none"`.
    public var description: String { names.isEmpty ? "none" : names.joined(separator: ", ") }
}

/// One fresh, empty store of the adapter under test, and what the suite may do with it.
///
/// The suite closes every handle a case opened (``backend`` and any reopened or second handle;
/// closing one that the case closed already must not crash) and then calls ``cleanup``.
public struct FreshBackend: Sendable {
    /// The store, open and empty: no objects, no refs.
    public var backend: any Backend
    /// Opens the same store again after every handle on it was closed. Needed for
    /// ``AdapterCapabilities/reopen``.
    public var reopen: (@Sendable () async throws -> any Backend)?
    /// Opens a second handle on the same store while the first is open, as a second process
    /// would. Needed for ``AdapterCapabilities/multiProcess``.
    public var openSecondHandle: (@Sendable () async throws -> any Backend)?
    /// Replaces the stored bytes of an object by others under the same hash, as a disk fault
    /// would. Without it the suite deletes the object and puts the wrong bytes under its hash,
    /// which is the same thing for an adapter that does not check hashes on `put`.
    public var corrupt: (@Sendable (_ hash: Hash, _ bytes: [UInt8]) async throws -> Void)?
    /// Removes whatever the store left (files, a database); called after the case, once every
    /// handle is closed.
    public var cleanup: @Sendable () async throws -> Void

    public init(
        backend: any Backend,
        reopen: (@Sendable () async throws -> any Backend)? = nil,
        openSecondHandle: (@Sendable () async throws -> any Backend)? = nil,
        corrupt: (@Sendable (_ hash: Hash, _ bytes: [UInt8]) async throws -> Void)? = nil,
        cleanup: @escaping @Sendable () async throws -> Void = {}
    ) {
        self.backend = backend
        self.reopen = reopen
        self.openSecondHandle = openSecondHandle
        self.corrupt = corrupt
        self.cleanup = cleanup
    }
}
