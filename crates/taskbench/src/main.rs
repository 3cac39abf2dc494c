fn main() -> std::process::ExitCode {
    taskbench::cli::main()
}
