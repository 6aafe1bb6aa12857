//! Cost of a `run` through the MCP server, per call, against what an agent
//! would otherwise pay: one `agent-rsh run --json` process per command, and
//! the engine's own floor (`engine::execute` in this process), and against
//! the baseline, `timeout 10 CMD` (one supervised exec; target: an
//! MCP `run true` round trip at most 1.0x). The four are interleaved so
//! drift affects them alike; CPU time per call is summed over the rounds.
//!
//! `cargo bench --bench mcp_cost` (N=... sets the number of rounds).

use agent_rsh::admit::Request;
use agent_rsh::engine::{self, RunOptions};
use agent_rsh::exec::Sink;
use agent_rsh::policy::{Policy, Source};
use agent_rsh::result::Stream;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/stats.rs"]
mod stats;

struct Null;
impl Sink for Null {
    fn output(&mut self, _: Stream, _: &[u8]) {}
}

const POLICY: &str = "[commands]\nallow = [\"true\", \"echo\"]\n";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let bin = env!("CARGO_BIN_EXE_agent-rsh");
    let dir = tempfile::tempdir().expect("temp dir");
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, POLICY).expect("write policy");
    let policy = Policy::parse(POLICY, Source::Embedded).expect("bench policy parses");

    let mut server = Command::new(bin)
        .arg("mcp")
        .arg("--policy")
        .arg(&policy_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start agent-rsh mcp");
    let mut to_server = server.stdin.take().expect("stdin");
    let mut from_server = BufReader::new(server.stdout.take().expect("stdout"));
    let mut id = 0u64;
    let mut mcp_call = |command: &str| {
        id += 1;
        let req = if command == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "run", "arguments": {"command": command}}})
        };
        let t = Instant::now();
        writeln!(to_server, "{req}").expect("write request");
        to_server.flush().expect("flush");
        let mut line = String::new();
        from_server.read_line(&mut line).expect("read response");
        let elapsed = t.elapsed();
        let v: Value = serde_json::from_str(&line).expect("response is JSON");
        assert!(
            v["result"].is_object() && v["result"]["isError"] != true,
            "{line}"
        );
        elapsed
    };
    let cli_run = |command: &str| {
        let t = Instant::now();
        let out = Command::new(bin)
            .args(["run", "--json", "--policy"])
            .arg(&policy_path)
            .arg(command)
            .output()
            .expect("run agent-rsh");
        let elapsed = t.elapsed();
        assert!(out.status.success());
        elapsed
    };
    let engine_run = |command: &str| {
        let req = Request::line(command);
        let cpu0 = stats::self_cpu() + stats::children_cpu();
        let t = Instant::now();
        let r = engine::execute(&policy, &req, &RunOptions::default(), &mut Null);
        let elapsed = t.elapsed();
        assert_eq!(r.exit_code, Some(0));
        (
            elapsed,
            (stats::self_cpu() + stats::children_cpu()).saturating_sub(cpu0),
        )
    };

    // The baseline of the target: one supervised exec of the same
    // command by coreutils' `timeout`.
    let timeout_run = |command: &str| {
        let before = stats::children_cpu();
        let t = Instant::now();
        let st = Command::new("timeout")
            .arg("10")
            .args(command.split(' '))
            .stdout(Stdio::null())
            .status()
            .expect("run timeout");
        let elapsed = t.elapsed();
        assert!(st.success());
        (elapsed, stats::children_cpu().saturating_sub(before))
    };

    // Warm up once-per-process work on every path.
    mcp_call("true");
    cli_run("true");
    engine_run("true");
    timeout_run("true");
    println!("per-call wall time, median of {n} interleaved rounds");
    let ping = median((0..n).map(|_| mcp_call("ping")).collect());
    println!(
        "protocol round trip alone (ping): {:.1} us",
        ping.as_secs_f64() * 1e6
    );
    for command in ["true", "echo hello"] {
        let (mut m, mut c, mut e, mut t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut server_cpu, mut timeout_cpu, mut engine_cpu) =
            (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for _ in 0..n {
            let cpu0 = process_cpu(server.id());
            m.push(mcp_call(command));
            server_cpu += process_cpu(server.id()).saturating_sub(cpu0);
            c.push(cli_run(command));
            let (wall, cpu) = engine_run(command);
            e.push(wall);
            engine_cpu += cpu;
            let (wall, cpu) = timeout_run(command);
            t.push(wall);
            timeout_cpu += cpu;
        }
        let ratio = |a: &[Duration], b: &[Duration]| {
            let mut r: Vec<f64> = a
                .iter()
                .zip(b)
                .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
                .collect();
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        };
        let to_timeout = ratio(&m, &t);
        let (m, c, e, t) = (median(m), median(c), median(e), median(t));
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{command:<12} engine {:>8.1} us   mcp call {:>8.1} us   `run --json` process {:>8.1} us   `timeout 10 {command}` {:>8.1} us",
            us(e),
            us(m),
            us(c),
            us(t)
        );
        println!(
            "{:<12} mcp/engine {:.3}   mcp/process {:.3}   mcp/timeout {to_timeout:.3} (per-round median){}",
            "",
            us(m) / us(e),
            us(m) / us(c),
            if command == "true" {
                format!(
                    "   target ≤ 1.00: {}",
                    if to_timeout <= 1.0 { "pass" } else { "miss" }
                )
            } else {
                String::new()
            }
        );
        println!(
            "{:<12} CPU per call: mcp server (with its guardian and command) {:.0} us, engine {:.0} us, timeout {:.0} us, mcp/timeout {:.2}",
            "",
            us(server_cpu) / n as f64,
            us(engine_cpu) / n as f64,
            us(timeout_cpu) / n as f64,
            server_cpu.as_secs_f64() / timeout_cpu.as_secs_f64().max(1e-9)
        );
    }
    drop(to_server);
    let _ = server.wait();
}

/// CPU time of a process and the children it reaped (/proc/PID/stat
/// utime, stime, cutime, cstime), in clock ticks' resolution.
fn process_cpu(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|x| x.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(f.iter().sum::<u64>() * 1_000_000_000 / hz)
}
