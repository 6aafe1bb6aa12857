fn main() -> std::process::ExitCode {
    // A panic ends the process where it happens, as `panic = "abort"`
    // would: nothing unwinds through a forked child's copy of the parent's
    // state, and no thread of the MCP server or a job's supervisor goes on
    // with a half-done update. Set here rather than in the release profile
    // so that `cargo test --release` reuses what `cargo build --release`
    // compiled (the test harness needs unwinding, and a profile's
    // `panic = "abort"` makes cargo build every dependency twice).
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    agent_rsh::cli::main()
}
