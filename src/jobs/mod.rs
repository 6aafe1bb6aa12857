//! Background jobs: a command checked like `run`, then owned by a detached
//! supervisor (agent-rsh itself, in its own session) that outlives the
//! calling process. Every other call (status, output, grep, send, kill,
//! wait, list, gc) is a separate process reading the job's private state
//! directory; the CLI and the MCP server are thin renderers over the
//! functions here.
//!
//! State directory (0700; `[jobs] state_dir`, else
//! `$XDG_STATE_HOME/agent-rsh/jobs`, else `~/.local/state/agent-rsh/jobs`):
//!
//! ```text
//! lock            flock'd by spawn (id allocation, max_concurrent) and gc
//! next-id         the id counter
//! N/lock          held (flock) by the spawner, then by the supervisor, for
//!                 as long as the job is alive: free and no result = lost
//! N/meta.json     command, output layout, limits (written by spawn)
//! N/supervisor.json  supervisor pid, workspace (as soon as it exists)
//! N/started.json  the tree's pid, start time (once the command runs)
//! N/result.json   the final RunResult and the job's status
//! N/stdin         FIFO: the child's stdin; the supervisor holds a writer
//! N/control       FIFO read by the supervisor: `eof`, `kill SIG`
//! N/{stdout,stderr,both}.{head,seg.I.L}   output (see `store`)
//! ```

/// The name of the detached supervisor's entry: not a subcommand (no
/// help, no completion), recognized by `cli::main` before parsing.
pub const SUPERVISE: &str = "__supervise";

pub mod cli;
mod control;
mod error;
mod gc;
mod grep;
mod query;
mod spawn;
mod state;
pub mod store;
mod supervisor;

pub use control::{Sent, kill, parse_signal, send, wait};
pub use error::JobError;
pub use gc::{GcReport, gc};
pub use grep::{GrepMatch, GrepQuery, GrepResult};
pub use query::{
    DEFAULT_OUTPUT_LIMIT, MAX_OUTPUT_LIMIT, OutputChunk, OutputQuery, follow, grep, list, output,
    status,
};
pub use spawn::{SpawnRequest, Spawned, spawn};
pub use state::{JobStatus, State, StateDir, StreamSel, now_ms};
pub use supervisor::supervise_main;

pub use crate::policy::jobs::{MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES};
