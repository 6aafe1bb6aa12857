//! `RunResult`, the bounded output capture, and the JSON-lines events.

use crate::denial::{Denial, DenialKind};
use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::VecDeque;

pub const SCHEMA: &str = "agent-rsh.run/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// What a run did. Read back (a job's result file, its supervisor's
/// report) it is the same value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub schema: Schema,
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
    /// `utf-8-lossy` when invalid UTF-8 was replaced, `base64` on request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_encoding: Option<OutputEncoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_encoding: Option<OutputEncoding>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub truncated: bool,
    pub warnings: Vec<String>,
    /// What the kernel enforced for this run.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub confinement: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial: Option<Denial>,
    /// Why agent-rsh itself failed (status `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the workspace is kept after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A compound command: every simple command it executed, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<CommandRecord>>,
    /// Commands refused inside script files the run executed (`./x.sh`,
    /// `sh -c`, `source`): each failed with 126 and its script went on.
    /// Deduplicated by file, line and rule; at most `MAX_REFUSALS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<ScriptRefusal>,
    /// With `network = { allow = [...] }`: what the run asked agent-rsh's
    /// proxy for, by host and port, admitted or refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkReport>,
}

/// The hosts a run reached through agent-rsh's proxy and those it was
/// refused, one entry per host, port (and reason), in the order first
/// asked; at most `MAX_NETWORK_ENTRIES` of each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkReport {
    pub allowed: Vec<HostUse>,
    pub refused: Vec<HostRefusal>,
    /// Connections asked for that no entry above counts (past the bounds).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlisted: u64,
}

/// Entries of each list of a `NetworkReport` at most.
pub const MAX_NETWORK_ENTRIES: usize = 50;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostUse {
    pub host: String,
    pub port: u16,
    pub connections: u64,
    /// Bytes relayed, both directions.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostRefusal {
    pub host: String,
    pub port: u16,
    pub reason: String,
    /// The policy key that would allow it.
    pub hint: String,
    pub connections: u64,
}

/// Refusals listed in a RunResult at most.
pub const MAX_REFUSALS: usize = 100;

/// A command refused inside a script file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScriptRefusal {
    /// The script as it was named (`./run.sh`), or `$0` of `sh -c`.
    pub file: String,
    /// 1-based.
    pub line: usize,
    pub rule: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One simple command a compound command executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandRecord {
    pub argv: Vec<String>,
    /// Byte offset of the command in the command string.
    pub offset: usize,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    /// A shell builtin run by agent-rsh itself (`cd`, `export`, ...).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub builtin: bool,
}

/// The `schema` field: always `SCHEMA`; reading another is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Schema;

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(SCHEMA)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Schema, D::Error> {
        let s = String::deserialize(d)?;
        if s == SCHEMA {
            Ok(Schema)
        } else {
            Err(serde::de::Error::custom(format!(
                "schema {s:?}: this agent-rsh reads {SCHEMA}"
            )))
        }
    }
}

impl schemars::JsonSchema for Schema {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Schema".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "const": SCHEMA })
    }

    fn inline_schema() -> bool {
        true
    }
}

/// How captured output differs from the bytes the command wrote (absent:
/// it is exactly them, as UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum OutputEncoding {
    /// Not valid UTF-8: decoded with U+FFFD for the invalid bytes.
    #[serde(rename = "utf-8-lossy")]
    Utf8Lossy,
    /// The bytes in base64 (asked for).
    #[serde(rename = "base64")]
    Base64,
}

impl RunResult {
    /// agent-rsh's one line about how a run ended, for the text faces
    /// (`run` and the shell); none for a command that exited or was
    /// signalled on its own, and none for denials (each face words those).
    pub fn ending_line(&self) -> Option<String> {
        match self.status {
            Status::TimedOut => Some(format!(
                "agent-rsh: timed out after {} ms; the process tree was killed (limits.timeout_ms bounds a run; start longer work as a background job with `agent-rsh spawn` and read it with `agent-rsh output`)",
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
            schema: Schema,
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
            refusals: Vec::new(),
            network: None,
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

    /// Bytes held (head and tail).
    pub fn held(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The captured text and its encoding tag (None for clean UTF-8),
    /// whole.
    pub fn render(&self, encoding: Encoding, strip: bool) -> (String, Option<OutputEncoding>) {
        self.render_limited(encoding, strip, usize::MAX)
    }

    /// The captured text with at most about `limit` bytes of output: the
    /// head and the tail, cut at line boundaries (at a character boundary
    /// only when a piece holds no line break), the elided middle stated in
    /// a marker line.
    pub fn render_limited(
        &self,
        encoding: Encoding,
        strip: bool,
        limit: usize,
    ) -> (String, Option<OutputEncoding>) {
        let (head, tail) = self.pieces(limit);
        let elided = self.total - (head.len() + tail.len()) as u64;
        let clean = |b: &[u8]| if strip { strip_ansi(b) } else { b.to_vec() };
        let (head, tail) = (clean(&head), clean(&tail));
        let marker = if elided == 0 {
            String::new()
        } else {
            format!(
                "{}[agent-rsh: {elided} bytes elided]\n",
                if head.is_empty() || head.ends_with(b"\n") {
                    ""
                } else {
                    "\n"
                }
            )
        };
        match encoding {
            Encoding::Base64 => {
                let mut all = head;
                all.extend_from_slice(marker.as_bytes());
                all.extend_from_slice(&tail);
                (
                    base64::engine::general_purpose::STANDARD.encode(all),
                    Some(OutputEncoding::Base64),
                )
            }
            Encoding::Text => {
                let mut lossy = false;
                let mut text = decode(&head, &mut lossy);
                text.push_str(&marker);
                text.push_str(&decode(&tail, &mut lossy));
                (text, lossy.then_some(OutputEncoding::Utf8Lossy))
            }
        }
    }

    /// The head and tail pieces shown within `limit` bytes.
    fn pieces(&self, limit: usize) -> (Vec<u8>, Vec<u8>) {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let contiguous = !self.truncated();
        if contiguous && self.held() <= limit {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return (all, Vec::new());
        }
        let head_budget = limit / 2;
        let tail_budget = limit - head_budget;
        if contiguous {
            // One buffer, longer than the limit: cut both ends from it.
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            let head = cut_head(&all[..head_budget]).to_vec();
            let start = all.len() - tail_budget;
            let tail = cut_tail(&all[start..], all[start - 1] == b'\n').to_vec();
            return (head, tail);
        }
        let head = cut_head(&self.head[..self.head.len().min(head_budget)]).to_vec();
        let start = tail.len() - tail.len().min(tail_budget);
        // The byte before the tail was elided: its first line is partial
        // unless the tail starts right after the head... which it never
        // does when bytes were elided between them.
        let tail = cut_tail(&tail[start..], false).to_vec();
        (head, tail)
    }
}

/// The head piece up to its last line break; without one in its second
/// half (very long lines), up to its last whole character.
fn cut_head(b: &[u8]) -> &[u8] {
    match b.iter().rposition(|&c| c == b'\n') {
        Some(i) if 2 * (i + 1) >= b.len() => &b[..=i],
        _ => trim_partial_end(b),
    }
}

/// The tail piece from its first whole line (`at_line_start`: it already
/// starts one); without a line break, from its first whole character.
fn cut_tail(b: &[u8], at_line_start: bool) -> &[u8] {
    if at_line_start {
        return b;
    }
    match b.iter().position(|&c| c == b'\n') {
        Some(i) if 2 * i < b.len() => &b[i + 1..],
        _ => {
            let n = b.iter().take(3).take_while(|&&x| x & 0xC0 == 0x80).count();
            &b[n..]
        }
    }
}

/// How a budget of `limit` bytes is shared between stdout and stderr,
/// holding `out` and `err` bytes: each gets half, and what one does not
/// use goes to the other.
pub fn shares(limit: usize, out: usize, err: usize) -> (usize, usize) {
    let half = limit / 2;
    if out + err <= limit {
        (out, err)
    } else if out <= half {
        (out, limit - out)
    } else if err <= half {
        (limit - err, err)
    } else {
        (half, limit - half)
    }
}

/// The default of `--max-output` and the MCP `maxOutputBytes`: output
/// shown per run, both streams together (about 8k tokens).
pub const DEFAULT_MAX_OUTPUT: usize = 32 * 1024;

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

/// The confinement report without its lists (paths, rules, syscalls):
/// every scalar at the top and one level down, e.g. `landlock.abi`,
/// `seccomp.enforced`, the limits. What a reader needs to know what held,
/// in a tenth of the bytes; `--verbose` and `agent-rsh doctor` show it all.
pub fn confinement_summary(report: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let Value::Object(top) = report else {
        return report;
    };
    let mut out = serde_json::Map::new();
    for (k, v) in top {
        match v {
            Value::Array(_) => {}
            Value::Object(inner) => {
                let kept: serde_json::Map<String, Value> = inner
                    .into_iter()
                    .filter(|(_, v)| !v.is_array() && !v.is_object())
                    .collect();
                out.insert(k, Value::Object(kept));
            }
            scalar => {
                out.insert(k, scalar);
            }
        }
    }
    out.insert(
        "detail".into(),
        Value::String("summary; --verbose shows the paths and rules".into()),
    );
    Value::Object(out)
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

/// `strip_ansi` for a stream that arrives in pieces: a sequence split
/// between two pieces is removed whole. Text without ESC passes through
/// in one copy.
#[derive(Default)]
pub struct AnsiStripper {
    state: AnsiState,
}

#[derive(Default, Clone, Copy, PartialEq)]
enum AnsiState {
    #[default]
    Text,
    /// After ESC.
    Esc,
    /// In `ESC [ ...` until the final byte.
    Csi,
    /// In `ESC ] ...` until BEL or `ESC \`.
    Osc,
    /// ESC seen inside an OSC.
    OscEsc,
    /// In `ESC <intermediates>` until the final byte.
    Nf,
}

impl AnsiStripper {
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            if self.state == AnsiState::Text {
                match memchr::memchr(0x1b, &input[i..]) {
                    None => {
                        out.extend_from_slice(&input[i..]);
                        return;
                    }
                    Some(n) => {
                        out.extend_from_slice(&input[i..i + n]);
                        i += n + 1;
                        self.state = AnsiState::Esc;
                        continue;
                    }
                }
            }
            let b = input[i];
            i += 1;
            self.state = match self.state {
                AnsiState::Text => unreachable!("handled above"),
                AnsiState::Esc => match b {
                    b'[' => AnsiState::Csi,
                    b']' => AnsiState::Osc,
                    0x20..=0x2f => AnsiState::Nf,
                    _ => AnsiState::Text,
                },
                AnsiState::Csi if (0x40..=0x7e).contains(&b) => AnsiState::Text,
                AnsiState::Csi => AnsiState::Csi,
                AnsiState::Osc if b == 0x07 => AnsiState::Text,
                AnsiState::Osc if b == 0x1b => AnsiState::OscEsc,
                AnsiState::Osc => AnsiState::Osc,
                AnsiState::OscEsc if b == b'\\' => AnsiState::Text,
                AnsiState::OscEsc => AnsiState::Osc,
                AnsiState::Nf if (0x20..=0x2f).contains(&b) => AnsiState::Nf,
                AnsiState::Nf => AnsiState::Text,
            };
        }
    }
}

/// Turns output into `--events` lines: `output` events with `data` for
/// text, `data_b64` for everything else. Text is UTF-8 without control
/// characters other than tab, newline and carriage return (ESC too when
/// escapes are kept): what would cost JSON escapes byte by byte (NUL, most
/// controls) goes out as base64, written straight into the line buffer,
/// so binary output streams at close to the speed of text.
pub struct EventEncoder {
    encoding: Encoding,
    strip: Option<[AnsiStripper; 2]>,
    chunkers: [Utf8Chunker; 2],
    scratch: Vec<u8>,
    stripped: Vec<u8>,
}

impl EventEncoder {
    pub fn new(encoding: Encoding, strip: bool) -> EventEncoder {
        EventEncoder {
            encoding,
            strip: strip.then(Default::default),
            chunkers: Default::default(),
            scratch: Vec::new(),
            stripped: Vec::new(),
        }
    }

    /// Appends the event line(s) for one piece of output to `out`.
    pub fn output(&mut self, stream: Stream, data: &[u8], out: &mut Vec<u8>) {
        let i = usize::from(stream == Stream::Stderr);
        let data = match &mut self.strip {
            // Most output has no escape: no copy then.
            Some(strippers)
                if strippers[i].state == AnsiState::Text
                    && memchr::memchr(0x1b, data).is_none() =>
            {
                data
            }
            Some(strippers) => {
                self.stripped.clear();
                strippers[i].feed(data, &mut self.stripped);
                &self.stripped[..]
            }
            None => data,
        };
        if data.is_empty() {
            return;
        }
        if self.encoding == Encoding::Base64 {
            return push_b64_event(stream, data, out);
        }
        let keep_esc = self.strip.is_none();
        match self.chunkers[i].feed(data, &mut self.scratch) {
            Some(Chunk::Text(t)) if plain(t.as_bytes(), keep_esc) => {
                let event = Event::Output {
                    stream,
                    data: Some(t),
                    data_b64: None,
                };
                serde_json::to_writer(&mut *out, &event).expect("an event serializes");
                out.push(b'\n');
            }
            Some(Chunk::Text(t)) => push_b64_event(stream, t.as_bytes(), out),
            Some(Chunk::Binary(b)) => push_b64_event(stream, b, out),
            None => {}
        }
    }

    /// Incomplete UTF-8 left at the end of each stream, as base64.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            if let Some(rest) = self.chunkers[i].finish() {
                push_b64_event(stream, &rest, out);
            }
        }
    }
}

/// Text a JSON string holds without per-byte escapes, short of quotes and
/// backslashes.
fn plain(b: &[u8], keep_esc: bool) -> bool {
    !b.iter()
        .any(|&c| c < 0x20 && !matches!(c, b'\t' | b'\n' | b'\r') && !(keep_esc && c == 0x1b))
}

fn push_b64_event(stream: Stream, data: &[u8], out: &mut Vec<u8>) {
    let name = match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    out.extend_from_slice(br#"{"type":"output","stream":""#);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(br#"","data_b64":""#);
    // SIMD base64 straight into the line: no per-byte escaping, no copy.
    base64_simd::STANDARD.encode_append(data, out);
    out.extend_from_slice(b"\"}\n");
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
        assert_eq!(enc, None);
    }

    #[test]
    fn a_limit_cuts_at_line_boundaries_and_states_the_elision() {
        let mut c = Capture::new(1 << 20);
        let lines: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
        c.push(lines.as_bytes());
        let (text, _) = c.render_limited(Encoding::Text, false, 100);
        // 50 bytes of head: 5 whole lines of 9; the tail: 5 whole lines.
        assert_eq!(
            text,
            "line 000\nline 001\nline 002\nline 003\nline 004\n\
             [agent-rsh: 810 bytes elided]\n\
             line 095\nline 096\nline 097\nline 098\nline 099\n"
        );
        // Under the limit: all of it.
        assert_eq!(c.render_limited(Encoding::Text, false, 900).0, lines);
        // One long line: cut at characters, not at a far line break.
        let mut c = Capture::new(1 << 20);
        c.push(format!("x\n{}\n", "é".repeat(200)).as_bytes());
        let (text, enc) = c.render_limited(Encoding::Text, false, 41);
        assert_eq!(enc, None);
        assert!(text.starts_with("x\néé"), "{text}");
        assert!(text.ends_with("éé\n"), "{text}");
        // Elided by the capture itself: the tail's partial first line goes.
        let mut c = Capture::new(40);
        c.push(lines.as_bytes());
        let (text, _) = c.render(Encoding::Text, false);
        assert_eq!(
            text,
            "line 000\nline 001\n[agent-rsh: 864 bytes elided]\nline 098\nline 099\n"
        );
    }

    #[test]
    fn the_budget_is_shared_and_unused_share_moves_over() {
        assert_eq!(shares(100, 30, 40), (30, 40));
        assert_eq!(shares(100, 10, 500), (10, 90));
        assert_eq!(shares(100, 500, 10), (90, 10));
        assert_eq!(shares(100, 500, 500), (50, 50));
    }

    #[test]
    fn a_run_result_reads_back_as_it_was_written() {
        let mut r = RunResult::new(
            "cat x".into(),
            vec!["cat".into(), "x".into()],
            Status::Exited,
        );
        r.exit_code = Some(1);
        r.stdout_encoding = Some(OutputEncoding::Utf8Lossy);
        r.stderr_encoding = Some(OutputEncoding::Base64);
        r.confinement = Some(serde_json::json!({"landlock": "enforced"}));
        let json = r.to_json();
        assert!(json.contains(r#""schema":"agent-rsh.run/1""#), "{json}");
        assert!(json.contains(r#""stdoutEncoding":"utf-8-lossy""#), "{json}");
        assert!(json.contains(r#""stderrEncoding":"base64""#), "{json}");
        assert_eq!(serde_json::from_str::<RunResult>(&json).unwrap(), r);
        let d = crate::denial::Denial::not_found("`x` is not installed", "install it");
        let r = RunResult::denied("x".into(), d);
        let back: RunResult = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(
            (back.status, back.exit_code()),
            (Status::NotFound, code::NOT_FOUND)
        );
        assert_eq!(back, r);
        let other = r.to_json().replace("agent-rsh.run/1", "agent-rsh.run/2");
        assert!(serde_json::from_str::<RunResult>(&other).is_err());
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
        assert_eq!(enc, Some(OutputEncoding::Utf8Lossy));
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
    fn escapes_split_between_pieces_are_stripped_whole() {
        let input = b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok\x1b(B done\x1b]8;;x\x1b\\!";
        let whole = strip_ansi(input);
        assert_eq!(whole, b"red ok done!");
        for cut in 0..input.len() {
            let mut st = AnsiStripper::default();
            let mut out = Vec::new();
            st.feed(&input[..cut], &mut out);
            st.feed(&input[cut..], &mut out);
            assert_eq!(out, whole, "cut at {cut}");
        }
    }

    #[test]
    fn events_carry_text_as_data_and_the_rest_as_base64() {
        let lines = |enc: &mut EventEncoder, data: &[u8]| {
            let mut out = Vec::new();
            enc.output(Stream::Stdout, data, &mut out);
            enc.finish(&mut out);
            String::from_utf8(out).unwrap()
        };
        let mut e = EventEncoder::new(Encoding::Text, true);
        assert_eq!(
            lines(&mut e, b"\x1b[31mred\x1b[0m\tok\r\n"),
            "{\"type\":\"output\",\"stream\":\"stdout\",\"data\":\"red\\tok\\r\\n\"}\n"
        );
        // NUL is UTF-8 but would be escaped byte by byte: base64.
        let l = lines(&mut e, b"a\0b");
        assert_eq!(
            l,
            "{\"type\":\"output\",\"stream\":\"stdout\",\"data_b64\":\"YQBi\"}\n"
        );
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["data_b64"], "YQBi");
        assert!(lines(&mut e, b"a\xffb").contains("\"data_b64\":\"Yf9i\""));
        // With --color the escapes stay, as text.
        let mut e = EventEncoder::new(Encoding::Text, false);
        assert!(lines(&mut e, b"\x1b[31mred").contains("\"data\":\"\\u001b[31mred\""));
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
