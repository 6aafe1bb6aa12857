//! `RunResult`, the bounded output capture, and the JSON-lines events.

use crate::denial::{Denial, DenialKind};
use base64::Engine as _;
use serde::Serialize;
use std::collections::VecDeque;

pub const SCHEMA: &str = "agent-rsh.run/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    Exited,
    Signaled,
    TimedOut,
    Denied,
    NotFound,
    Interrupted,
    Failed,
}

/// Exit codes of agent-rsh itself (besides the child's own).
pub mod code {
    pub const USAGE: i32 = 2;
    pub const TIMEOUT: i32 = 124;
    pub const FAILED: i32 = 125;
    pub const DENIED: i32 = 126;
    pub const NOT_FOUND: i32 = 127;
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub schema: &'static str,
    pub status: Status,
    pub command: String,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub stdout: String,
    pub stderr: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_encoding: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_encoding: Option<&'static str>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub truncated: bool,
    pub warnings: Vec<String>,
    pub confinement: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<Denial>,
    /// Why agent-rsh itself failed (status `failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the workspace is kept after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A compound command: every simple command it executed, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<CommandRecord>>,
}

/// One simple command a compound command executed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRecord {
    pub argv: Vec<String>,
    /// Byte offset of the command in the command string.
    pub offset: usize,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    /// A shell builtin run by agent-rsh itself (`cd`, `export`, ...).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub builtin: bool,
}

impl RunResult {
    /// agent-rsh's one line about how a run ended, for the text faces
    /// (`run` and the shell); none for a command that exited or was
    /// signalled on its own, and none for denials (each face words those).
    pub fn ending_line(&self) -> Option<String> {
        match self.status {
            Status::TimedOut => Some(format!(
                "agent-rsh: timed out after {} ms; the process tree was killed",
                self.duration_ms
            )),
            Status::Interrupted => Some(format!(
                "agent-rsh: interrupted by signal {}; the process tree was stopped",
                self.signal.unwrap_or(0)
            )),
            Status::Failed => Some(format!(
                "agent-rsh: failed: {}",
                self.error.as_deref().unwrap_or("unknown error")
            )),
            Status::Exited | Status::Signaled | Status::Denied | Status::NotFound => None,
        }
    }

    pub fn new(command: String, argv: Vec<String>, status: Status) -> RunResult {
        RunResult {
            schema: SCHEMA,
            status,
            command,
            argv,
            cwd: None,
            exit_code: None,
            signal: None,
            timed_out: false,
            duration_ms: 0,
            stdout: String::new(),
            stderr: String::new(),
            stdout_encoding: None,
            stderr_encoding: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
            warnings: Vec::new(),
            confinement: None,
            denial: None,
            error: None,
            workspace: None,
            commands: None,
        }
    }

    pub fn denied(command: String, denial: Denial) -> RunResult {
        let status = match denial.kind {
            DenialKind::Denied => Status::Denied,
            DenialKind::NotFound => Status::NotFound,
        };
        let mut r = RunResult::new(command, Vec::new(), status);
        r.denial = Some(denial);
        r
    }

    pub fn failed(command: String, error: String) -> RunResult {
        let mut r = RunResult::new(command, Vec::new(), Status::Failed);
        r.error = Some(error);
        r
    }

    /// agent-rsh's own exit code for this result.
    pub fn exit_code(&self) -> i32 {
        match self.status {
            Status::Exited => self.exit_code.unwrap_or(code::FAILED),
            Status::Signaled | Status::Interrupted => 128 + self.signal.unwrap_or(0),
            Status::TimedOut => code::TIMEOUT,
            Status::Denied => code::DENIED,
            Status::NotFound => code::NOT_FOUND,
            Status::Failed => self.exit_code.unwrap_or(code::FAILED),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("RunResult serializes")
    }
}

/// How captured bytes become the JSON string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8, lossily decoded when it is not (reported as `utf-8-lossy`).
    Text,
    Base64,
}

/// A bounded capture of one stream: the first `cap/2` bytes, the last
/// `cap - cap/2` bytes, and the true total. Memory never exceeds `cap`.
#[derive(Debug)]
pub struct Capture {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    pub fn new(cap: usize) -> Capture {
        Capture {
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        let head_cap = self.cap / 2;
        if self.head.len() < head_cap {
            let n = data.len().min(head_cap - self.head.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        let tail_cap = self.cap - head_cap;
        if data.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - tail_cap..]);
        } else {
            let overflow = (self.tail.len() + data.len()).saturating_sub(tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(data);
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The captured text and its encoding tag (None for clean UTF-8).
    pub fn render(&self, encoding: Encoding, strip: bool) -> (String, Option<&'static str>) {
        let elided = self.total - (self.head.len() + self.tail.len()) as u64;
        let (head, tail): (Vec<u8>, Vec<u8>) = if elided > 0 {
            (
                trim_partial_end(&self.head).to_vec(),
                trim_partial_start(self.tail.iter().copied().collect::<Vec<_>>()),
            )
        } else {
            (self.head.clone(), self.tail.iter().copied().collect())
        };
        let clean = |b: Vec<u8>| if strip { strip_ansi(&b) } else { b };
        let (head, tail) = (clean(head), clean(tail));
        let marker = format!("\n[agent-rsh: {elided} bytes elided]\n");
        match encoding {
            Encoding::Base64 => {
                let mut all = head;
                if elided > 0 {
                    all.extend_from_slice(marker.as_bytes());
                }
                all.extend_from_slice(&tail);
                (
                    base64::engine::general_purpose::STANDARD.encode(all),
                    Some("base64"),
                )
            }
            Encoding::Text => {
                let mut lossy = false;
                let mut text = decode(&head, &mut lossy);
                if elided > 0 {
                    text.push_str(&marker);
                }
                text.push_str(&decode(&tail, &mut lossy));
                (text, lossy.then_some("utf-8-lossy"))
            }
        }
    }
}

fn decode(bytes: &[u8], lossy: &mut bool) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => {
            *lossy = true;
            String::from_utf8_lossy(bytes).into_owned()
        }
    }
}

/// Drops an incomplete UTF-8 sequence cut off at the end of the head.
fn trim_partial_end(b: &[u8]) -> &[u8] {
    for back in 1..=3.min(b.len()) {
        let byte = b[b.len() - back];
        if byte & 0xC0 == 0xC0 {
            let need = if byte >= 0xF0 {
                4
            } else if byte >= 0xE0 {
                3
            } else {
                2
            };
            return if need > back { &b[..b.len() - back] } else { b };
        }
        if byte & 0x80 == 0 {
            return b;
        }
    }
    b
}

/// Drops UTF-8 continuation bytes cut off at the start of the tail.
fn trim_partial_start(mut b: Vec<u8>) -> Vec<u8> {
    let n = b.iter().take(3).take_while(|&&x| x & 0xC0 == 0x80).count();
    b.drain(..n);
    b
}

/// Removes ANSI escape sequences (CSI, OSC, and two-byte ESC sequences).
pub fn strip_ansi(input: &[u8]) -> Vec<u8> {
    if !input.contains(&0x1b) {
        return input.to_vec();
    }
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != 0x1b {
            out.push(input[i]);
            i += 1;
            continue;
        }
        i += 1;
        match input.get(i) {
            Some(b'[') => {
                i += 1;
                while i < input.len() && !(0x40..=0x7e).contains(&input[i]) {
                    i += 1;
                }
                i += 1;
            }
            Some(b']') => {
                i += 1;
                while i < input.len() {
                    if input[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if input[i] == 0x1b && input.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            Some(_) => {
                // nF sequences (e.g. `ESC ( B`): intermediates, then a final byte.
                while i < input.len() && (0x20..=0x2f).contains(&input[i]) {
                    i += 1;
                }
                i += 1;
            }
            None => {}
        }
    }
    out
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line of `--events` output.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Event<'a> {
    Start {
        command: &'a str,
        argv: &'a [String],
        cwd: &'a str,
        pid: i32,
    },
    Output {
        stream: Stream,
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        data_b64: Option<String>,
    },
    Exit(&'a RunResult),
}

/// Splits a byte stream into UTF-8 text chunks, carrying an incomplete
/// trailing sequence over to the next chunk; invalid bytes come out as
/// base64 instead.
#[derive(Default)]
pub struct Utf8Chunker {
    carry: Vec<u8>,
}

pub enum Chunk<'a> {
    Text(&'a str),
    Binary(&'a [u8]),
}

impl Utf8Chunker {
    pub fn feed<'a>(&'a mut self, data: &[u8], scratch: &'a mut Vec<u8>) -> Option<Chunk<'a>> {
        scratch.clear();
        scratch.extend_from_slice(&self.carry);
        scratch.extend_from_slice(data);
        self.carry.clear();
        match std::str::from_utf8(scratch) {
            Ok(_) => {}
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                self.carry.extend_from_slice(&scratch[valid..]);
                scratch.truncate(valid);
            }
            Err(_) => return Some(Chunk::Binary(scratch)),
        }
        if scratch.is_empty() {
            return None;
        }
        Some(Chunk::Text(
            std::str::from_utf8(scratch).expect("validated above"),
        ))
    }

    /// What is left at end of stream.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.carry.is_empty()).then(|| std::mem::take(&mut self.carry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_and_tail_and_counts() {
        let mut c = Capture::new(8);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"qr"] {
            c.push(chunk);
        }
        assert_eq!(c.total(), 18);
        assert!(c.truncated());
        let (text, enc) = c.render(Encoding::Text, false);
        assert_eq!(text, "abcd\n[agent-rsh: 10 bytes elided]\nopqr");
        assert_eq!(enc, None);
    }

    #[test]
    fn capture_under_cap_is_exact() {
        let mut c = Capture::new(100);
        c.push(b"hello\n");
        assert!(!c.truncated());
        assert_eq!(c.render(Encoding::Text, false).0, "hello\n");
    }

    #[test]
    fn invalid_utf8_is_reported() {
        let mut c = Capture::new(100);
        c.push(b"a\xffb");
        let (text, enc) = c.render(Encoding::Text, false);
        assert_eq!(text, "a\u{fffd}b");
        assert_eq!(enc, Some("utf-8-lossy"));
        assert_eq!(c.render(Encoding::Base64, false).0, "Yf9i");
    }

    #[test]
    fn cut_multibyte_chars_are_not_lossy() {
        let mut c = Capture::new(4);
        c.push("ééééé".as_bytes());
        let (_, enc) = c.render(Encoding::Text, false);
        assert_eq!(enc, None);
    }

    #[test]
    fn ansi_is_stripped() {
        assert_eq!(
            strip_ansi(b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok\x1b(B"),
            b"red ok"
        );
    }

    #[test]
    fn chunker_carries_split_chars() {
        let mut ch = Utf8Chunker::default();
        let mut s = Vec::new();
        let e = "é".as_bytes();
        assert!(ch.feed(&e[..1], &mut s).is_none());
        match ch.feed(&e[1..], &mut s) {
            Some(Chunk::Text(t)) => assert_eq!(t, "é"),
            _ => panic!("expected text"),
        }
        assert!(matches!(ch.feed(b"\xff", &mut s), Some(Chunk::Binary(_))));
    }

    #[test]
    fn exit_codes_follow_the_contract() {
        let mut r = RunResult::new(String::new(), vec![], Status::Signaled);
        r.signal = Some(9);
        assert_eq!(r.exit_code(), 137);
        r.status = Status::TimedOut;
        assert_eq!(r.exit_code(), 124);
    }
}
