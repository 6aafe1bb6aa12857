//! What a background job costs the caller, against `agent-rsh run true`
//! measured in the same run (paired, alternating, so drift affects both):
//! `spawn` (returns once the command runs under its detached supervisor),
//! and the queries `status` and `output`, each a fresh process.
//!
//! `cargo bench --bench jobs_spawn` (N=... sets the number of rounds).

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agent-rsh");

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[commands]\nallow = [\"true\", \"echo\"]\n[jobs]\nmax_concurrent = 1000\n",
    )
    .expect("policy");
    let state = dir.path().join("state");
    let call = |args: &[&str]| -> (Duration, Vec<u8>) {
        let t = Instant::now();
        let out = Command::new(BIN)
            .env_remove("AGENT_RSH_POLICY")
            .env("XDG_STATE_HOME", &state)
            .arg(args[0])
            .arg("--policy")
            .arg(&policy)
            .args(&args[1..])
            .output()
            .expect("agent-rsh runs");
        assert!(out.status.success(), "{args:?}: {out:?}");
        (t.elapsed(), out.stdout)
    };
    let (mut run, mut spawn, mut status, mut output) = (vec![], vec![], vec![], vec![]);
    for _ in 0..n {
        run.push(call(&["run", "true"]).0);
        let (d, out) = call(&["spawn", "echo hello"]);
        spawn.push(d);
        let v: serde_json::Value = serde_json::from_slice(&out).expect("spawn JSON");
        let id = v["id"].as_str().expect("id").to_string();
        status.push(call(&["status", &id]).0);
        output.push(call(&["output", &id]).0);
    }
    let base = median(run);
    println!(
        "agent-rsh run true (baseline)      {:>8.2} ms",
        base.as_secs_f64() * 1e3
    );
    for (label, v) in [("spawn", spawn), ("status", status), ("output", output)] {
        let m = median(v);
        println!(
            "agent-rsh {label:<24} {:>8.2} ms   ratio to run {:.2}",
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / base.as_secs_f64()
        );
    }
}
