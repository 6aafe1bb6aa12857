//! `Plan`: a checked request, everything exec needs and nothing it must decide.

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

/// Where a run's mount view holds the job of its nested shells, on the
/// view's read-only root: nothing the run does to its environment or
/// descriptors changes what a nested shell checks.
pub const SHELL_JOB: &str = "/.agent-rsh/job.json";

/// A file on a run's read-only view root that exists when `/tmp` in the
/// view is the run's private one (the workspace's, kept in its state
/// directory, or a tmpfs of a fresh workspace's run): the interpreter lets
/// a redirection or `cd` reach `/tmp` only then.
pub const PRIVATE_TMP: &str = "/.agent-rsh/private-tmp";

/// What a nested shell in a run's mount view reads from `SHELL_JOB`: the
/// run's policy and workspace.
#[derive(Debug, Serialize, Deserialize)]
pub struct ShellJob {
    pub policy: crate::policy::Policy,
    pub workspace: PathBuf,
}

/// agent-rsh's own binary, canonical: the program a compound command's
/// run executes (`agent-rsh __script FD`), and the shells of a run's
/// mount view.
pub fn agent_rsh_binary() -> PathBuf {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("/proc/self/exe"))
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
    pub script: Option<std::sync::Arc<crate::script::ScriptPlan>>,
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
