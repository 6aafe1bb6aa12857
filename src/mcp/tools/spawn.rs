//! The `spawn` tool: start a background job, checked as `run` is.

use super::jobs::{answer, enabled, failure};
use super::run::{allowed_programs, request};
use super::{Annotations, ArgError, CallEnv, Context, Tool, Work, parse_args};
use crate::jobs::{self, JobError, SpawnRequest, Spawned};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

pub const TOOL: Tool = Tool {
    name: "spawn",
    title: "Start a background job (restricted shell)",
    description,
    input_schema: super::input_schema::<SpawnArgs>,
    output_schema: super::jobs::schema::<Spawned>,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    },
    long_running: true,
    available: enabled,
    prepare,
    refused: super::jobs::refused,
};

/// The arguments of `spawn`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpawnArgs {
    /// The command line, e.g. "cargo test" (the same rules as run).
    command: String,
    /// Working directory, relative to the workspace root.
    cwd: Option<String>,
    /// Variables to set for the command (NAME: value); the policy refuses
    /// dangerous names.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Deadline in milliseconds; may shorten jobs.max_runtime_ms, never
    /// extend it.
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    /// Bytes kept per stream (head and tail); may shorten
    /// jobs.max_output_bytes.
    #[schemars(range(min = jobs::MIN_OUTPUT_BYTES))]
    max_output_bytes: Option<u64>,
}

fn description(ctx: &Context) -> String {
    let policy = &ctx.policy;
    let n = |t: &str| ctx.name(t);
    let mut d = format!(
        "Start one command line in the background, checked against the policy exactly as {} \
         is and confined the same way; returns the job id as soon as the command runs. Use it \
         for servers, watchers and long builds or test suites, then read with {} or {}, \
         check with {}, feed stdin with {}, and stop with {}. The job outlives this \
         call (and this server) until it ends, is killed, or reaches its deadline.",
        n("run"),
        n("output"),
        n("grep"),
        n("status"),
        n("send"),
        n("kill")
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

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, ArgError> {
    let a: SpawnArgs = parse_args(args)?;
    let req = SpawnRequest {
        request: request(a.command, a.cwd, &a.env, a.timeout_ms)?,
        workspace: ctx.workspace.clone(),
        keep: false,
        max_output_bytes: a.max_output_bytes,
    };
    let policy = ctx.policy.clone();
    let me = ctx.name("spawn");
    let next = [
        ctx.name("status"),
        ctx.name("output"),
        ctx.name("grep"),
        ctx.name("send"),
        ctx.name("kill"),
    ];
    Ok(Box::new(move |call: &CallEnv| {
        if call.cancelled.load(Ordering::SeqCst) {
            // Cancelled before it started: start nothing (the answer is not sent).
            return failure(
                &me,
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
        answer(&me, &policy, r, |s| spawned_text(s, &next))
    }))
}

fn spawned_text(s: &Spawned, next: &[String; 5]) -> String {
    let mut t = format!(
        "job {} started (pid {}); deadline {} ms; up to {} bytes of each stream kept\nworkspace: {}",
        s.id, s.pid, s.timeout_ms, s.max_output_bytes, s.workspace
    );
    for w in &s.warnings {
        let _ = write!(t, "\nwarning: {w}");
    }
    let _ = write!(
        t,
        "\nuse {}, {}, {}, {} and {} with id \"{}\"",
        next[0], next[1], next[2], next[3], next[4], s.id
    );
    t
}
