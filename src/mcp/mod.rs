//! `agent-rsh mcp`: the checked, confined run served as an MCP tool over
//! stdio, with the background-job tools (`spawn` and friends) beside it.
//!
//! A small synchronous JSON-RPC loop over serde_json, not an SDK with an
//! async runtime: the engine is synchronous (one poll loop per run), the
//! transport is one line per message, and the server must speak both the
//! handshake revision (2025-11-25) and the stateless one (2026-07-28) with
//! exact control over negotiation and cancellation. The main thread reads
//! stdin the whole time, so a `notifications/cancelled` reaches a run while
//! it is in progress; each tool call runs on its own thread; stdout writes
//! are serialized by `jsonrpc::Output`.

mod jsonrpc;
mod progress;
mod protocol;
mod render;
mod tools;

use crate::policy::Policy;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[mcp]` section of the policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpPolicy {
    /// Wrap command output in the tool result's text in an explicit
    /// untrusted-data boundary (a tag with a random nonce per call), so a
    /// model can tell the command's words from the server's.
    pub wrap_output: bool,
    /// Tool calls that may be in progress at once; further calls are
    /// answered at once with an error result.
    pub max_concurrent_calls: usize,
    /// Output in a `run` result, stdout and stderr together, in the text
    /// and in `structuredContent` alike (head and tail at line boundaries,
    /// the elision stated), unless the call gives `maxOutputBytes`; also
    /// the default page of the `output` tool.
    pub text_bytes: usize,
    /// Deadline of a `run` call that gives no `timeoutMs` (at most
    /// `limits.timeout_ms`): below the 60 s request timeout of common
    /// clients, so the timeout result reaches the model; longer work goes
    /// to `spawn`.
    pub timeout_ms: u64,
}

impl Default for McpPolicy {
    fn default() -> Self {
        McpPolicy {
            wrap_output: false,
            max_concurrent_calls: 8,
            text_bytes: crate::result::DEFAULT_MAX_OUTPUT,
            timeout_ms: 50_000,
        }
    }
}

impl McpPolicy {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_concurrent_calls == 0 {
            return Err("mcp.max_concurrent_calls must be at least 1".into());
        }
        if self.text_bytes < 256 {
            return Err("mcp.text_bytes must be at least 256".into());
        }
        if self.timeout_ms == 0 {
            return Err("mcp.timeout_ms must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Args)]
pub struct McpArgs {
    /// Policy file (default: $AGENT_RSH_POLICY, else the embedded default).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Run every call in this existing directory (kept between calls)
    /// instead of a fresh workspace per call.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Put PREFIX before every tool name (e.g. `rsh_` gives `rsh_run`),
    /// so they do not collide with another server's tools.
    #[arg(long, value_name = "PREFIX", default_value = "")]
    tool_prefix: String,
}

/// Runs the server until stdin closes; returns the process exit code.
pub fn main(a: McpArgs) -> i32 {
    let policy = match Policy::locate(a.policy.as_deref()) {
        Ok((p, _)) => p,
        Err(e) => {
            eprintln!("agent-rsh mcp: {e}");
            eprintln!(
                "agent-rsh mcp: not serving; fix the policy (`agent-rsh policy check FILE` validates it)"
            );
            return crate::result::code::FAILED;
        }
    };
    if let Some(dir) = &a.workspace
        && !dir.is_dir()
    {
        eprintln!(
            "agent-rsh mcp: --workspace {}: not a directory; create it or omit the flag",
            dir.display()
        );
        return crate::result::code::FAILED;
    }
    if let Err(e) = check_prefix(&a.tool_prefix) {
        eprintln!("agent-rsh mcp: --tool-prefix {:?}: {e}", a.tool_prefix);
        return crate::result::code::USAGE;
    }
    protocol::serve(policy, a.workspace, a.tool_prefix)
}

/// MCP tool names are 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn check_prefix(p: &str) -> Result<(), String> {
    if let Some(c) = p
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "{c:?} cannot appear in a tool name; use letters, digits, '_', '-' or '.'"
        ));
    }
    if p.len() > 64 {
        return Err("longer than 64 characters".into());
    }
    Ok(())
}
