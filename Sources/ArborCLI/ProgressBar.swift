import Arbor
import Foundation
import Synchronization

/// A one-line progress display for long transfers, on standard error, only when standard error
/// is a terminal: piped or redirected output stays clean.
final class ProgressBar: Sendable {
    private let isEnabled: Bool
    private let label: String
    private let shown = Mutex(false)

    init(label: String, enabled: Bool = isatty(STDERR_FILENO) == 1) {
        self.label = label
        self.isEnabled = enabled
    }

    /// The handler to give a transfer, or `nil` when nothing is shown.
    var handler: TransferProgressHandler? {
        guard isEnabled else { return nil }
        return { [self] progress in draw(progress) }
    }

    private func draw(_ progress: TransferProgress) {
        show(progress.line)
    }

    /// Draws `text` after the label, over what the bar showed last (when enabled).
    func show(_ text: String) {
        guard isEnabled else { return }
        // Fitted to the terminal: a line that wraps leaves a new row at every redraw, as `\r`
        // goes back only to the start of its last row.
        let line = "\r" + Self.fitted("\(label) " + text, columns: Self.terminalColumns()) + "\u{1B}[K"
        shown.withLock { shown in
            shown = true
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    /// Ends the line the bar was drawn on, if it was drawn.
    func finish() {
        shown.withLock { shown in
            if shown { FileHandle.standardError.write(Data("\n".utf8)) }
            shown = false
        }
    }

    /// The columns of the terminal on standard error, or 80 where it does not say.
    static func terminalColumns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// `text` cut to fit in one row of `columns`, the last left free (a character there wraps
    /// the cursor on some terminals). Counted in characters: a line with wide characters (a
    /// store path in CJK, which `arbor conformance` shows) can still wrap.
    static func fitted(_ text: String, columns: Int) -> String {
        String(text.prefix(max(columns - 1, 1)))
    }

    static func bytes(_ count: Int) -> String {
        let units = ["B", "kB", "MB", "GB", "TB"]
        var value = Double(count)
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 3600
            ? String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60)
            : String(format: "%d:%02d", total / 60, total % 60)
    }
}

extension TransferProgress {
    /// `[########------------]  42%  versions 3/10  12345 objects  4.5 MB  1.2 MB/s  ETA 0:12`;
    /// while a migration verifies, `verifying` instead of the versions.
    public var line: String {
        let width = 20
        let filled = Int((fractionDone * Double(width)).rounded(.down))
        var text = "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
        text += String(format: " %3d%%", Int(fractionDone * 100))
        text += phase == .verifying ? "  verifying" : "  versions \(versionsDone)/\(versionsTotal)"
        text += "  \(objects) objects  \(ProgressBar.bytes(bytes))  \(ProgressBar.bytes(Int(bytesPerSecond)))/s"
        if let secondsRemaining { text += "  ETA " + ProgressBar.duration(secondsRemaining) }
        return text
    }
}
