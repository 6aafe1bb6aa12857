//! The `kill` tool: stop a job's whole process tree.

use super::jobs::{JobId, answer, enabled, status_text};
use super::{Annotations, Context, Tool, Work, parse_args};
use crate::jobs::{self, JobStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

pub const TOOL: Tool = Tool {
    name: "kill",
    title: "Stop a background job",
    description: |c| {
        format!(
            "Signal a background job's whole process tree and wait for it to end: TERM (the \
             default) or INT, then KILL after {} ms; or KILL at once. Returns the job's final \
             status; killing a finished job returns its status.",
            c.policy.limits.kill_grace_ms
        )
    },
    input_schema: super::input_schema::<KillArgs>,
    output_schema: super::jobs::schema::<JobStatus>,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    },
    long_running: false,
    available: enabled,
    prepare,
    refused: super::jobs::refused,
};

/// The signal `kill` sends first.
#[derive(Deserialize, JsonSchema, Default, Clone, Copy)]
pub enum Signal {
    /// TERM, then KILL after the grace period.
    #[default]
    #[serde(rename = "TERM")]
    Term,
    /// INT, then TERM and KILL.
    #[serde(rename = "INT")]
    Int,
    /// KILL at once.
    #[serde(rename = "KILL")]
    Kill,
}

/// The arguments of `kill`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KillArgs {
    id: JobId,
    #[serde(default)]
    signal: Signal,
}

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, super::ArgError> {
    let a: KillArgs = parse_args(args)?;
    let signal = match a.signal {
        Signal::Term => libc::SIGTERM,
        Signal::Int => libc::SIGINT,
        Signal::Kill => libc::SIGKILL,
    };
    let id = a.id.into_string();
    let policy = ctx.policy.clone();
    let me = ctx.name("kill");
    Ok(Box::new(move |_| {
        let mut r = answer(&me, &policy, jobs::kill(&policy, &id, signal), status_text);
        if !r.is_error && r.structured["status"] == "running" {
            // As `agent-rsh kill` exits 125: the tree outlived the signal.
            r.is_error = true;
            r.text = format!("{me} failed: the job is still running\n{}", r.text);
        }
        r
    }))
}
