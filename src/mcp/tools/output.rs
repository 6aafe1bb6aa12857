//! The `output` tool: a page of a job's output.

use super::jobs::{JobId, READER, answer, enabled, push_output, stream_name};
use super::{ArgError, Context, Tool, Work, parse_args};
use crate::jobs::{self, OutputChunk, OutputQuery, StreamSel};
use crate::policy::Policy;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt::Write as _;

pub const TOOL: Tool = Tool {
    name: "output",
    title: "Read a background job's output",
    description: |c| {
        format!(
            "A page of a background job's output: stdout, stderr, or both interleaved in \
             arrival order (the default). Pages are contiguous and never split a character; \
             continue at nextOffset while hasMore, or later while the job is running. \
             Default page: {} bytes.",
            c.policy.mcp.text_bytes
        )
    },
    input_schema: super::input_schema::<OutputArgs>,
    output_schema: super::jobs::schema::<OutputChunk>,
    annotations: READER,
    long_running: false,
    available: enabled,
    prepare,
    refused: super::jobs::refused,
};

/// The arguments of `output`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OutputArgs {
    id: JobId,
    /// stdout, stderr, or both interleaved in arrival order.
    #[serde(default)]
    stream: StreamSel,
    /// Stream offset to start at (a previous call's nextOffset).
    #[serde(default)]
    offset: u64,
    /// Most bytes to return (default: the policy's mcp.text_bytes).
    #[schemars(range(min = 1, max = jobs::MAX_OUTPUT_LIMIT))]
    limit: Option<usize>,
    /// Encode content as base64 (for binary output).
    #[serde(default)]
    base64: bool,
}

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, ArgError> {
    let a: OutputArgs = parse_args(args)?;
    if a.limit == Some(0) {
        return Err(ArgError::TooSmall {
            name: "limit",
            min: 1,
        });
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
    let me = ctx.name("output");
    Ok(Box::new(move |_| {
        let r = jobs::output(&policy, &id, &q);
        answer(&me, &policy, r, |c| text(c, &policy))
    }))
}

fn text(c: &OutputChunk, policy: &Policy) -> String {
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
