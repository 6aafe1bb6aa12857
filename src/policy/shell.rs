//! `[shell]`: the interactive shell and the login contract; and which
//! shells a run's commands start are agent-rsh's own interpreter.

use serde::{Deserialize, Serialize};

/// `[shell]` in the policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellPolicy {
    /// End an interactive or standard-input session after this many
    /// refused lines (0: never). The end is logged.
    pub warning_limit: u32,
    /// Let `$AGENT_RSH_POLICY` replace the system policy for this user. Off:
    /// users must not choose their own policy.
    pub allow_policy_env: bool,
    /// Lines kept in `~/.agent-rsh_history` (0: no history file).
    pub history_size: usize,
}

impl Default for ShellPolicy {
    fn default() -> Self {
        ShellPolicy {
            warning_limit: 0,
            allow_policy_env: false,
            history_size: 1000,
        }
    }
}

/// The shells whose scripts agent-rsh runs itself.
pub const SHELLS: &[&str] = &["sh", "bash", "dash"];

/// Whether a command word names a shell (`sh`, `/bin/bash`, ...).
pub fn is_shell(word: &str) -> bool {
    SHELLS.contains(&word.rsplit('/').next().unwrap_or(word))
}

impl super::Policy {
    /// Whether a shell named by `word` runs on agent-rsh's interpreter: a
    /// shell the policy allows by name (`commands.allow = ["bash"]`) is
    /// that program, as the policy says; any other is the interpreter.
    pub fn interprets_shell(&self, word: &str) -> bool {
        let name = word.rsplit('/').next().unwrap_or(word);
        is_shell(word) && !self.commands.allow.iter().any(|a| a == name)
    }
}
