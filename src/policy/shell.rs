//! `[shell]`: the interactive shell and the login contract.

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
