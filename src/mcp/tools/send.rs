//! The `send` tool: write to a job's stdin.

use super::jobs::{JobId, answer, bounded_wait, enabled};
use super::{Annotations, ArgError, Context, Tool, Work, parse_args};
use crate::jobs::{self, Sent};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

pub const TOOL: Tool = Tool {
    name: "send",
    title: "Write to a background job's stdin",
    description: |_| {
        "Write text (and a newline, unless noNewline) to a background job's standard input; \
         with eof, close it afterwards so the job sees end of file. A job's stdin stays open \
         until then, so a command that reads it waits for input."
            .into()
    },
    input_schema: super::input_schema::<SendArgs>,
    output_schema: super::jobs::schema::<Sent>,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    },
    long_running: true,
    available: enabled,
    prepare,
    refused: super::jobs::refused,
};

/// The arguments of `send`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SendArgs {
    id: JobId,
    /// Text to write (followed by a newline unless noNewline).
    text: Option<String>,
    /// Do not add a newline.
    #[serde(default)]
    no_newline: bool,
    /// Close the job's stdin afterwards (it then sees end of file).
    #[serde(default)]
    eof: bool,
    /// How long to wait for the job to read (default 10000, at most the
    /// policy's limits.timeout_ms).
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
}

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, ArgError> {
    let a: SendArgs = parse_args(args)?;
    let mut data = Vec::new();
    if let Some(text) = &a.text {
        data.extend_from_slice(text.as_bytes());
        if !a.no_newline {
            data.push(b'\n');
        }
    }
    if data.is_empty() && !a.eof {
        return Err(ArgError::NothingToSend);
    }
    if a.timeout_ms == Some(0) {
        return Err(ArgError::TooSmall {
            name: "timeoutMs",
            min: 1,
        });
    }
    let id = a.id.into_string();
    let timeout = bounded_wait(&ctx.policy, a.timeout_ms.unwrap_or(10_000));
    let policy = ctx.policy.clone();
    let me = ctx.name("send");
    Ok(Box::new(move |_| {
        let r = jobs::send(&policy, &id, &data, a.eof, timeout);
        answer(&me, &policy, r, sent_text)
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
