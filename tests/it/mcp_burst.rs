//! `agent-rsh mcp` under a burst of concurrent tool calls: every call
//! counts toward `mcp.max_concurrent_calls`, so however many calls a
//! client sends at once the server keeps a bounded number of threads,
//! stays alive, and answers every call (the work, or an `isError` "busy"
//! result saying to call again once a call has finished).
//!
//! Each call of a burst has work that keeps its thread: `kill` waits for
//! a job that ignores TERM to be killed after the grace period, `grep`
//! searches 15 MB of output, `run` starts a process tree; `output` reads
//! a page. The thread count is read from /proc while the answers come
//! in. No timing is asserted: the bound is checked at every sample,
//! whatever the machine's speed, and the waits are deadlock guards.

use crate::common::{BIN, PATIENCE, marker};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Calls in one burst.
const CALLS: usize = 500;
/// The policy's `mcp.max_concurrent_calls`.
const MAX_CALLS: usize = 8;
/// Calls of the quick job tools (output, grep, kill) taken past the
/// bound, so a model can read and stop its jobs while runs fill it.
const QUICK_RESERVE: usize = 4;
/// Threads besides those of the calls: the main thread, the one reading
/// stdin, the signal watcher, up to four kept waiting for the next call,
/// and a few on their way out.
const FIXED_THREADS: usize = 12;

struct Server {
    _dir: tempfile::TempDir,
    child: Child,
    stdin: Arc<Mutex<ChildStdin>>,
    lines: Receiver<Value>,
    next_id: u64,
    /// The most threads seen at once.
    peak: usize,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let wsp = dir.path().join("workspaces");
        std::fs::create_dir(&wsp).unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                r#"
[commands]
allow = ["sleep", "seq", "echo", "env"]
[limits]
kill_grace_ms = 3000
[workspace]
parent = "{}"
[mcp]
max_concurrent_calls = {MAX_CALLS}
"#,
                wsp.display()
            ),
        )
        .unwrap();
        let mut child = Command::new(BIN)
            .arg("mcp")
            .arg("--policy")
            .arg(&policy)
            .env_remove("AGENT_RSH_POLICY")
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Server {
            _dir: dir,
            child,
            stdin: Arc::new(Mutex::new(stdin)),
            lines: rx,
            next_id: 0,
            peak: 0,
        }
    }

    fn ceiling() -> usize {
        // A `run` with a progress token has one more thread, its progress
        // sender; the bursts below send none.
        MAX_CALLS + QUICK_RESERVE + FIXED_THREADS
    }

    /// The server's threads now; fails the test if the server is gone or
    /// holds more than the ceiling.
    fn sample(&mut self, what: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("{what}: the server died ({status}) during the burst");
        }
        let pid = self.child.id();
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return; // exiting: try_wait says so next time
        };
        let threads: usize = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no Threads: line in /proc/{pid}/status"));
        self.peak = self.peak.max(threads);
        assert!(
            threads <= Self::ceiling(),
            "{what}: the server holds {threads} threads, more than {} \
             (max_concurrent_calls {MAX_CALLS}, {QUICK_RESERVE} quick calls past it, {FIXED_THREADS} others)",
            Self::ceiling()
        );
    }

    fn send(&self, msg: &Value) {
        let mut w = self.stdin.lock().unwrap();
        writeln!(w, "{msg}").unwrap();
        w.flush().unwrap();
    }

    /// One call, answered before the next (stdout read throughout).
    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}));
        loop {
            let v = self
                .lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|e| panic!("no answer to {tool} {id} ({e:?})"));
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{tool}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Sends `CALLS` calls of `tool` at once and reads every answer; the
    /// thread count is sampled all along. Returns the results.
    fn burst(&mut self, tool: &str, args: Value) -> Vec<Value> {
        let what = format!("{CALLS} {tool} calls");
        let ids: Vec<String> = (0..CALLS).map(|i| format!("{tool}-{i}")).collect();
        let mut text = String::new();
        for id in &ids {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": args}});
            text.push_str(&msg.to_string());
            text.push('\n');
        }
        let stdin = self.stdin.clone();
        let writer = std::thread::spawn(move || {
            let mut w = stdin.lock().unwrap();
            // The server may be gone; the samples say so.
            let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
        });
        let mut waiting: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let mut results = Vec::new();
        // A deadlock guard only: every answer comes long before.
        let guard = Instant::now() + PATIENCE * 4;
        while !waiting.is_empty() {
            self.sample(&what);
            match self.lines.recv_timeout(Duration::from_millis(5)) {
                Ok(v) => {
                    let Some(id) = v["id"].as_str() else { continue };
                    assert!(v.get("error").is_none(), "{what}: {v}");
                    if waiting.remove(id) {
                        results.push(v["result"].clone());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    assert!(
                        Instant::now() < guard,
                        "{what}: {} calls never answered",
                        waiting.len()
                    );
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "{what}: the server closed stdout with {} calls unanswered",
                        waiting.len()
                    )
                }
            }
        }
        writer.join().unwrap();
        self.sample(&what);
        results
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or("")
}

/// Splits a burst's results into the calls that did their work and those
/// refused as busy; any other answer fails the test.
fn tally(tool: &str, results: &[Value], done: impl Fn(&Value) -> bool) -> (usize, usize) {
    let (mut ok, mut busy) = (0, 0);
    for r in results {
        if text(r).contains("max_concurrent_calls") {
            assert_eq!(r["isError"], true, "{tool}: {r}");
            assert!(
                text(r).contains(&format!("then call {tool} again")),
                "a busy result says what to do: {r}"
            );
            busy += 1;
        } else {
            assert!(done(r), "{tool}: {r}");
            ok += 1;
        }
    }
    eprintln!("{tool}: {ok} done, {busy} busy");
    assert!(ok > 0, "{tool}: no call did its work");
    (ok, busy)
}

#[test]
fn a_burst_of_calls_keeps_the_server_alive_and_its_threads_bounded() {
    let mut s = Server::start();
    s.sample("idle");
    // A finished job with output to page and search.
    let out = s.call("spawn", json!({"command": "seq 1 2000000"}));
    assert_eq!(out["isError"], false, "{out}");
    let done = out["structuredContent"]["id"].as_str().unwrap().to_string();
    let guard = Instant::now() + PATIENCE * 4;
    loop {
        let st = s.call("status", json!({"id": done, "waitMs": 10000}));
        match st["structuredContent"]["status"].as_str() {
            Some("exited") => break,
            Some("running") if Instant::now() < guard => {}
            _ => panic!("seq did not end: {st}"),
        }
    }

    let results = s.burst("output", json!({"id": done, "limit": 200}));
    tally("output", &results, |r| {
        r["isError"] == false && text(r).contains("\n1\n2\n")
    });

    let results = s.burst("grep", json!({"id": done, "pattern": "^1999999$"}));
    tally("grep", &results, |r| {
        r["isError"] == false && text(r).contains("1999999")
    });

    // A job that outlives TERM: every kill waits for the grace period's
    // KILL (or finds the job ended).
    let sleeper = s.call(
        "spawn",
        json!({"command": format!("env --ignore-signal=TERM sleep {}", marker(80))}),
    );
    assert_eq!(sleeper["isError"], false, "{sleeper}");
    let running = sleeper["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let results = s.burst("kill", json!({"id": running}));
    tally("kill", &results, |r| {
        r["isError"] == false && r["structuredContent"]["status"] != "running"
    });

    let results = s.burst("run", json!({"command": "echo burst"}));
    let (ok, _) = tally("run", &results, |r| {
        r["isError"] == false && r["structuredContent"]["stdout"] == "burst\n"
    });
    assert!(ok <= CALLS);

    // Still serving, one call at a time as before.
    let r = s.call("run", json!({"command": "echo after"}));
    assert_eq!(r["structuredContent"]["stdout"], "after\n", "{r}");
    eprintln!("peak threads: {} (ceiling {})", s.peak, Server::ceiling());
}
