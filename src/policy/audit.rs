//! `[audit]`: the audit log.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[audit]` in the policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditPolicy {
    /// The JSON-lines file records are appended to.
    pub path: PathBuf,
    /// Log the login faces (`-c`, the interactive shell, commands read from
    /// standard input). On by default: an administrator wants to know what
    /// sandbox users did.
    pub login: bool,
    /// Log `agent-rsh run`. Off by default: agents call it at high rates and
    /// their callers usually keep their own records.
    pub agent: bool,
}

impl Default for AuditPolicy {
    fn default() -> Self {
        AuditPolicy {
            path: PathBuf::from("/var/log/agent-rsh/audit.jsonl"),
            login: true,
            agent: false,
        }
    }
}
