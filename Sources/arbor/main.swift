import ArborCLI
