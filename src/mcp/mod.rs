//! `agent-rsh mcp`: the checked, confined run served as an MCP tool over
//! stdio, with the background-job tools (`spawn` and friends) beside it.
//!
//! A small synchronous JSON-RPC loop over serde_json, not an SDK with an
//! async runtime: the engine is synchronous (one poll loop per run), the
//! transport is one line per message, and the server must speak both the
//! handshake revision (2025-11-25) and the stateless one (2026-07-28) with
//! exact control over negotiation and cancellation. One thread or another
//! reads stdin the whole time, so a `notifications/cancelled` reaches a run
//! while it is in progress: the thread that reads a tool call runs it and
//! hands reading to another; stdout writes are serialized by
//! `jsonrpc::Output`.

mod jsonrpc;
mod progress;
mod protocol;
mod render;
mod tools;

use crate::exit::{CliError, CliResult, exit_code};
pub use crate::policy::McpPolicy;
use crate::policy::Policy;
use crate::result::code;
use clap::Args;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct McpArgs {
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
pub fn main(policy: Option<&Path>, a: McpArgs) -> CliResult {
    let (policy, _) = Policy::locate(policy).map_err(|e| CliError::policy(&e, "not serving"))?;
    if let Some(dir) = &a.workspace
        && !dir.is_dir()
    {
        return Err(CliError::new(
            code::FAILED,
            format!(
                "mcp --workspace {}: not a directory; create it or omit the flag",
                dir.display()
            ),
        ));
    }
    if let Err(e) = check_prefix(&a.tool_prefix) {
        return Err(CliError::new(
            code::USAGE,
            format!("mcp --tool-prefix {:?}: {e}", a.tool_prefix),
        ));
    }
    if std::io::stdin().is_terminal() {
        eprintln!("{TERMINAL_NOTICE}");
    }
    Ok(exit_code(protocol::serve(
        policy,
        a.workspace,
        a.tool_prefix,
    )))
}

/// Said once on stderr when stdin is a terminal: the server reads JSON-RPC
/// there, and a person who typed `agent-rsh mcp` would otherwise see
/// nothing happen.
const TERMINAL_NOTICE: &str = "agent-rsh mcp: waiting for an MCP client on stdin/stdout (one JSON-RPC message per line); an MCP client starts this command itself (docs/mcp.md). Ctrl-D or Ctrl-C leaves.";

/// Why `--tool-prefix` cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum PrefixError {
    #[error("{0:?} cannot appear in a tool name; use letters, digits, '_', '-' or '.'")]
    Char(char),
    #[error("longer than {MAX_PREFIX} characters")]
    TooLong,
}

/// The longest `--tool-prefix`, leaving room for the names in MCP's 128.
const MAX_PREFIX: usize = 64;

/// MCP tool names are 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn check_prefix(p: &str) -> Result<(), PrefixError> {
    if let Some(c) = p
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(PrefixError::Char(c));
    }
    if p.len() > MAX_PREFIX {
        return Err(PrefixError::TooLong);
    }
    Ok(())
}
