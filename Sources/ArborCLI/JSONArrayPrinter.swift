import Arbor

/// Prints a JSON array a batch of elements at a time, exactly as
/// `JSONValue.array(elements).serialized(pretty: true, depth: depth)` prints it whole, so that a
/// long listing (a diff of a million records) never holds the whole document.
struct JSONArrayPrinter {
    /// How deep the array is nested in the document.
    let depth: Int
    private var count = 0

    init(depth: Int = 0) { self.depth = depth }

    /// Prints the opening bracket.
    func begin(_ output: inout some TextOutputStream) {
        output.write("[")
    }

    /// Prints `elements` after those printed before.
    mutating func append(_ elements: [JSONValue], to output: inout some TextOutputStream) {
        let indent = String(repeating: "  ", count: depth + 1)
        for element in elements {
            output.write((count > 0 ? ",\n" : "\n") + indent + element.serialized(pretty: true, depth: depth + 1))
            count += 1
        }
    }

    /// Prints the closing bracket.
    func end(_ output: inout some TextOutputStream) {
        output.write(count > 0 ? "\n" + String(repeating: "  ", count: depth) + "]" : "]")
    }
}
