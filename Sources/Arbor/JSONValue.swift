/// A JSON document, parsed strictly (RFC 8259) and serialized deterministically.
///
/// Numbers keep their source text so integers up to `Int64` and doubles round-trip exactly;
/// objects keep their key order.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// The number's text, valid JSON number syntax.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// The value of `key` in an object, or `nil`.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    public var stringValue: String? { if case .string(let text) = self { text } else { nil } }

    /// `text` cut short for an error message: hostile input can be megabytes long, and a
    /// message must stay readable.
    static func excerpt(_ text: some StringProtocol, limit: Int = 64) -> String {
        text.utf8.count <= limit ? String(text) : text.prefix(limit) + "…"
    }

    // MARK: Serializing

    /// The document as text: compact, or indented by two spaces when `pretty`, as if nested
    /// `depth` levels deep (for a document written a part at a time).
    public func serialized(pretty: Bool = false, depth: Int = 0) -> String {
        var output = [UInt8]()
        write(to: &output, pretty: pretty, indent: depth)
        return String(decoding: output, as: UTF8.self)
    }

    /// The document as UTF-8 bytes.
    public func serializedBytes(pretty: Bool = false) -> [UInt8] {
        var output = [UInt8]()
        write(to: &output, pretty: pretty, indent: 0)
        if pretty { output.append(UInt8(ascii: "\n")) }
        return output
    }

    private func write(to output: inout [UInt8], pretty: Bool, indent: Int) {
        func newline(_ level: Int) {
            guard pretty else { return }
            output.append(UInt8(ascii: "\n"))
            output.append(contentsOf: repeatElement(UInt8(ascii: " "), count: level * 2))
        }
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let flag): output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let text): output.append(contentsOf: text.utf8)
        case .string(let text): Self.writeString(text, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                element.write(to: &output, pretty: pretty, indent: indent + 1)
            }
            if !elements.isEmpty { newline(indent) }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                Self.writeString(member.key, to: &output)
                output.append(UInt8(ascii: ":"))
                if pretty { output.append(UInt8(ascii: " ")) }
                member.value.write(to: &output, pretty: pretty, indent: indent + 1)
            }
            if !members.isEmpty { newline(indent) }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func writeString(_ text: String, to output: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): output.append(contentsOf: [92, 92])
            case 0x0A: output.append(contentsOf: [92, UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [92, UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    // MARK: Parsing

    /// Parses a complete JSON document. Throws ``ArborError/Code/invalidInput`` with the byte
    /// offset of the first problem. Nesting deeper than 512 levels is refused.
    public static func parse(_ text: String) throws -> JSONValue {
        try parse(Array(text.utf8))
    }

    public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        var parser = Parser(bytes: bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.offset == bytes.count else { throw parser.error("unexpected text after the document") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var offset = 0

        func error(_ why: String) -> ArborError {
            ArborError(.invalidInput, "invalid JSON at byte \(offset): \(why)")
        }

        mutating func skipSpace() {
            while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
        }

        mutating func expect(_ literal: String) throws {
            let utf8 = Array(literal.utf8)
            guard bytes.count - offset >= utf8.count, Array(bytes[offset..<(offset + utf8.count)]) == utf8 else {
                throw error("expected \(literal)")
            }
            offset += utf8.count
        }

        mutating func value(depth: Int) throws -> JSONValue {
            guard depth < 512 else { throw error("nested deeper than 512 levels") }
            guard offset < bytes.count else { throw error("unexpected end") }
            switch bytes[offset] {
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                offset += 1
                var elements = [JSONValue]()
                skipSpace()
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") { offset += 1; return .array([]) }
                while true {
                    skipSpace()
                    elements.append(try value(depth: depth + 1))
                    skipSpace()
                    guard offset < bytes.count else { throw error("unterminated array") }
                    if bytes[offset] == UInt8(ascii: ",") { offset += 1; continue }
                    if bytes[offset] == UInt8(ascii: "]") { offset += 1; return .array(elements) }
                    throw error("expected , or ]")
                }
            case UInt8(ascii: "{"):
                offset += 1
                var members = [(key: String, value: JSONValue)]()
                var seen = Set<String>()
                skipSpace()
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") { offset += 1; return .object([]) }
                while true {
                    skipSpace()
                    guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                    let key = try string()
                    guard seen.insert(key).inserted else { throw error("duplicate member \(String(reflecting: JSONValue.excerpt(key)))") }
                    skipSpace()
                    try expect(":")
                    skipSpace()
                    members.append((key, try value(depth: depth + 1)))
                    skipSpace()
                    guard offset < bytes.count else { throw error("unterminated object") }
                    if bytes[offset] == UInt8(ascii: ",") { offset += 1; continue }
                    if bytes[offset] == UInt8(ascii: "}") { offset += 1; return .object(members) }
                    throw error("expected , or }")
                }
            default:
                return .number(try number())
            }
        }

        mutating func number() throws -> String {
            let start = offset
            func digits() -> Int {
                let first = offset
                while offset < bytes.count, (48...57).contains(bytes[offset]) { offset += 1 }
                return offset - first
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            let integerStart = offset
            let integerDigits = digits()
            guard integerDigits > 0 else { throw error("invalid value") }
            if integerDigits > 1, bytes[integerStart] == 48 { throw error("leading zero in a number") }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
                offset += 1
                guard digits() > 0 else { throw error("digits expected after the decimal point") }
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
                offset += 1
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") { offset += 1 }
                guard digits() > 0 else { throw error("digits expected in the exponent") }
            }
            return String(decoding: bytes[start..<offset], as: UTF8.self)
        }

        mutating func hex4() throws -> UInt32 {
            guard bytes.count - offset >= 4 else { throw error("truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let character = bytes[offset]
                let nibble: UInt32
                switch character {
                case 48...57: nibble = UInt32(character - 48)
                case 97...102: nibble = UInt32(character - 87)
                case 65...70: nibble = UInt32(character - 55)
                default: throw error("invalid \\u escape")
                }
                value = value << 4 | nibble
                offset += 1
            }
            return value
        }

        mutating func string() throws -> String {
            offset += 1
            var output = [UInt8]()
            while true {
                guard offset < bytes.count else { throw error("unterminated string") }
                let byte = bytes[offset]
                switch byte {
                case UInt8(ascii: "\""):
                    offset += 1
                    guard let text = String(validating: output, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
                    return text
                case UInt8(ascii: "\\"):
                    offset += 1
                    guard offset < bytes.count else { throw error("unterminated escape") }
                    let escape = bytes[offset]
                    offset += 1
                    switch escape {
                    case UInt8(ascii: "\""): output.append(34)
                    case UInt8(ascii: "\\"): output.append(92)
                    case UInt8(ascii: "/"): output.append(47)
                    case UInt8(ascii: "b"): output.append(8)
                    case UInt8(ascii: "f"): output.append(12)
                    case UInt8(ascii: "n"): output.append(10)
                    case UInt8(ascii: "r"): output.append(13)
                    case UInt8(ascii: "t"): output.append(9)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard bytes.count - offset >= 2, bytes[offset] == 92, bytes[offset + 1] == UInt8(ascii: "u") else {
                                throw error("unpaired surrogate")
                            }
                            offset += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            throw error("unpaired surrogate")
                        }
                        output.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                    default: throw error("invalid escape")
                    }
                case 0..<0x20: throw error("control character in a string")
                default:
                    output.append(byte)
                    offset += 1
                }
            }
        }
    }
}
