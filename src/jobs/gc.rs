//! `jobs --gc`: remove finished jobs, lost jobs' workspaces, the
//! workspaces crashed runs left behind and their cgroups.

use super::error::JobResult;
use super::state::{Final, JobDir, StateDir, SupervisorInfo, now_ms, open_lock};
use crate::policy::Policy;
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// `jobs --gc`'s answer.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GcReport {
    /// Finished jobs whose state was removed.
    pub removed_jobs: Vec<String>,
    /// Workspaces removed: of lost jobs, and left by crashed runs.
    pub removed_workspaces: Vec<String>,
    /// Run cgroups left by agent-rsh processes that were SIGKILLed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_cgroups: Vec<String>,
    pub running: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Removes finished jobs older than `jobs.retain_ms`, the fresh workspaces
/// of lost jobs, and `agent-rsh-*` workspaces in the workspace parent that
/// crashed runs left behind (older than `retain_ms`, no live job's, and no
/// process working in them).
pub fn gc(policy: &Policy) -> JobResult<GcReport> {
    let mut rep = GcReport::default();
    let retain = policy.jobs.retain_ms;
    let now = now_ms();
    let mut live_workspaces = Vec::new();
    if let Some(state) = StateDir::open(policy, false)? {
        let _global = state.lock()?;
        // Leftovers of a spawn that died between mkdir and rename.
        for e in std::fs::read_dir(state.root())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".new-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        for job in state.jobs() {
            let sup: Option<SupervisorInfo> = job.read("supervisor.json");
            if job.alive() {
                rep.running += 1;
                live_workspaces.extend(sup.map(|s| s.workspace));
                continue;
            }
            let fin: Option<Final> = job.read("result.json");
            let ended = fin
                .as_ref()
                .map_or_else(|| job.last_activity_ms(), |f| f.ended_at_ms);
            if fin.is_none()
                && let Some(s) = &sup
                && s.fresh_workspace
                && s.workspace.exists()
            {
                match std::fs::remove_dir_all(&s.workspace) {
                    Ok(()) => rep
                        .removed_workspaces
                        .push(s.workspace.display().to_string()),
                    Err(e) => rep.errors.push(format!("{}: {e}", s.workspace.display())),
                }
            }
            if now.saturating_sub(ended) >= retain {
                match remove_job(&job) {
                    Ok(true) => rep.removed_jobs.push(job.id.clone()),
                    Ok(false) => {}
                    Err(e) => rep.errors.push(format!("job {}: {e}", job.id)),
                }
            }
        }
        retain_bounded(&state, policy, &mut rep);
    }
    stale_workspaces(policy, retain, now, &live_workspaces, &mut rep);
    rep.removed_cgroups = crate::confine::cgroup::gc()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Ok(rep)
}

/// Removes a finished job's directory, holding its lock so that no late
/// supervisor can be writing into it; false when the lock is held.
fn remove_job(job: &JobDir) -> std::io::Result<bool> {
    let Ok(l) = open_lock(&job.path("lock")) else {
        return Ok(false);
    };
    if !crate::sys::try_lock(&l) {
        return Ok(false);
    }
    std::fs::remove_dir_all(&job.dir)?;
    Ok(true)
}

/// A finished job as retention sees it.
struct Kept {
    job: JobDir,
    ended_ms: u64,
    bytes: u64,
}

/// Keeps at most `jobs.max_retained` finished jobs, taking at most
/// `jobs.max_retained_bytes` together: the ones that ended first go
/// until both hold. Running jobs are never touched. Called with the state
/// dir's lock held (by spawn, before a new job, and by `jobs --gc`);
/// adds the removed ids, and what could not be removed, to `rep`.
pub(super) fn retain_bounded(state: &StateDir, policy: &Policy, rep: &mut GcReport) {
    let mut kept: Vec<Kept> = state
        .jobs()
        .into_iter()
        .filter(|j| !j.alive())
        .map(|job| {
            let (bytes, newest) = dir_usage(&job.dir);
            // The result is written last: its time is when the job ended;
            // a lost job ended at its last write.
            let ended_ms = std::fs::metadata(job.path("result.json"))
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(newest, |d| d.as_millis() as u64);
            Kept {
                job,
                ended_ms,
                bytes,
            }
        })
        .collect();
    // Oldest first (ties: the lower id, the one created first).
    kept.sort_by_key(|k| k.ended_ms);
    let max_count = policy.jobs.max_retained as usize;
    let max_bytes = policy.jobs.max_retained_bytes;
    let mut count = kept.len();
    let mut bytes: u64 = kept.iter().map(|k| k.bytes).sum();
    for k in kept {
        if count <= max_count && bytes <= max_bytes {
            break;
        }
        // A lost job's fresh workspace has no other owner left.
        let sup: Option<SupervisorInfo> = k.job.read("supervisor.json");
        let fin = k.job.path("result.json").exists();
        match remove_job(&k.job) {
            Ok(true) => {
                if !fin
                    && let Some(s) = sup
                    && s.fresh_workspace
                {
                    let _ = std::fs::remove_dir_all(&s.workspace);
                }
                count -= 1;
                bytes = bytes.saturating_sub(k.bytes);
                rep.removed_jobs.push(k.job.id.clone());
            }
            Ok(false) => {}
            Err(e) => rep.errors.push(format!("job {}: {e}", k.job.id)),
        }
    }
}

/// Bytes of the files in a job's directory, and the newest change (ms).
fn dir_usage(dir: &Path) -> (u64, u64) {
    let mut bytes = 0;
    let mut newest = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(m) = e.metadata() {
            bytes += m.len();
            if let Some(t) = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            {
                newest = newest.max(t.as_millis() as u64);
            }
        }
    }
    (bytes, newest)
}

fn stale_workspaces(policy: &Policy, retain: u64, now: u64, live: &[PathBuf], rep: &mut GcReport) {
    let parent = policy
        .workspace
        .parent
        .clone()
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let Ok(rd) = std::fs::read_dir(&parent) else {
        return;
    };
    // SAFETY: geteuid has no memory effects.
    let me = unsafe { libc::geteuid() };
    let candidates: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("agent-rsh-"))
        .filter(|e| {
            e.metadata().is_ok_and(|m| {
                m.is_dir()
                    && m.uid() == me
                    && m.mode() & 0o7777 == 0o700
                    && m.modified()
                        .ok()
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .is_some_and(|t| now.saturating_sub(t.as_millis() as u64) >= retain)
            })
        })
        .filter_map(|e| e.path().canonicalize().ok())
        .filter(|p| !live.iter().any(|l| l == p))
        .filter(|p| !run_holds(p))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let in_use = processes_inside(&candidates);
    for ws in candidates {
        if in_use.contains(&ws) {
            continue;
        }
        match std::fs::remove_dir_all(&ws) {
            Ok(()) => rep.removed_workspaces.push(ws.display().to_string()),
            Err(e) => rep.errors.push(format!("{}: {e}", ws.display())),
        }
    }
}

/// A live run holds a shared flock on its fresh workspace.
fn run_holds(dir: &Path) -> bool {
    File::open(dir).map_or(true, |f| crate::sys::held(&f))
}

/// The directories among `dirs` that some process has as its cwd or root.
fn processes_inside(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut used = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if !e
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        for link in ["cwd", "root"] {
            if let Ok(p) = std::fs::read_link(e.path().join(link))
                && let Some(d) = dirs.iter().find(|d| p.starts_with(d))
            {
                used.push(d.clone());
            }
        }
    }
    used
}
