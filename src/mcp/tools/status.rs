//! The `status` tool: a job's status, optionally waiting for its end.

use super::jobs::{JobId, READER, answer, bounded_wait, enabled, status_text};
use super::{CallEnv, Context, Tool, Work, parse_args};
use crate::jobs::{self, JobError, JobStatus, State};
use crate::policy::Policy;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub const TOOL: Tool = Tool {
    name: "status",
    title: "Status of a background job",
    description: |_| {
        "A background job's status: running, exited (with exitCode), signaled, timedOut, \
         killed, or lost (its supervisor died, and its processes with it); the bytes it has \
         written and how long it ran. With waitMs, waits up to that long for the job to end."
            .into()
    },
    input_schema: super::input_schema::<StatusArgs>,
    output_schema: super::jobs::schema::<JobStatus>,
    annotations: READER,
    long_running: true,
    available: enabled,
    prepare,
    refused: super::jobs::refused,
};

/// The arguments of `status`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StatusArgs {
    id: JobId,
    /// Wait up to this long for the job to end (at most the policy's
    /// limits.timeout_ms); the status is still running if it did not.
    wait_ms: Option<u64>,
}

/// How often a wait looks at the cancellation flag.
const WAIT_SLICE: Duration = Duration::from_millis(200);

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, super::ArgError> {
    let a: StatusArgs = parse_args(args)?;
    let id = a.id.into_string();
    let policy = ctx.policy.clone();
    let me = ctx.name("status");
    Ok(Box::new(move |call: &CallEnv| {
        let r = match a.wait_ms {
            None | Some(0) => jobs::status(&policy, &id),
            Some(ms) => wait(&policy, &id, bounded_wait(&policy, ms), call),
        };
        answer(&me, &policy, r, status_text)
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
