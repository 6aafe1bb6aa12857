//! Cost of a `run` through the MCP server, per call, against what an agent
//! would otherwise pay: one `agent-rsh run --json` process per command, and
//! the engine's own floor (`engine::execute` in this process). The three
//! are interleaved so drift affects them alike.
//!
//! `cargo bench --bench mcp_cost` (N=... sets the number of rounds).

use agent_rsh::check::Request;
use agent_rsh::engine::{self, RunOptions};
use agent_rsh::exec::Sink;
use agent_rsh::policy::{Policy, Source};
use agent_rsh::result::Stream;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
        let t = Instant::now();
        let r = engine::execute(&policy, &req, &RunOptions::default(), &mut Null);
        let elapsed = t.elapsed();
        assert_eq!(r.exit_code, Some(0));
        elapsed
    };

    // Warm up once-per-process work on every path.
    mcp_call("true");
    cli_run("true");
    engine_run("true");
    println!("per-call wall time, median of {n} interleaved rounds");
    let ping = median((0..n).map(|_| mcp_call("ping")).collect());
    println!(
        "protocol round trip alone (ping): {:.1} us",
        ping.as_secs_f64() * 1e6
    );
    for command in ["true", "echo hello"] {
        let (mut m, mut c, mut e) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            m.push(mcp_call(command));
            c.push(cli_run(command));
            e.push(engine_run(command));
        }
        let (m, c, e) = (median(m), median(c), median(e));
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{command:<12} engine {:>8.1} us   mcp call {:>8.1} us   `run --json` process {:>8.1} us",
            us(e),
            us(m),
            us(c)
        );
        println!(
            "{:<12} mcp/engine {:.3}   mcp/process {:.3}",
            "",
            us(m) / us(e),
            us(m) / us(c)
        );
    }
    drop(to_server);
    let _ = server.wait();
}
