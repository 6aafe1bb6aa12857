//! `[mcp]`: the MCP server face (`agent-rsh mcp`).

use serde::{Deserialize, Serialize};

/// The `[mcp]` section of the policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpPolicy {
    /// Wrap command output in the tool result's text in an explicit
    /// untrusted-data boundary (a tag with a random nonce per call), so a
    /// model can tell the command's words from the server's.
    pub wrap_output: bool,
    /// Tool calls that may be in progress at once, every tool counted;
    /// further calls are answered at once with an error result saying to
    /// call again once one has finished. The quick job tools (output,
    /// grep, kill) may go 4 calls past it, so a model can still read and
    /// stop its jobs while runs fill it.
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

/// An `[mcp]` value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("mcp.max_concurrent_calls must be at least 1")]
    ConcurrentCalls,
    #[error("mcp.text_bytes must be at least {MIN_TEXT_BYTES}")]
    TextBytes,
    #[error("mcp.timeout_ms must be at least 1")]
    Timeout,
}

/// The smallest `mcp.text_bytes`.
pub const MIN_TEXT_BYTES: usize = 256;

impl McpPolicy {
    pub fn validate(&self) -> Result<(), McpError> {
        if self.max_concurrent_calls == 0 {
            return Err(McpError::ConcurrentCalls);
        }
        if self.text_bytes < MIN_TEXT_BYTES {
            return Err(McpError::TextBytes);
        }
        if self.timeout_ms == 0 {
            return Err(McpError::Timeout);
        }
        Ok(())
    }
}
