import ArborCLI

/// The `arbor` executable: everything lives in the `ArborCLI` library so that it can be tested.
@main
struct ArborMain {
    static func main() async {
        await ArborCommand.main()
    }
}
