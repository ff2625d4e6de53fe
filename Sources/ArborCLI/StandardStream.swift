import Foundation

/// Standard output or standard error as a `TextOutputStream`.
struct StandardStream: TextOutputStream {
    let handle: FileHandle

    static var output: StandardStream { StandardStream(handle: .standardOutput) }
    static var error: StandardStream { StandardStream(handle: .standardError) }

    mutating func write(_ string: String) {
        // A closed pipe (`arbor log | head`) is not worth failing over.
        try? handle.write(contentsOf: Data(string.utf8))
    }
}
