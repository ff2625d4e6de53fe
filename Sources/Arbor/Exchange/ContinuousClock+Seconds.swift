extension ContinuousClock.Instant {
    /// Seconds from this instant until now, as reports print them.
    var secondsUntilNow: Double {
        let elapsed: Duration = ContinuousClock.now - self
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
