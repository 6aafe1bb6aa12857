//! The background-job tools: `spawn`, `status`, `output`, `grep`, `send`
//! and `kill`, one table entry each over the `jobs` library (the same
//! functions `agent-rsh spawn` and friends call). `structuredContent` is
//! the library's answer (`{error, result?}` on failure, as the CLI prints);
//! `content[0].text` a compact form for the model.
//!
//! What the model may choose is what `run` lets it choose: the command,
//! cwd, env and a shorter deadline or output cap. Where a job runs (the
//! CLI's `--workspace`, `--keep`) is the server's choice (`agent-rsh mcp
//! --workspace`), since a workspace is writable to the job.

use super::run_tool::{allowed_programs, env_pairs, nonce, push_untrusted, untrusted_preface};
use super::tools::{Annotations, CallEnv, Context, Tool, ToolResult, Work};
use crate::check::{Denial, DenialKind, Request};
use crate::jobs::{
    self, GrepQuery, GrepResult, JobError, JobStatus, OutputChunk, OutputQuery, Sent, SpawnRequest,
    Spawned, State, StreamSel,
};
use crate::policy::Policy;
use crate::result::RunResult;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Listed only when the policy allows jobs; a call still reaches the
/// library, which refuses `spawn` with rule `jobs.disabled`.
fn jobs_enabled(policy: &Policy) -> bool {
    policy.jobs.max_concurrent > 0
}

/// Tools that only read job state.
const READER: Annotations = Annotations {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
};

pub const SPAWN: Tool = Tool {
    name: "spawn",
    title: "Start a background job (restricted shell)",
    description: spawn_description,
    input_schema: spawn_input,
    output_schema: spawned_schema,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    },
    long_running: true,
    available: jobs_enabled,
    prepare: spawn_prepare,
};

pub const STATUS: Tool = Tool {
    name: "status",
    title: "Status of a background job",
    description: |_| {
        "A background job's status: running, exited (with exitCode), signaled, timedOut, \
         killed, or lost (its supervisor died, and its processes with it); the bytes it has \
         written and how long it ran. With waitMs, waits up to that long for the job to end."
            .into()
    },
    input_schema: status_input,
    output_schema: status_schema,
    annotations: READER,
    long_running: true,
    available: jobs_enabled,
    prepare: status_prepare,
};

pub const OUTPUT: Tool = Tool {
    name: "output",
    title: "Read a background job's output",
    description: |p| {
        format!(
            "A page of a background job's output: stdout, stderr, or both interleaved in \
             arrival order (the default). Pages are contiguous and never split a character; \
             continue at nextOffset while hasMore, or later while the job is running. \
             Default page: {} bytes.",
            p.mcp.text_bytes
        )
    },
    input_schema: output_input,
    output_schema: chunk_schema,
    annotations: READER,
    long_running: false,
    available: jobs_enabled,
    prepare: output_prepare,
};

pub const GREP: Tool = Tool {
    name: "grep",
    title: "Search a background job's output",
    description: |_| {
        "Search a background job's output for lines matching a regular expression (Rust regex \
         syntax, linear time): line numbers, stream offsets and optional context. Give a \
         previous call's nextOffset as offset to search only lines written since."
            .into()
    },
    input_schema: grep_input,
    output_schema: grep_schema,
    annotations: READER,
    long_running: false,
    available: jobs_enabled,
    prepare: grep_prepare,
};

pub const SEND: Tool = Tool {
    name: "send",
    title: "Write to a background job's stdin",
    description: |_| {
        "Write text (and a newline, unless noNewline) to a background job's standard input; \
         with eof, close it afterwards so the job sees end of file. A job's stdin stays open \
         until then, so a command that reads it waits for input."
            .into()
    },
    input_schema: send_input,
    output_schema: sent_schema,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    },
    long_running: true,
    available: jobs_enabled,
    prepare: send_prepare,
};

pub const KILL: Tool = Tool {
    name: "kill",
    title: "Stop a background job",
    description: |p| {
        format!(
            "Signal a background job's whole process tree and wait for it to end: TERM (the \
             default) or INT, then KILL after {} ms; or KILL at once. Returns the job's final \
             status; killing a finished job returns its status.",
            p.limits.kill_grace_ms
        )
    },
    input_schema: kill_input,
    output_schema: status_schema,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    },
    long_running: false,
    available: jobs_enabled,
    prepare: kill_prepare,
};

// ---- arguments ----

/// A job id: the string `spawn` returned; a number is taken too.
#[derive(Deserialize)]
#[serde(untagged)]
enum JobId {
    Text(String),
    Number(u64),
}

impl JobId {
    fn into_string(self) -> String {
        match self {
            JobId::Text(s) => s,
            JobId::Number(n) => n.to_string(),
        }
    }
}

fn parse<T: DeserializeOwned>(args: &Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args.clone()))
        .map_err(|e| format!("invalid arguments: {e}"))
}

fn id_schema() -> Value {
    json!({
        "type": "string",
        "description": "The job id, as spawn returned it (e.g. \"3\")."
    })
}

fn stream_schema() -> Value {
    json!({
        "type": "string",
        "enum": ["stdout", "stderr", "both"],
        "default": "both",
        "description": "stdout, stderr, or both interleaved in arrival order."
    })
}

/// Longest wait a call may ask for: the policy's longest run, so a call
/// (and the server's shutdown, which waits for calls) is bounded.
fn bounded_wait(policy: &Policy, ms: u64) -> Duration {
    Duration::from_millis(ms.min(policy.limits.timeout_ms))
}

// ---- results ----

fn answer<T: serde::Serialize>(
    tool: &str,
    policy: &Policy,
    r: Result<T, JobError>,
    text: impl FnOnce(&T) -> String,
) -> ToolResult {
    match r {
        Ok(v) => ToolResult {
            structured: serde_json::to_value(&v).unwrap_or(Value::Null),
            text: text(&v),
            is_error: false,
        },
        Err(e) => failure(tool, policy, &e),
    }
}

/// An error result: a refused or unstartable command reads exactly as
/// `run`'s refusal does; an unknown id says where ids come from.
fn failure(tool: &str, policy: &Policy, e: &JobError) -> ToolResult {
    let text = if let Some(r) = e.result.as_ref().map(refused_run) {
        format!(
            "{}\nno job was started",
            super::run_tool::render_text(&r, &policy.mcp, "")
        )
    } else if e.unknown_job {
        format!(
            "{tool}: {}\nhint: a job id is the `id` that spawn returned (e.g. \"3\"); \
             finished jobs are removed by `agent-rsh jobs --gc` after jobs.retain_ms ({} ms)",
            e.error, policy.jobs.retain_ms
        )
    } else {
        format!("{tool} failed: {}", e.error)
    };
    ToolResult {
        structured: serde_json::to_value(e).unwrap_or(Value::Null),
        text,
        is_error: true,
    }
}

/// The RunResult of a spawn that ran nothing, back from its JSON form.
fn refused_run(v: &Value) -> RunResult {
    let command = v["command"].as_str().unwrap_or_default().to_string();
    let denial = v["denial"].as_object().map(|d| {
        let s = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
        let n = |k: &str| d.get(k).and_then(Value::as_u64).map(|n| n as usize);
        Denial {
            kind: if v["status"] == "notFound" {
                DenialKind::NotFound
            } else {
                DenialKind::Denied
            },
            rule: s("rule").unwrap_or_default(),
            reason: s("reason").unwrap_or_default(),
            offset: n("offset"),
            arg_index: n("argIndex"),
            hint: s("hint"),
        }
    });
    let mut r = match denial {
        Some(d) => RunResult::denied(command, d),
        None => RunResult::failed(
            command,
            v["error"]
                .as_str()
                .unwrap_or("the command could not be started")
                .to_string(),
        ),
    };
    if let Some(w) = v["warnings"].as_array() {
        r.warnings = w
            .iter()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect();
    }
    r
}

fn stream_name(s: StreamSel) -> &'static str {
    match s {
        StreamSel::Stdout => "stdout",
        StreamSel::Stderr => "stderr",
        StreamSel::Both => "both",
    }
}

/// One line saying what a job is doing or how it ended, then details.
pub fn status_text(st: &JobStatus) -> String {
    let (id, ms) = (&st.id, st.runtime_ms);
    let mut t = match st.status {
        State::Running => format!("job {id} is running ({ms} ms so far)"),
        State::Exited => format!(
            "job {id} exited with code {} after {ms} ms",
            st.exit_code.unwrap_or(-1)
        ),
        State::Signaled => format!(
            "job {id} was killed by signal {} after {ms} ms",
            st.signal.unwrap_or(0)
        ),
        State::TimedOut => format!(
            "job {id} timed out after {ms} ms; its process tree was killed \
             (the deadline is its timeoutMs, at most jobs.max_runtime_ms)"
        ),
        State::Killed => format!(
            "job {id} was stopped by kill (signal {}) after {ms} ms",
            st.signal.unwrap_or(0)
        ),
        State::Lost => format!("job {id} is lost"),
        State::Failed => format!("job {id} failed to start"),
        State::NotFound => format!("job {id}'s program was not found"),
        State::Denied => format!("job {id} was denied"),
    };
    if let Some(e) = &st.error {
        let _ = write!(t, ": {e}");
    }
    let _ = write!(t, "\ncommand: {}", st.command);
    let _ = write!(
        t,
        "\noutput: stdout {} bytes, stderr {} bytes{}",
        st.stdout_bytes,
        st.stderr_bytes,
        if st.truncated {
            " (the middle was elided on disk; head and tail kept)"
        } else {
            ""
        }
    );
    for w in &st.warnings {
        let _ = write!(t, "\nwarning: {w}");
    }
    t
}

// ---- spawn ----

fn spawn_description(policy: &Policy) -> String {
    let mut d = String::from(
        "Start one command line in the background, checked against the policy exactly as run \
         is and confined the same way; returns the job id as soon as the command runs. Use it \
         for servers, watchers and long builds or test suites, then read with output or grep, \
         check with status, feed stdin with send, and stop with kill. The job outlives this \
         call (and this server) until it ends, is killed, or reaches its deadline.",
    );
    d.push_str(&allowed_programs(policy));
    let j = &policy.jobs;
    let _ = write!(
        d,
        " At most {} jobs at once; longest job: {} ms; {} bytes of each stream kept (head and tail).",
        j.max_concurrent, j.max_runtime_ms, j.max_output_bytes
    );
    d
}

fn spawn_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "The command line, e.g. \"cargo test\" (the same rules as run)."
            },
            "cwd": {
                "type": "string",
                "description": "Working directory, relative to the workspace root."
            },
            "env": {
                "type": "object",
                "additionalProperties": { "type": "string" },
                "description": "Variables to set for the command (NAME: value); the policy refuses dangerous names."
            },
            "timeoutMs": {
                "type": "integer",
                "minimum": 1,
                "description": "Deadline in milliseconds; may shorten jobs.max_runtime_ms, never extend it."
            },
            "maxOutputBytes": {
                "type": "integer",
                "minimum": jobs::MIN_OUTPUT_BYTES,
                "description": "Bytes kept per stream (head and tail); may shorten jobs.max_output_bytes."
            }
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

fn spawned_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "pid": { "type": "integer" },
            "workspace": { "type": "string" },
            "supervisorPid": { "type": "integer" },
            "timeoutMs": { "type": "integer", "minimum": 0 },
            "maxOutputBytes": { "type": "integer", "minimum": 0 },
            "warnings": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["id", "pid", "workspace", "supervisorPid", "timeoutMs", "maxOutputBytes"]
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpawnArgs {
    command: String,
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<u64>,
}

fn spawn_prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, String> {
    let a: SpawnArgs = parse(args)?;
    if a.timeout_ms == Some(0) {
        return Err("invalid arguments: timeoutMs must be at least 1".into());
    }
    let req = SpawnRequest {
        request: Request {
            cwd: a.cwd,
            timeout_ms: a.timeout_ms,
            env: env_pairs(&a.env)?,
            ..Request::line(a.command)
        },
        workspace: ctx.workspace.clone(),
        keep: false,
        max_output_bytes: a.max_output_bytes,
    };
    let policy = ctx.policy.clone();
    Ok(Box::new(move |call: &CallEnv| {
        if call.cancelled.load(Ordering::SeqCst) {
            // Cancelled before it started: start nothing (the answer is not sent).
            return failure(
                "spawn",
                &policy,
                &JobError {
                    code: crate::result::code::FAILED,
                    error: "cancelled before it started".into(),
                    result: None,
                    unknown_job: false,
                },
            );
        }
        let r = jobs::spawn(&policy, &req);
        if let Ok(s) = &r
            && call.cancelled.load(Ordering::SeqCst)
        {
            // Nobody will learn this job's id: stop it rather than leave
            // it holding a jobs.max_concurrent slot until its deadline.
            let _ = jobs::kill(&policy, &s.id, libc::SIGKILL);
        }
        answer("spawn", &policy, r, spawned_text)
    }))
}

fn spawned_text(s: &Spawned) -> String {
    let mut t = format!(
        "job {} started (pid {}); deadline {} ms; up to {} bytes of each stream kept\nworkspace: {}",
        s.id, s.pid, s.timeout_ms, s.max_output_bytes, s.workspace
    );
    for w in &s.warnings {
        let _ = write!(t, "\nwarning: {w}");
    }
    let _ = write!(
        t,
        "\nuse status, output, grep, send and kill with id \"{}\"",
        s.id
    );
    t
}

// ---- status ----

fn status_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": id_schema(),
            "waitMs": {
                "type": "integer",
                "minimum": 0,
                "description": "Wait up to this long for the job to end (at most the policy's limits.timeout_ms); the status is still running if it did not."
            }
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

fn status_schema() -> Value {
    let int = json!({ "type": "integer" });
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "status": {
                "type": "string",
                "enum": ["running", "exited", "signaled", "timedOut", "killed", "lost", "failed", "notFound", "denied"]
            },
            "command": { "type": "string" },
            "exitCode": int,
            "signal": int,
            "stdoutBytes": { "type": "integer", "minimum": 0 },
            "stderrBytes": { "type": "integer", "minimum": 0 },
            "truncated": { "type": "boolean" },
            "runtimeMs": { "type": "integer", "minimum": 0 },
            "pid": int,
            "workspace": { "type": "string" },
            "createdAtMs": { "type": "integer", "minimum": 0 },
            "error": { "type": "string" },
            "warnings": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["id", "status", "command", "stdoutBytes", "stderrBytes", "truncated", "runtimeMs", "createdAtMs"]
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StatusArgs {
    id: JobId,
    wait_ms: Option<u64>,
}

/// How often a wait looks at the cancellation flag.
const WAIT_SLICE: Duration = Duration::from_millis(200);

fn status_prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, String> {
    let a: StatusArgs = parse(args)?;
    let id = a.id.into_string();
    let policy = ctx.policy.clone();
    Ok(Box::new(move |call: &CallEnv| {
        let r = match a.wait_ms {
            None | Some(0) => jobs::status(&policy, &id),
            Some(ms) => wait(&policy, &id, bounded_wait(&policy, ms), call),
        };
        answer("status", &policy, r, status_text)
    }))
}

/// `jobs::wait` in slices, so a cancelled call stops waiting.
fn wait(
    policy: &Arc<Policy>,
    id: &str,
    limit: Duration,
    call: &CallEnv,
) -> Result<JobStatus, JobError> {
    let until = Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let st = jobs::wait(policy, id, Some(left.min(WAIT_SLICE)))?;
        if st.status != State::Running || left.is_zero() || call.cancelled.load(Ordering::SeqCst) {
            return Ok(st);
        }
    }
}

// ---- output ----

fn output_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": id_schema(),
            "stream": stream_schema(),
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Stream offset to start at (a previous call's nextOffset); default 0."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": jobs::MAX_OUTPUT_LIMIT,
                "description": "Most bytes to return (default: the policy's mcp.text_bytes)."
            },
            "base64": { "type": "boolean", "description": "Encode content as base64 (for binary output)." }
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

fn chunk_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "content": { "type": "string" },
            "encoding": { "type": "string", "enum": ["base64", "utf-8-lossy"] },
            "stream": { "type": "string", "enum": ["stdout", "stderr", "both"] },
            "offset": { "type": "integer", "minimum": 0 },
            "nextOffset": { "type": "integer", "minimum": 0 },
            "totalSize": { "type": "integer", "minimum": 0 },
            "hasMore": { "type": "boolean" },
            "truncated": { "type": "boolean" },
            "running": { "type": "boolean" }
        },
        "required": ["id", "content", "stream", "offset", "nextOffset", "totalSize", "hasMore", "truncated", "running"]
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OutputArgs {
    id: JobId,
    #[serde(default)]
    stream: StreamSel,
    #[serde(default)]
    offset: u64,
    limit: Option<usize>,
    #[serde(default)]
    base64: bool,
}

fn output_prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, String> {
    let a: OutputArgs = parse(args)?;
    if a.limit == Some(0) {
        return Err("invalid arguments: limit must be at least 1".into());
    }
    let id = a.id.into_string();
    let q = OutputQuery {
        stream: a.stream,
        offset: a.offset,
        limit: a.limit.unwrap_or(ctx.policy.mcp.text_bytes),
        base64: a.base64,
        // No colour over MCP, as for run: escapes are stripped as the
        // policy says, so output cannot drive the client's terminal.
        color: false,
    };
    let policy = ctx.policy.clone();
    Ok(Box::new(move |_: &CallEnv| {
        let r = jobs::output(&policy, &id, &q);
        answer("output", &policy, r, |c| output_text(c, &policy))
    }))
}

fn output_text(c: &OutputChunk, policy: &Policy) -> String {
    let name = stream_name(c.stream);
    let mut t = format!(
        "job {} {name}: bytes {}..{} of {}",
        c.id, c.offset, c.next_offset, c.total_size
    );
    if c.has_more {
        let _ = write!(t, "; more is stored: continue at offset {}", c.next_offset);
    } else if c.running {
        let _ = write!(
            t,
            "; the job is running, more may come at offset {}",
            c.next_offset
        );
    } else {
        t.push_str("; the job has ended, this is the end of the stream");
    }
    if c.truncated {
        t.push_str("\npart of the stream was elided on disk (head and tail kept)");
    }
    if let Some(e) = c.encoding {
        let _ = write!(t, "\nencoding: {e}");
    }
    if c.content.is_empty() {
        t.push_str("\n(no output here)");
    } else {
        t.push('\n');
        push_output(&mut t, &policy.mcp, name, &c.content);
    }
    t
}

/// Command output in the text, inside the untrusted-data boundary when
/// the policy asks for it.
fn push_output(t: &mut String, mcp: &super::McpPolicy, stream: &str, text: &str) {
    if mcp.wrap_output {
        let n = nonce();
        t.push_str(&untrusted_preface(&n));
        t.push('\n');
        push_untrusted(t, &n, stream, text);
    } else {
        t.push_str(text);
    }
}

// ---- grep ----

fn grep_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": id_schema(),
            "pattern": {
                "type": "string",
                "description": "A regular expression (Rust regex syntax), or a plain string with fixedStrings."
            },
            "stream": stream_schema(),
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": 50,
                "description": "Lines of context before and after each match; default 0."
            },
            "maxMatches": {
                "type": "integer",
                "minimum": 0,
                "description": "Most matches returned (all are counted in total); default 100."
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Search from this stream offset on (a previous call's nextOffset); default 0."
            },
            "ignoreCase": { "type": "boolean" },
            "fixedStrings": { "type": "boolean", "description": "The pattern is a plain string." }
        },
        "required": ["id", "pattern"],
        "additionalProperties": false
    })
}

fn grep_schema() -> Value {
    let lines = json!({ "type": "array", "items": { "type": "string" } });
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "stream": { "type": "string", "enum": ["stdout", "stderr", "both"] },
            "pattern": { "type": "string" },
            "matches": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "line": { "type": "integer", "minimum": 1 },
                        "offset": { "type": "integer", "minimum": 0 },
                        "text": { "type": "string" },
                        "before": lines,
                        "after": lines
                    },
                    "required": ["line", "offset", "text", "before", "after"]
                }
            },
            "total": { "type": "integer", "minimum": 0 },
            "truncated": { "type": "boolean" },
            "nextOffset": { "type": "integer", "minimum": 0 },
            "running": { "type": "boolean" }
        },
        "required": ["id", "stream", "pattern", "matches", "total", "truncated", "nextOffset", "running"]
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GrepArgs {
    id: JobId,
    pattern: String,
    #[serde(default)]
    stream: StreamSel,
    #[serde(default)]
    context: usize,
    max_matches: Option<usize>,
    #[serde(default)]
    offset: u64,
    #[serde(default)]
    ignore_case: bool,
    #[serde(default)]
    fixed_strings: bool,
}

fn grep_prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, String> {
    let a: GrepArgs = parse(args)?;
    let id = a.id.into_string();
    let q = GrepQuery {
        pattern: a.pattern,
        ignore_case: a.ignore_case,
        fixed: a.fixed_strings,
        stream: a.stream,
        context: a.context,
        max_matches: a.max_matches.unwrap_or(100),
        offset: a.offset,
        // No colour over MCP, as for run: escapes are stripped as the
        // policy says, so output cannot drive the client's terminal.
        color: false,
    };
    let policy = ctx.policy.clone();
    Ok(Box::new(move |_: &CallEnv| {
        let r = jobs::grep(&policy, &id, &q);
        answer("grep", &policy, r, |g| grep_text(g, &policy))
    }))
}

/// grep -n style: `LINE:text` for a match, `LINE-text` for context, `--`
/// between context groups that are not adjacent.
fn grep_text(g: &GrepResult, policy: &Policy) -> String {
    let name = stream_name(g.stream);
    let mut t = format!(
        "job {} {name}: {} matching line{} for {:?}",
        g.id,
        g.total,
        if g.total == 1 { "" } else { "s" },
        g.pattern
    );
    if (g.matches.len() as u64) < g.total {
        let _ = write!(t, " ({} shown)", g.matches.len());
    }
    if g.truncated {
        t.push_str(
            "; some lines may be missing (more matches than maxMatches, or output elided on disk)",
        );
    }
    let _ = write!(
        t,
        "; the job {}; search new lines from offset {}",
        if g.running { "is running" } else { "has ended" },
        g.next_offset
    );
    if g.matches.is_empty() {
        return t;
    }
    // Context of neighbouring matches overlaps: each line is shown once,
    // a match line as a match.
    let mut lines: BTreeMap<u64, (bool, &str)> = BTreeMap::new();
    for m in &g.matches {
        let first = m.line - m.before.len() as u64;
        for (i, b) in m.before.iter().enumerate() {
            lines.entry(first + i as u64).or_insert((false, b));
        }
        lines.insert(m.line, (true, &m.text));
        for (i, a) in m.after.iter().enumerate() {
            lines.entry(m.line + 1 + i as u64).or_insert((false, a));
        }
    }
    // As grep: `--` between groups only when context is shown.
    let context = g
        .matches
        .iter()
        .any(|m| !m.before.is_empty() || !m.after.is_empty());
    let mut body = String::new();
    let mut last: Option<u64> = None;
    for (n, (is_match, text)) in lines {
        if context && last.is_some_and(|l| n > l + 1) {
            body.push_str("--\n");
        }
        let _ = writeln!(body, "{n}{}{text}", if is_match { ':' } else { '-' });
        last = Some(n);
    }
    t.push('\n');
    push_output(&mut t, &policy.mcp, name, &body);
    t
}

// ---- send ----

fn send_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": id_schema(),
            "text": { "type": "string", "description": "Text to write (followed by a newline unless noNewline)." },
            "noNewline": { "type": "boolean", "description": "Do not add a newline." },
            "eof": { "type": "boolean", "description": "Close the job's stdin afterwards (it then sees end of file)." },
            "timeoutMs": {
                "type": "integer",
                "minimum": 1,
                "description": "How long to wait for the job to read (default 10000, at most the policy's limits.timeout_ms)."
            }
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

fn sent_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "bytes": { "type": "integer", "minimum": 0 },
            "eof": { "type": "boolean" }
        },
        "required": ["id", "bytes", "eof"]
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SendArgs {
    id: JobId,
    text: Option<String>,
    #[serde(default)]
    no_newline: bool,
    #[serde(default)]
    eof: bool,
    timeout_ms: Option<u64>,
}

fn send_prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, String> {
    let a: SendArgs = parse(args)?;
    let mut data = Vec::new();
    if let Some(text) = &a.text {
        data.extend_from_slice(text.as_bytes());
        if !a.no_newline {
            data.push(b'\n');
        }
    }
    if data.is_empty() && !a.eof {
        return Err("invalid arguments: nothing to send: give text, eof: true, or both".into());
    }
    if a.timeout_ms == Some(0) {
        return Err("invalid arguments: timeoutMs must be at least 1".into());
    }
    let id = a.id.into_string();
    let timeout = bounded_wait(&ctx.policy, a.timeout_ms.unwrap_or(10_000));
    let policy = ctx.policy.clone();
    Ok(Box::new(move |_: &CallEnv| {
        let r = jobs::send(&policy, &id, &data, a.eof, timeout);
        answer("send", &policy, r, sent_text)
    }))
}

fn sent_text(s: &Sent) -> String {
    match (s.bytes, s.eof) {
        (0, _) => format!("closed job {}'s stdin (it sees end of file)", s.id),
        (n, false) => format!("sent {n} bytes to job {}'s stdin", s.id),
        (n, true) => format!(
            "sent {n} bytes to job {}'s stdin, then closed it (it sees end of file)",
            s.id
        ),
    }
}

// ---- kill ----

fn kill_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": id_schema(),
            "signal": {
                "type": "string",
                "enum": ["TERM", "INT", "KILL"],
                "default": "TERM",
                "description": "TERM (then KILL after the grace period), INT (then TERM, KILL), or KILL."
            }
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KillArgs {
    id: JobId,
    signal: Option<String>,
}

fn kill_prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, String> {
    let a: KillArgs = parse(args)?;
    let name = a.signal.as_deref().unwrap_or("TERM");
    let signal = jobs::parse_signal(name)
        .ok_or_else(|| format!("invalid arguments: signal {name:?}: use TERM, INT or KILL"))?;
    let id = a.id.into_string();
    let policy = ctx.policy.clone();
    Ok(Box::new(move |_: &CallEnv| {
        let mut r = answer(
            "kill",
            &policy,
            jobs::kill(&policy, &id, signal),
            status_text,
        );
        if !r.is_error && r.structured["status"] == "running" {
            // As `agent-rsh kill` exits 125: the tree outlived the signal.
            r.is_error = true;
            r.text = format!("kill failed: the job is still running\n{}", r.text);
        }
        r
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::GrepMatch;

    #[test]
    fn every_job_tool_is_listed_with_schemas_only_when_jobs_are_allowed() {
        let mut policy = Policy::default();
        let names = |p: &Policy| -> Vec<String> {
            super::super::tools::listing(p)
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names(&policy),
            ["run", "spawn", "status", "output", "grep", "send", "kill"]
        );
        for tool in [SPAWN, STATUS, OUTPUT, GREP, SEND, KILL] {
            let input = (tool.input_schema)();
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert_eq!(input["additionalProperties"], false, "{}", tool.name);
            assert_eq!((tool.output_schema)()["type"], "object", "{}", tool.name);
            assert!(!(tool.description)(&policy).is_empty());
        }
        policy.jobs.max_concurrent = 0;
        assert_eq!(names(&policy), ["run"]);
    }

    #[test]
    fn a_refusal_reads_as_runs_does() {
        let v = json!({
            "status": "denied", "command": "rm -rf /",
            "denial": {"rule": "command.not-allowed", "reason": "rm is not allowed", "argIndex": 0, "hint": "use ls"}
        });
        let r = refused_run(&v);
        let t = super::super::run_tool::render_text(&r, &Policy::default().mcp, "");
        assert!(t.starts_with("denied by the policy: rule command.not-allowed: rm is not allowed (argument 0)\nhint: use ls\nnothing was run"), "{t}");
        let r = refused_run(&json!({"status": "failed", "command": "x", "error": "boom"}));
        assert_eq!(r.error.as_deref(), Some("boom"));
    }

    #[test]
    fn grep_text_numbers_lines_like_grep_n() {
        let m = |line, text: &str, before: &[&str], after: &[&str]| GrepMatch {
            line,
            offset: 0,
            text: text.into(),
            before: before.iter().map(|s| s.to_string()).collect(),
            after: after.iter().map(|s| s.to_string()).collect(),
        };
        let g = GrepResult {
            id: "3".into(),
            stream: StreamSel::Stdout,
            pattern: "x".into(),
            // 2..4 and 4..6 overlap at line 4, 6 and 7 are adjacent
            // matches, 10 stands apart.
            matches: vec![
                m(3, "x1", &["b"], &["d"]),
                m(5, "x2", &["d"], &["x3"]),
                m(6, "x3", &["x2"], &["x4"]),
                m(7, "x4", &["x3"], &["h"]),
                m(10, "x5", &[], &[]),
            ],
            total: 5,
            truncated: false,
            next_offset: 99,
            running: false,
        };
        let t = grep_text(&g, &Policy::default());
        let body = t.split_once('\n').unwrap().1;
        assert_eq!(body, "2-b\n3:x1\n4-d\n5:x2\n6:x3\n7:x4\n8-h\n--\n10:x5\n");
        assert!(
            t.starts_with("job 3 stdout: 5 matching lines for \"x\""),
            "{t}"
        );
    }
}
