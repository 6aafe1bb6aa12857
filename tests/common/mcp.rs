//! An MCP client over a real `agent-rsh mcp` process: one JSON message a
//! line, stdout read on a thread.

use super::PATIENCE;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};

pub struct Client {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Every message read so far, in order.
    pub seen: Vec<Value>,
}

impl Client {
    /// Starts `cmd` (an `agent-rsh mcp` command line) as the server.
    pub fn spawn(mut cmd: Command) -> Client {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.unwrap();
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string());
    }

    pub fn request(&mut self, id: Value, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// The next message; fails the test after `PATIENCE`.
    pub fn next(&mut self) -> Value {
        let v = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no message from the server ({e:?}); seen {:?}", self.seen));
        self.seen.push(v.clone());
        v
    }

    /// Reads until the response to `id`; returns it and the notifications
    /// read on the way.
    pub fn response(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut notes = Vec::new();
        loop {
            let v = self.next();
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return (v, notes);
            }
            notes.push(v);
        }
    }

    /// A request and its response.
    pub fn call(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.request(id.clone(), method, params);
        self.response(&id).0
    }

    /// Closes stdin and returns the exit code and every message left.
    pub fn close(mut self) -> (i32, Vec<Value>) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(v) => rest.push(v),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("server did not exit after stdin closed"),
            }
        }
        let status = self.child.wait().unwrap();
        (status.code().unwrap_or(-1), rest)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
