//! The tool registry: one table entry per tool. A tool checks its
//! arguments on the reader thread (a mismatch is a JSON-RPC -32602) and
//! returns the work, which the server runs on a thread of its own with a
//! progress reporter and a cancellation fd.

use super::jsonrpc::Output;
use crate::policy::Policy;
use serde_json::{Map, Value, json};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The behaviour hints of MCP's `ToolAnnotations`.
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    /// The description may depend on the policy (e.g. the allowed programs).
    pub description: fn(&Policy) -> String,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    pub annotations: Annotations,
    /// Counts toward `mcp.max_concurrent_calls`: tools that may block a
    /// thread for long (run, spawn, status with `waitMs`, send). Quick tools
    /// (a job's output, grep, kill) do not, so a model can still read and
    /// stop its jobs while the limit is reached.
    pub long_running: bool,
    /// Whether `tools/list` shows the tool under this policy.
    pub available: fn(&Policy) -> bool,
    /// Checks the arguments; the error text becomes a -32602 message.
    pub prepare: fn(&Context, &Map<String, Value>) -> Result<Work, String>,
}

/// Every tool the server offers, in the order `tools/list` shows them.
pub const TOOLS: &[Tool] = &[
    super::run_tool::TOOL,
    super::job_tools::SPAWN,
    super::job_tools::STATUS,
    super::job_tools::OUTPUT,
    super::job_tools::GREP,
    super::job_tools::SEND,
    super::job_tools::KILL,
];

pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// What every call can use: the policy and the server's options.
pub struct Context {
    pub policy: Arc<Policy>,
    pub workspace: Option<PathBuf>,
}

/// The work of one call, run on its own thread.
pub type Work = Box<dyn FnOnce(&CallEnv) -> ToolResult + Send>;

/// What a running call gets from the server.
pub struct CallEnv {
    /// Present when the request carried a progress token.
    pub progress: Option<Arc<Progress>>,
    /// Readable once the client cancelled the request.
    pub cancel: RawFd,
    /// Set (before `cancel` becomes readable) when the request is cancelled.
    pub cancelled: Arc<AtomicBool>,
}

/// A tool's answer: `structuredContent`, `content[0].text`, `isError`.
pub struct ToolResult {
    pub structured: Value,
    pub text: String,
    pub is_error: bool,
}

impl ToolResult {
    pub fn to_json(&self) -> Value {
        json!({
            "content": [{ "type": "text", "text": self.text }],
            "structuredContent": self.structured,
            "isError": self.is_error,
        })
    }
}

/// The `tools/list` entries.
pub fn listing(policy: &Policy) -> Vec<Value> {
    TOOLS
        .iter()
        .filter(|t| (t.available)(policy))
        .map(|t| {
            json!({
                "name": t.name,
                "title": t.title,
                "description": (t.description)(policy),
                "inputSchema": (t.input_schema)(),
                "outputSchema": (t.output_schema)(),
                "annotations": {
                    "title": t.title,
                    "readOnlyHint": t.annotations.read_only,
                    "destructiveHint": t.annotations.destructive,
                    "idempotentHint": t.annotations.idempotent,
                    "openWorldHint": t.annotations.open_world,
                },
            })
        })
        .collect()
}

/// Sends `notifications/progress` for one request: `progress` is the
/// elapsed time in milliseconds (strictly increasing, as MCP requires),
/// `message` an output chunk when there is one. Nothing is sent once the
/// request is cancelled.
pub struct Progress {
    out: Arc<Output>,
    token: Value,
    cancelled: Arc<AtomicBool>,
    started: Instant,
    last: std::sync::Mutex<f64>,
}

impl Progress {
    pub fn new(out: Arc<Output>, token: Value, cancelled: Arc<AtomicBool>) -> Progress {
        Progress {
            out,
            token,
            cancelled,
            started: Instant::now(),
            last: std::sync::Mutex::new(-1.0),
        }
    }

    pub fn notify(&self, message: Option<&str>, meta: Option<Value>) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        // Millisecond precision, and strictly above the previous value.
        let progress = ((ms * 1000.0).round() / 1000.0).max(*last + 0.001);
        *last = progress;
        let mut params = json!({ "progressToken": self.token, "progress": progress });
        if let Some(m) = message {
            params["message"] = Value::String(m.to_string());
        }
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let msg = json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params });
        self.out
            .send_unless(&msg, || self.cancelled.load(Ordering::SeqCst));
    }
}
