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
    /// Tool calls that may be in progress at once; further calls are
    /// answered at once with an error result.
    pub max_concurrent_calls: usize,
    /// Bytes of each output stream shown in the result's text (head and
    /// tail kept, the elision stated); `structuredContent` has the full
    /// capture up to `output.cap_bytes`.
    pub text_bytes: usize,
}

impl Default for McpPolicy {
    fn default() -> Self {
        McpPolicy {
            wrap_output: false,
            max_concurrent_calls: 8,
            text_bytes: 16 * 1024,
        }
    }
}

impl McpPolicy {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_concurrent_calls == 0 {
            return Err("mcp.max_concurrent_calls must be at least 1".into());
        }
        if self.text_bytes < 64 {
            return Err("mcp.text_bytes must be at least 64".into());
        }
        Ok(())
    }
}
