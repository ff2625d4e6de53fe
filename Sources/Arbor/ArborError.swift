/// The one error type of Arbor: what failed, where, and why.
///
/// Modelled on an extensible error struct: `code` says what kind of failure it is and can grow
/// without breaking callers; `backend` and `operation` say where it happened; `underlying`
/// keeps the original cause (an engine's error, an `errno`, a decoding failure).
/// Messages never contain passwords: adapters redact URLs before they build one.
public struct ArborError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A store, file or database that was expected is not there.
        public static let notFound = Code("notFound")
        /// A store was to be created where one already exists.
        public static let alreadyExists = Code("alreadyExists")
        /// Bytes do not match their hash, or cannot be decoded.
        public static let corruptObject = Code("corruptObject")
        /// An object a version needs is missing from the store.
        public static let missingObject = Code("missingObject")
        /// The input (a URL, a JSON document, a name, a value) is not valid.
        public static let invalidInput = Code("invalidInput")
        /// A value cannot be mapped to or from records.
        public static let coding = Code("coding")
        /// The data was written by an incompatible format version, or is not an Arbor store.
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// The engine or the operating system reported an I/O failure (disk full, permissions, ...).
        public static let io = Code("io")
        /// A connection could not be made or was lost.
        public static let connection = Code("connection")
        /// Access was refused (wrong password, read-only path).
        public static let permissionDenied = Code("permissionDenied")
        /// A version reference is ambiguous or names nothing.
        public static let unknownVersion = Code("unknownVersion")
        /// The operation needs a single head, but the store has several.
        public static let multipleHeads = Code("multipleHeads")
        /// The store was closed.
        public static let closed = Code("closed")
        /// A failure inside the engine that fits no other code.
        public static let engine = Code("engine")
    }

    /// What kind of failure this is.
    public var code: Code
    /// A sentence that says what went wrong, for people.
    public var message: String
    /// The backend involved (`"memory"`, `"json"`, ...), if any.
    public var backend: String?
    /// The operation that failed (`"get"`, `"compareAndSwap"`, `"commit"`, ...), if known.
    public var operation: String?
    /// The underlying cause, if any.
    public var underlying: (any Error)?

    public init(
        _ code: Code, _ message: String, backend: String? = nil, operation: String? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.backend = backend
        self.operation = operation
        self.underlying = underlying
    }

    public var description: String {
        var text = ""
        if let backend { text += "[\(backend)] " }
        if let operation { text += "\(operation): " }
        text += message
        if let underlying { text += " (\(underlying))" }
        return text
    }

    /// A copy with `backend` and `operation` filled in where they are still unknown.
    func located(backend: String, operation: String) -> ArborError {
        var copy = self
        if copy.backend == nil { copy.backend = backend }
        if copy.operation == nil { copy.operation = operation }
        return copy
    }
}
