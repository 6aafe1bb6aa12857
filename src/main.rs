fn main() {
    std::process::exit(agent_rsh::cli::main());
}
