//! `run --events` throughput on binary output against text mode's, the
//! same command through the binary, paired (alternating) so drift affects
//! both alike: `head -c SIZE` of NUL bytes (valid UTF-8 that JSON would
//! escape byte by byte) and of random bytes (not UTF-8), and, as the
//! baseline of an ordinary log, text lines. Output goes to /dev/null.
//!
//! `cargo bench --bench events` (N=pairs, default 7; MIB=size, default 256;
//! `-- --quick`: 3 pairs of 32 MiB).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agent-rsh");

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(policy: &std::path::Path, events: bool, cmd: &str) -> Duration {
    let mut c = Command::new(BIN);
    c.arg("run").arg("--policy").arg(policy);
    if events {
        c.arg("--events");
    }
    let t = Instant::now();
    let st = c
        .args(["--timeout", "600000", "--", cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("agent-rsh runs");
    let d = t.elapsed();
    assert!(st.success(), "{cmd}: {st}");
    d
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("N", if quick { 3 } else { 7 });
    let mib = env("MIB", if quick { 32 } else { 256 });
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[commands]\nallow = [\"head\", \"yes\", \"bash\"]\n",
    )
    .unwrap();
    let bytes = mib << 20;
    let cases = [
        ("NUL bytes", format!("head -c {bytes} /dev/zero")),
        ("random bytes", format!("head -c {bytes} /dev/urandom")),
        (
            "text lines",
            format!("bash -c 'yes \"a line of ordinary log output\" | head -c {bytes}'"),
        ),
    ];
    println!("agent-rsh run, {mib} MiB of output to /dev/null, median of {n} pairs");
    for (label, cmd) in cases {
        let (mut text, mut events) = (Vec::new(), Vec::new());
        for _ in 0..n {
            text.push(time(&policy, false, &cmd));
            events.push(time(&policy, true, &cmd));
        }
        let (t, e) = (median(text), median(events));
        let mbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e6;
        println!(
            "{label:<14} text {:>7.0} MB/s   --events {:>7.0} MB/s   events/text throughput {:.2}",
            mbs(t),
            mbs(e),
            t.as_secs_f64() / e.as_secs_f64()
        );
    }
}
