//! What the background-job tools (`spawn`, `status`, `output`, `grep`,
//! `send`, `kill`) share: the job id argument, the result shape, and the
//! text of failures and statuses. Each tool is a thin face over the `jobs`
//! library (the same functions `agent-rsh spawn` and friends call).
//! `structuredContent` is the library's answer, or `{error, result?}` on
//! failure as the CLI prints it; the output schema describes both.
//!
//! What the model may choose is what `run` lets it choose: the command,
//! cwd, env and a shorter deadline or output cap. Where a job runs (the
//! CLI's `--workspace`, `--keep`) is the server's choice (`agent-rsh mcp
//! --workspace`), since a workspace is writable to the job.

use super::{Annotations, ToolResult, output_schema};
use crate::jobs::{JobError, JobStatus, State, StreamSel};
use crate::mcp::McpPolicy;
use crate::mcp::render::{nonce, push_untrusted, render_text, untrusted_preface};
use crate::policy::Policy;
use crate::result::RunResult;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::time::Duration;

/// Listed only when the policy allows jobs; a call still reaches the
/// library, which refuses `spawn` with rule `jobs.disabled`.
pub fn enabled(policy: &Policy) -> bool {
    policy.jobs.max_concurrent > 0
}

/// Tools that only read job state.
pub const READER: Annotations = Annotations {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
};

/// A job id: the string `spawn` returned; a number is taken too.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(description = "The job id, as spawn returned it (e.g. \"3\").")]
pub enum JobId {
    Text(String),
    Number(u64),
}

impl JobId {
    pub fn into_string(self) -> String {
        match self {
            JobId::Text(s) => s,
            JobId::Number(n) => n.to_string(),
        }
    }
}

/// The output schema of a job tool: its answer `T`, or the failure
/// `{error, result?}` (`isError`). Both sets of properties are described
/// at the top, and `anyOf` says which must be present.
pub fn schema<T: JsonSchema>() -> Value {
    let mut ok = output_schema::<T>();
    let err = output_schema::<JobError>();
    let ok_required = ok["required"].take();
    let props = ok["properties"].as_object_mut().expect("an object schema");
    for (k, v) in err["properties"].as_object().expect("an object schema") {
        props.entry(k.clone()).or_insert_with(|| v.clone());
    }
    json!({
        "type": "object",
        "properties": props,
        "anyOf": [
            { "required": ok_required },
            { "required": err["required"] },
        ],
    })
}

/// The structured form of a job tool's refusal.
pub fn refused(text: &str) -> Value {
    json!({ "error": text })
}

/// Longest wait a call may ask for: the policy's longest run, so a call
/// (and the server's shutdown, which waits for calls) is bounded.
pub fn bounded_wait(policy: &Policy, ms: u64) -> Duration {
    Duration::from_millis(ms.min(policy.limits.timeout_ms))
}

/// The library's answer as a tool result.
pub fn answer<T: serde::Serialize>(
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
pub fn failure(tool: &str, policy: &Policy, e: &JobError) -> ToolResult {
    let text = if let Some(r) = e.result.as_deref().map(refused_run) {
        format!("{}\nno job was started", render_text(&r, &policy.mcp, ""))
    } else if e.unknown_job {
        format!(
            "{tool}: {}\nhint: a job id is the `id` that spawn returned (e.g. \"3\"); \
             finished jobs are removed beyond the newest {} (jobs.max_retained) and by `agent-rsh jobs --gc` after jobs.retain_ms ({} ms)",
            e.error, policy.jobs.max_retained, policy.jobs.retain_ms
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

/// The RunResult of a spawn that ran nothing, as `run` would report it.
pub fn refused_run(v: &RunResult) -> RunResult {
    let mut r = match &v.denial {
        Some(d) => RunResult::denied(v.command.clone(), d.clone()),
        None => RunResult::failed(
            v.command.clone(),
            v.error
                .clone()
                .unwrap_or_else(|| "the command could not be started".to_string()),
        ),
    };
    r.warnings = v.warnings.clone();
    r
}

pub fn stream_name(s: StreamSel) -> &'static str {
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

/// Command output in the text, inside the untrusted-data boundary when
/// the policy asks for it.
pub fn push_output(t: &mut String, mcp: &McpPolicy, stream: &str, text: &str) {
    if mcp.wrap_output {
        let n = nonce();
        t.push_str(&untrusted_preface(&n));
        t.push('\n');
        push_untrusted(t, &n, stream, text);
    } else {
        t.push_str(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tools::{Context, TOOLS, listing};
    use std::sync::Arc;

    #[test]
    fn every_job_tool_is_listed_with_schemas_only_when_jobs_are_allowed() {
        let mut ctx = Context {
            policy: Arc::new(Policy::default()),
            workspace: None,
            prefix: String::new(),
        };
        let names = |c: &Context| -> Vec<String> {
            listing(c)
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names(&ctx),
            ["run", "spawn", "status", "output", "grep", "send", "kill"]
        );
        for tool in &TOOLS[1..] {
            let input = (tool.input_schema)();
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert_eq!(input["additionalProperties"], false, "{}", tool.name);
            let output = (tool.output_schema)();
            assert_eq!(output["type"], "object", "{}", tool.name);
            // The failure shape is described beside the answer.
            assert_eq!(
                output["anyOf"][1]["required"],
                json!(["error"]),
                "{}",
                tool.name
            );
            assert!(output["properties"]["result"].is_object(), "{}", tool.name);
            assert!(!(tool.description)(&ctx).is_empty());
        }
        let mut p = Policy::default();
        p.jobs.max_concurrent = 0;
        ctx.policy = Arc::new(p);
        assert_eq!(names(&ctx), ["run"]);
    }

    #[test]
    fn a_refusal_reads_as_runs_does() {
        let d = crate::check::Denial::new("command.not-allowed", "rm is not allowed", "use ls");
        let v = RunResult::denied("rm -rf /".into(), d.at_arg(0));
        let r = refused_run(&v);
        let t = render_text(&r, &Policy::default().mcp, "");
        assert!(t.starts_with("denied by the policy: rule command.not-allowed: rm is not allowed (argument 0)\nhint: use ls\nnothing was run"), "{t}");
        let r = refused_run(&RunResult::failed("x".into(), "boom".into()));
        assert_eq!(r.error.as_deref(), Some("boom"));
    }
}
