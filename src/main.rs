fn main() -> std::process::ExitCode {
    agent_rsh::cli::main()
}
