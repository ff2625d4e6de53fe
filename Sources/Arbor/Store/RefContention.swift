/// Randomised exponential backoff between compare-and-swap attempts on a contended ref.
///
/// Writers that retry at once after losing a swap mostly lose again to the next writer that did
/// the same; waiting a random while, up to a ceiling that doubles with every failure, spreads
/// them out (the usual remedy; the `sync` benchmark measures contention on one store).
struct RefContention {
    private var failures = 0

    /// Waits after a lost swap: a random time up to 1, 2, 4 … 128 ms. Not cut short by
    /// cancellation, so a commit whose version is written still lands in the head set.
    mutating func backOff() async {
        failures += 1
        let ceiling = 1_000 << min(failures - 1, 7)
        try? await Task.sleep(for: .microseconds(Int.random(in: 0...ceiling)))
    }
}
