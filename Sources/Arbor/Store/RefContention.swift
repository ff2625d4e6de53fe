/// Randomised exponential backoff between compare-and-swap attempts on a contended ref.
///
/// Writers that retry at once after losing a swap mostly lose again to the next writer that did
/// the same; waiting a random while, up to a ceiling that doubles with every failure, spreads
/// them out (the usual remedy; the `sync` benchmark measures contention on one store).
struct RefContention {
    private var failures = 0

    /// Waits after a lost swap: a random time up to 1, 2, 4 … 128 ms. Not cut short by
    /// cancellation, so a commit whose version is written still lands in the head set, and
    /// waits as it should meanwhile: in a cancelled task `Task.sleep` returns at once, and a
    /// cancelled writer would retry without a pause. The wait runs in a task of its own.
    mutating func backOff() async {
        failures += 1
        let wait = Duration.microseconds(Int.random(in: 0...(1_000 << min(failures - 1, 7))))
        await Task.detached { try? await Task.sleep(for: wait) }.value
    }
}
