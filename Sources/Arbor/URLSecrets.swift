import Foundation

/// Finds and hides the secrets a store URL carries, so that no error, log line or description
/// ever shows a password. Adapters and the CLI use it alike.
public enum URLSecrets {
    /// The secrets in `url` — the password of its user info and any `password=` query
    /// parameter — as written and percent-decoded, longest first. Found by plain scanning, so
    /// that even a URL too malformed to parse gives its password up for redaction.
    public static func secrets(in url: String) -> [String] {
        guard let separator = url.range(of: "://") else { return [] }
        let afterScheme = url[separator.upperBound...]
        var found = [Substring]()
        // The user info ends at the last "@": an unescaped "@" or "/" may sit inside a password.
        if let at = afterScheme.lastIndex(of: "@"), let colon = afterScheme[..<at].firstIndex(of: ":") {
            found.append(afterScheme[afterScheme.index(after: colon)..<at])
        }
        if let query = afterScheme.firstIndex(of: "?") {
            for parameter in afterScheme[afterScheme.index(after: query)...].split(separator: "&") {
                let parts = parameter.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == "password" { found.append(parts[1]) }
            }
        }
        var secrets = Set<String>()
        for secret in found where !secret.isEmpty {
            secrets.insert(String(secret))
            if let decoded = secret.removingPercentEncoding, !decoded.isEmpty { secrets.insert(decoded) }
        }
        // Longest first, so that a secret containing another is replaced whole.
        return secrets.sorted { $0.count != $1.count ? $0.count > $1.count : $0 < $1 }
    }

    /// `text` with every secret that `url` carries replaced by `***`.
    public static func redacting(_ url: String, in text: String) -> String {
        secrets(in: url).reduce(text) { $0.replacingOccurrences(of: $1, with: "***") }
    }
}
