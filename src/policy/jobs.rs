//! `[jobs]`: background jobs (`spawn` and friends).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[jobs]` policy table.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsPolicy {
    /// Jobs alive at once; 0 disables `spawn`.
    pub max_concurrent: u32,
    /// Bytes kept on disk per stream (stdout, stderr and the arrival-order
    /// log each): the first and last halves.
    pub max_output_bytes: u64,
    /// A job's deadline (it replaces `limits.timeout_ms` for jobs).
    /// At most 24 hours.
    #[serde(deserialize_with = "super::job_runtime_ms")]
    pub max_runtime_ms: u64,
    /// `jobs --gc` removes finished jobs, and workspaces left by crashed
    /// runs, older than this.
    pub retain_ms: u64,
    /// Finished jobs kept at most; the oldest beyond it are removed at
    /// the next spawn.
    pub max_retained: u32,
    /// Bytes the finished jobs' state may take on disk together; the
    /// oldest beyond it are removed at the next spawn.
    pub max_retained_bytes: u64,
    /// Where job state lives (default `$XDG_STATE_HOME/agent-rsh/jobs`).
    pub state_dir: Option<PathBuf>,
}

impl Default for JobsPolicy {
    fn default() -> Self {
        JobsPolicy {
            max_concurrent: 4,
            max_output_bytes: 8 << 20,
            max_runtime_ms: 3_600_000,
            retain_ms: 86_400_000,
            max_retained: 100,
            max_retained_bytes: 256 << 20,
            state_dir: None,
        }
    }
}

/// The smallest per-stream cap: enough for a useful head and tail.
pub const MIN_OUTPUT_BYTES: u64 = 1024;
/// The largest: `grep` holds one stream's stored bytes in memory.
pub const MAX_OUTPUT_BYTES: u64 = 1 << 30;

/// A `[jobs]` value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobsError {
    #[error("jobs.max_output_bytes must be between {MIN_OUTPUT_BYTES} and {MAX_OUTPUT_BYTES}")]
    OutputBytes,
    #[error("jobs.max_runtime_ms must be at least 1")]
    Runtime,
    #[error("jobs.state_dir {0:?} must be an absolute directory")]
    StateDir(PathBuf),
}

impl JobsPolicy {
    pub fn validate(&self) -> Result<(), JobsError> {
        if !(MIN_OUTPUT_BYTES..=MAX_OUTPUT_BYTES).contains(&self.max_output_bytes) {
            return Err(JobsError::OutputBytes);
        }
        if self.max_runtime_ms == 0 {
            return Err(JobsError::Runtime);
        }
        if let Some(d) = &self.state_dir
            && !d.is_absolute()
        {
            return Err(JobsError::StateDir(d.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_policy_validation() {
        let mut p = JobsPolicy::default();
        assert!(p.validate().is_ok());
        p.max_output_bytes = 10;
        assert!(p.validate().is_err());
        p = JobsPolicy {
            state_dir: Some("rel".into()),
            ..Default::default()
        };
        assert!(p.validate().is_err());
    }
}
