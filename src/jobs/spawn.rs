//! `spawn`: check the command as `run` does, make the job's directory and
//! hand the job to its supervisor.

use super::error::{JobError, JobResult};
use super::state::{Meta, StateDir, now_ms, open_lock, write_atomic};
use super::store::Layout;
use super::supervisor;
use crate::admit::{self, Request};
use crate::check::Denial;
use crate::plan::StdinMode;
use crate::policy::Policy;
use crate::policy::jobs::MIN_OUTPUT_BYTES;
use crate::result::{RunResult, code};
use serde::Serialize;
use std::fs::File;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// `spawn`'s answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spawned {
    pub id: String,
    /// The job's process tree root (the guardian; PID 1 of the job's PID
    /// namespace when there is one), the process `kill` signals.
    pub pid: i32,
    pub workspace: String,
    pub supervisor_pid: i32,
    pub timeout_ms: u64,
    pub max_output_bytes: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What to spawn: the same request `run` builds, plus job options.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// Its stdin is the job's FIFO whatever it says.
    pub request: Request,
    /// Run in this existing directory instead of a fresh workspace.
    pub workspace: Option<PathBuf>,
    /// Keep the fresh workspace when the job ends.
    pub keep: bool,
    /// Per-stream cap; may shorten `jobs.max_output_bytes`, never extend it.
    pub max_output_bytes: Option<u64>,
}

impl SpawnRequest {
    pub fn new(request: Request) -> SpawnRequest {
        SpawnRequest {
            request,
            workspace: None,
            keep: false,
            max_output_bytes: None,
        }
    }
}

/// Checks the command exactly as `run` does and, when allowed, starts it
/// under a detached supervisor; returns once the command is running.
pub fn spawn(policy: &Policy, sreq: &SpawnRequest) -> JobResult<Spawned> {
    if policy.jobs.max_concurrent == 0 {
        let d = Denial::new(
            "jobs.disabled",
            "the policy allows no background jobs (jobs.max_concurrent = 0)",
            "use `agent-rsh run`, or raise jobs.max_concurrent in the policy",
        );
        return Err(JobError::from_result(RunResult::denied(
            sreq.request.display(),
            d,
        )));
    }
    // A job's deadline is bounded by jobs.max_runtime_ms.
    let mut jpolicy = policy.clone();
    jpolicy.limits.timeout_ms = policy.jobs.max_runtime_ms;
    let req = Request {
        stdin: StdinMode::Null,
        ..sreq.request.clone()
    };
    // The supervisor admits it again before it runs (`engine::execute`).
    let plan = admit::admit(&jpolicy, &req, sreq.workspace.as_deref())
        .map_err(|d| JobError::from_result(RunResult::denied(req.display(), d)))?;
    let cap = match sreq.max_output_bytes {
        Some(n) if n < MIN_OUTPUT_BYTES => {
            return Err(JobError::new(
                code::USAGE,
                format!("--max-output {n} is below the minimum of {MIN_OUTPUT_BYTES} bytes"),
            ));
        }
        Some(n) => n.min(policy.jobs.max_output_bytes),
        None => policy.jobs.max_output_bytes,
    };
    let state = StateDir::open(policy, true)?.expect("state dir was just created");
    // Absolute, because the supervisor works from `/`.
    let workspace = match &sreq.workspace {
        Some(ws) => Some(refuse_overlap(ws, state.root())?),
        None => None,
    };

    let global = state.lock()?;
    // Finished jobs beyond jobs.max_retained / max_retained_bytes go now;
    // what cannot be removed is left for `jobs --gc` to report.
    super::gc::retain_bounded(&state, policy, &mut super::GcReport::default());
    let running = state.jobs().iter().filter(|j| j.alive()).count();
    if running >= policy.jobs.max_concurrent as usize {
        let d = Denial::new(
            "jobs.max-concurrent",
            format!(
                "{running} jobs are running and the policy allows at most {} at once (jobs.max_concurrent)",
                policy.jobs.max_concurrent
            ),
            "wait for one to end (`agent-rsh wait ID`) or stop one (`agent-rsh kill ID`); `agent-rsh jobs` lists them",
        );
        return Err(JobError::from_result(RunResult::denied(req.display(), d)));
    }
    let id = next_id(state.root()).map_err(|e| JobError::io("cannot allocate a job id", e))?;
    let fresh = state.root().join(format!(".new-{id}"));
    let (dir, lock) =
        prepare_job_dir(&fresh, state.root(), &id, &req, &plan, cap).map_err(|e| {
            let _ = std::fs::remove_dir_all(&fresh);
            JobError::io("cannot create the job's directory", e)
        })?;

    let spec = supervisor::Spec {
        id: id.clone(),
        dir: dir.clone(),
        origin: jpolicy.origin.clone(),
        policy: jpolicy,
        request: req,
        workspace,
        keep: sreq.keep,
        layout: Layout::new(cap),
    };
    let ready = supervisor::launch(&spec, &lock);
    drop(lock);
    drop(global);
    let ready = ready?;
    Ok(Spawned {
        id,
        pid: ready.pid,
        workspace: ready.workspace,
        supervisor_pid: ready.supervisor_pid,
        timeout_ms: plan.timeout.as_millis() as u64,
        max_output_bytes: cap,
        warnings: plan.warnings,
    })
}

/// A workspace that contains the state dir (or lies inside it) would let
/// the job rewrite its own and other jobs' state.
fn refuse_overlap(ws: &Path, state: &Path) -> JobResult<PathBuf> {
    let ws = ws.canonicalize().map_err(|e| {
        JobError::new(
            code::USAGE,
            format!(
                "workspace {}: {e}; give an existing directory",
                ws.display()
            ),
        )
    })?;
    let state = state.canonicalize().unwrap_or_else(|_| state.to_path_buf());
    if ws.starts_with(&state) || state.starts_with(&ws) {
        return Err(JobError::new(
            code::USAGE,
            format!(
                "workspace {} overlaps the jobs state directory {}; choose a directory outside it",
                ws.display(),
                state.display()
            ),
        ));
    }
    Ok(ws)
}

fn next_id(root: &Path) -> io::Result<String> {
    let path = root.join("next-id");
    let n: u64 = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    // Never reuse the id of a directory still present.
    let mut n = n.max(1);
    while root.join(n.to_string()).exists() {
        n += 1;
    }
    write_atomic(&path, format!("{}\n", n + 1).as_bytes())?;
    Ok(n.to_string())
}

/// Makes the job's directory under a hidden name, locks it, fills it, and
/// renames it into place: a visible job dir always has its lock held or a
/// result.
fn prepare_job_dir(
    tmp: &Path,
    root: &Path,
    id: &str,
    req: &Request,
    plan: &crate::plan::Plan,
    cap: u64,
) -> io::Result<(PathBuf, File)> {
    std::fs::DirBuilder::new().mode(0o700).create(tmp)?;
    let lock = open_lock(&tmp.join("lock"))?;
    crate::sys::lock(&lock)?;
    let meta = Meta {
        id: id.to_string(),
        command: req.display(),
        created_at_ms: now_ms(),
        layout: Layout::new(cap),
        strip_ansi: plan.strip_ansi,
        grace_ms: plan.grace.as_millis() as u64,
    };
    write_atomic(
        &tmp.join("meta.json"),
        &serde_json::to_vec(&meta).map_err(io::Error::other)?,
    )?;
    for fifo in ["stdin", "control"] {
        nix::unistd::mkfifo(
            &tmp.join(fifo),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )?;
    }
    let dir = root.join(id);
    std::fs::rename(tmp, &dir)?;
    Ok((dir, lock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::status;

    #[test]
    fn an_id_that_names_no_job_is_marked_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = Policy::default();
        policy.jobs.state_dir = Some(dir.path().join("jobs"));
        // No state directory yet, then an empty one.
        for create in [false, true] {
            if create {
                StateDir::open(&policy, true).unwrap();
            }
            for id in ["7", "x", "", "1/../2"] {
                let e = status(&policy, id).unwrap_err();
                assert!(e.unknown_job, "{id:?}: {e:?}");
                assert_eq!(e.code, code::USAGE);
            }
        }
        // Other failures are not.
        assert!(!JobError::new(code::FAILED, "x").unknown_job);
        policy.jobs.max_concurrent = 0;
        let e = spawn(&policy, &SpawnRequest::new(Request::line("true"))).unwrap_err();
        assert!(!e.unknown_job, "{e:?}");
        assert_eq!(e.code, code::DENIED);
    }
}
