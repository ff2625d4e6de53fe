import Foundation

/// Finds and hides the secrets a store URL carries, so that no error, log line or description
/// ever shows a password. Adapters and the CLI use it alike.
///
/// Everything here works on UTF-8 bytes, never on characters: a password that starts with a
/// combining mark joins the `:` before it into one character, and two spellings of an accented
/// letter are one character to Swift — a search by characters would miss both.
public enum URLSecrets {
    /// The query parameters whose values are credentials.
    static let secretParameters: Set<String> = ["password", "sslpassword"]

    /// The secrets in `url` — the password of its user info and any `password=` or
    /// `sslpassword=` query parameter (its name percent-encoded or not, as libpq decodes it) —
    /// as written and percent-decoded, longest first. Found by plain scanning, so that even a
    /// URL too malformed to parse gives its password up for redaction.
    public static func secrets(in url: String) -> [String] {
        let bytes = Array(url.utf8)
        var found = [ArraySlice<UInt8>]()
        // Query parameters count even without a "://": a URL whose scheme was mistyped is
        // repeated in the error that says so.
        let separator = bytes.firstRange(of: Array("://".utf8))
        let afterScheme = bytes[(separator?.upperBound ?? 0)...]
        let query = afterScheme.firstIndex(of: UInt8(ascii: "?")) ?? afterScheme.endIndex
        // The user info ends at the last "@" before the query: an unescaped "@" or "/" may sit
        // inside a password. Without an "@" before the first "?", that "?" may be the password's
        // own (libpq reads it so): then the user info ends at the last "@" of all.
        let at = UInt8(ascii: "@")
        if separator != nil, let end = afterScheme[..<query].lastIndex(of: at) ?? afterScheme.lastIndex(of: at),
            let colon = afterScheme[..<end].firstIndex(of: UInt8(ascii: ":"))
        {
            let password = afterScheme[(colon + 1)..<end]
            found.append(password)
            // libpq ends the user info at the *first* "@" and reads the rest as hosts, ports and a
            // database, which its messages quote: the pieces between those delimiters are secret
            // too (shorter than four bytes, hidden only where they stand as credentials or as
            // libpq quotes them: see redacting(_:in:)).
            let delimiters = Set("@:/,?#".utf8)
            found += password.split(whereSeparator: delimiters.contains).filter { $0.count < password.count }
        }
        if query < afterScheme.endIndex {
            for parameter in afterScheme[(query + 1)...].split(separator: UInt8(ascii: "&")) {
                let parts = parameter.split(separator: UInt8(ascii: "="), maxSplits: 1)
                guard parts.count == 2 else { continue }
                let name = String(decoding: parts[0], as: UTF8.self)
                guard secretParameters.contains((name.removingPercentEncoding ?? name).lowercased()) else { continue }
                found.append(parts[1])
                // As for the user info's password: pieces libpq may read as hosts or a database.
                let delimiters = Set("@:/,?#".utf8)
                found += parts[1].split(whereSeparator: delimiters.contains).filter { $0.count < parts[1].count }
            }
        }
        // Sets of bytes, not of strings: two spellings Swift treats as equal are both secrets.
        var secrets = Set<[UInt8]>()
        for secret in found where !secret.isEmpty {
            secrets.insert(Array(secret))
            if let decoded = String(decoding: secret, as: UTF8.self).removingPercentEncoding, !decoded.isEmpty {
                secrets.insert(Array(decoded.utf8))
            }
        }
        // Longest first, so that a secret containing another is replaced whole.
        return secrets.sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// `text` with every secret that `url` carries replaced by `***`.
    public static func redacting(_ url: String, in text: String) -> String {
        redacting(secrets(in: url), in: text)
    }

    /// `text` with every occurrence of each of `secrets` (in order), matched byte for byte,
    /// replaced by `***`. A secret shorter than four bytes only where it stands as a credential
    /// stands in a URL or as libpq quotes one (after `:`, `=` or a quote; before `@`, `&`, `#`,
    /// a quote, a space or the end): a password `1` would otherwise turn every address and
    /// count into `***`.
    public static func redacting(_ secrets: [String], in text: String) -> String {
        var bytes = Array(text.utf8)
        let before = Set(":=\"'".utf8), after = Set("@&#\"' )\n".utf8)
        for secret in secrets {
            let needle = Array(secret.utf8)
            guard let first = needle.first, bytes.firstRange(of: needle) != nil else { continue }
            let anywhere = needle.count >= 4
            var result = [UInt8]()
            result.reserveCapacity(bytes.count)
            var index = 0
            while index < bytes.count {
                if bytes[index] == first, bytes[index...].starts(with: needle),
                   anywhere || (index > 0 && before.contains(bytes[index - 1])
                       && (index + needle.count == bytes.count || after.contains(bytes[index + needle.count]))) {
                    result += "***".utf8
                    index += needle.count
                } else {
                    result.append(bytes[index])
                    index += 1
                }
            }
            bytes = result
        }
        // Valid UTF-8 cut only where a secret, itself valid UTF-8, starts and ends: still valid.
        return String(decoding: bytes, as: UTF8.self)
    }
}
