//! `Plan`: a checked request, everything exec needs and nothing it must decide.

use crate::script::ScriptPlan;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the child's standard input is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StdinMode {
    /// `/dev/null` (the default: an agent cannot answer a prompt).
    Null,
    /// agent-rsh's own standard input (`--stdin`, the interactive shell),
    /// relayed: through a pty agent-rsh allocates when it is a terminal,
    /// else through a pipe. The command never holds the caller's object.
    Inherit,
    /// These bytes, then end of file (MCP's `stdin` argument).
    Data(Vec<u8>),
    /// An fd the caller owns and keeps open for the whole run (a job's
    /// stdin FIFO); the run relays what it reads into the child's stdin
    /// pipe. An fd means nothing in another process, so it is never
    /// serialized.
    #[serde(skip)]
    Fd(std::os::fd::RawFd),
}

#[derive(Debug, Clone)]
pub struct Plan {
    /// The command as the caller gave it, for reports.
    pub command: String,
    pub argv: Vec<String>,
    /// Canonical path of the program, resolved through the policy's search path.
    pub program: PathBuf,
    /// Environment without the workspace-pinned variables (see `envp`).
    pub env: Vec<(String, String)>,
    /// The policy's search path, as the child's PATH.
    pub path_var: String,
    /// Working directory relative to the workspace root, `..`-free.
    pub cwd: PathBuf,
    pub timeout: Duration,
    pub grace: Duration,
    /// Captured bytes kept per stream.
    pub output_cap: usize,
    pub strip_ansi: bool,
    pub stdin: StdinMode,
    pub warnings: Vec<String>,
    /// A compound command: `program` and `argv` are agent-rsh's own
    /// interpreter, which runs this checked script in the confined process.
    pub script: Option<std::sync::Arc<ScriptPlan>>,
    /// An fd the command child keeps across exec (the interpreter's job).
    pub pass_fd: Option<std::os::fd::RawFd>,
}

impl Plan {
    /// The full environment for a run in `workspace`: pinned variables
    /// point into it unless the policy set them explicitly.
    pub fn envp(&self, workspace: &Path) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        let ws = workspace.display().to_string();
        let pinned = [
            ("PATH", self.path_var.clone()),
            ("HOME", ws.clone()),
            ("TMPDIR", ws.clone()),
            ("XDG_CACHE_HOME", format!("{ws}/.cache")),
            ("XDG_CONFIG_HOME", format!("{ws}/.config")),
            ("XDG_DATA_HOME", format!("{ws}/.local/share")),
            ("XDG_STATE_HOME", format!("{ws}/.local/state")),
            ("CARGO_HOME", format!("{ws}/.cargo")),
            ("npm_config_cache", format!("{ws}/.npm")),
        ];
        for (k, v) in pinned {
            if !env.iter().any(|(name, _)| name == k) {
                env.push((k.to_string(), v));
            }
        }
        env
    }
}
