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

mod job_tools;
mod jsonrpc;
mod protocol;
mod run_tool;
mod tools;

use crate::cli::{CliError, CliResult, exit_code};
pub use crate::policy::McpPolicy;
use crate::policy::Policy;
use crate::result::code;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct McpArgs {
    /// Run every call in this existing directory (kept between calls)
    /// instead of a fresh workspace per call.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
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
    Ok(exit_code(protocol::serve(policy, a.workspace)))
}
