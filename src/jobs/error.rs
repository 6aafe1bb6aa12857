//! `JobError`: a failed job call.

use crate::result::{RunResult, code};
use serde::Serialize;
use std::io;

/// A failed job call: what went wrong, agent-rsh's exit code, and for a
/// command that was refused or could not start, its RunResult.
#[derive(Debug, Clone, Serialize, thiserror::Error, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[error("{error}")]
pub struct JobError {
    #[serde(skip)]
    pub code: i32,
    pub error: String,
    /// The RunResult of a command that was refused or could not start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RunResult>>,
    /// The id names no job (malformed, never spawned, or removed by gc),
    /// so a face can say where ids come from.
    #[serde(skip)]
    pub unknown_job: bool,
}

impl JobError {
    pub(super) fn new(code: i32, error: impl Into<String>) -> JobError {
        JobError {
            code,
            error: error.into(),
            result: None,
            unknown_job: false,
        }
    }

    pub(super) fn no_such_job(error: impl Into<String>) -> JobError {
        JobError {
            unknown_job: true,
            ..JobError::new(code::USAGE, error)
        }
    }

    pub(super) fn io(what: &str, e: io::Error) -> JobError {
        JobError::new(code::FAILED, format!("{what}: {e}"))
    }

    /// A command that was refused or could not start, with its RunResult.
    pub(super) fn from_result(r: RunResult) -> JobError {
        let error = match (&r.denial, &r.error) {
            (Some(d), _) => d.to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => format!("the command could not start ({:?})", r.status),
        };
        JobError {
            code: r.exit_code(),
            error,
            result: Some(Box::new(r)),
            unknown_job: false,
        }
    }
}

pub(super) type JobResult<T> = Result<T, JobError>;
