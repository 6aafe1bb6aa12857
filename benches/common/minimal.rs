//! A minimal Rust binary, the baseline of a process's start-up cost:
//! `fn main` printing one line, built with agent-rsh's own release profile
//! (`[profile.release]` of Cargo.toml), so the difference is agent-rsh's own
//! start-up work and size, not the profile.

use std::process::Command;

/// A minimal Rust binary (prints one line) built with this package's
/// release profile, in a scratch directory under target/; None when it
/// cannot be built.
pub fn binary() -> Option<std::path::PathBuf> {
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-minimal");
    let bin = target.join("target/release/minimal");
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).ok()?;
    // The same [profile.release] as agent-rsh's.
    let profile = manifest
        .split("\n[")
        .find(|s| s.starts_with("profile.release]"))
        .map(|s| format!("[{s}\n"))
        .unwrap_or_default();
    std::fs::create_dir_all(target.join("src")).ok()?;
    let toml = format!(
        "[package]\nname = \"minimal\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n\n{profile}"
    );
    std::fs::write(target.join("Cargo.toml"), toml).ok()?;
    std::fs::write(
        target.join("src/main.rs"),
        "fn main() {\n    println!(\"minimal 0.1.0\");\n}\n",
    )
    .ok()?;
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(target.join("Cargo.toml"))
        .env_remove("RUSTFLAGS")
        .status()
        .ok()?;
    (st.success() && bin.is_file()).then_some(bin)
}
