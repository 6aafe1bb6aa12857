//! What every face's tests stand on: the binary, policy files, process
//! scans and waits, the MCP client, throwaway accounts.

#![allow(dead_code)]

pub mod accounts;
pub mod mcp;
mod prereq;
pub mod tmux;

pub use prereq::*;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The agent-rsh binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-rsh");

/// Bound on waiting for anything a test waits for; a failure bound, never
/// a measurement.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// agent-rsh with no policy from the environment.
pub fn agent() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("AGENT_RSH_POLICY");
    c
}

/// A policy file in a temp dir that lives as long as this value.
pub struct TestPolicy {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// A policy file with this text.
pub fn policy(body: &str) -> TestPolicy {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, body).unwrap();
    TestPolicy { dir, path }
}

/// Parses a whole output as one JSON value, or fails saying what it was.
pub fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("bad JSON {e}: {}", String::from_utf8_lossy(out)))
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A name unique to this test process and call (other test runs share
/// the machine).
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

/// A `sleep` argument unique to this test process and call, starting with
/// `tag` seconds, so process scans only ever see this test's sleeps.
pub fn marker(tag: u32) -> String {
    format!(
        "{tag}.{:07}{:04}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

/// Processes whose command line contains `needle`, as `pid: cmdline`
/// (read from /proc, so no procps is needed).
pub fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

/// `sleep` processes whose command line contains `needle`, as `pid: cmdline`.
pub fn sleeps_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.starts_with("sleep ") && cmd.contains(needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

/// Polls `f` until it holds; fails the test after `PATIENCE`.
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    assert!(wait_until(&mut f), "timed out waiting for {what}");
}

/// Polls `f` until it holds or `PATIENCE` passes; says which.
pub fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + PATIENCE;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (a while) for the sleeps with `needle` to end; returns those
/// still there.
pub fn wait_until_gone(needle: &str) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left = sleeps_with(needle);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when the tests run as root.
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A test that cannot run here (`why`) returns early by calling this:
/// under CI (`CI=true`) that is a failure, since CI is set up to run
/// everything; elsewhere it says `SKIPPED <test>: <why>` on stderr and
/// passes (`prereq::unavailable`).
pub fn cannot_run(why: &str) {
    prereq::unavailable("a test", why);
}

/// The agent-rsh binary under test, as a function (for `Command::new`).
pub fn bin() -> &'static str {
    BIN
}
