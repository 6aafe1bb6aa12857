//! Command-line flags that several faces share: a request's, the same for
//! `run`, `check` (the CLI) and `spawn` (jobs).

use crate::admit::{CommandInput, Request};
use crate::plan::StdinMode;
use clap::Args;
use std::path::PathBuf;

// What a caller asks for, as flags: the same for `run`, `check` and
// `spawn`, so the three cannot drift apart. (Not a doc comment: clap would
// take it as the about text of every subcommand that flattens this struct,
// since their flags are added after their own about, see `command`.)
#[derive(Args)]
pub struct RequestArgs {
    /// Working directory, relative to the workspace root.
    ///
    /// Security: it may not leave the workspace, through `..` or a symlink.
    #[arg(long, value_name = "DIR")]
    cwd: Option<String>,
    /// Deadline in milliseconds; may shorten the policy's (for spawn,
    /// jobs.max_runtime_ms), never extend it.
    ///
    /// A longer request is clamped, with a warning; 0 is refused.
    #[arg(long, value_name = "MS")]
    timeout: Option<u64>,
    /// Set a variable in the child's environment (repeatable).
    ///
    /// Security: names that load code or run programs (LD_*, BASH_ENV,
    /// PYTHONPATH, NODE_OPTIONS, GIT_*COMMAND*, PATH, HOME, ...) are refused.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Use this existing directory as the workspace (kept afterwards); the
    /// policy file must lie outside it.
    ///
    /// Without it each run gets a fresh 0700 directory, removed after it.
    /// Security: the workspace is the run's write scope; refused
    /// (workspace.system, exit 126), directly or through a symlink: /, the
    /// system directories /bin, /boot, /dev, /etc, /lib*, /proc, /run, /sbin,
    /// /sys, /usr, /var and everything inside /bin, /boot, /dev, /etc, /lib*,
    /// /proc, /sbin, /sys, /usr, the directories directly under /var and
    /// /run, and any directory containing the policy file.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Take the words as argv exactly (no lexing); the same checks apply.
    ///
    /// Every word still obeys the lexer's character rules.
    #[arg(long)]
    argv: bool,
    /// The command: one string (several words are joined with spaces, as
    /// ssh does), or argv words with --argv.
    #[arg(required = true, num_args = 1.., value_name = "CMD", trailing_var_arg = true)]
    command: Vec<String>,
}

impl RequestArgs {
    /// The command's words as given.
    pub fn words(&self) -> &[String] {
        &self.command
    }

    /// The request these flags ask for.
    pub fn request(&self, stdin: StdinMode) -> Request {
        Request {
            command: if self.argv {
                CommandInput::Argv(self.command.clone())
            } else {
                CommandInput::Line(self.command.join(" "))
            },
            cwd: self.cwd.clone(),
            timeout_ms: self.timeout,
            env: self.env.clone(),
            stdin,
        }
    }
}
