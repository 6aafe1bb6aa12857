//! `jobs --gc`: remove finished jobs, lost jobs' workspaces, the
//! workspaces crashed runs left behind and their cgroups.

use super::error::JobResult;
use super::state::{Final, StateDir, SupervisorInfo, now_ms, open_lock};
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
                // Hold the job's lock while removing it, so no late
                // supervisor can be writing into it.
                if let Ok(l) = open_lock(&job.path("lock"))
                    && crate::sys::try_lock(&l)
                {
                    match std::fs::remove_dir_all(&job.dir) {
                        Ok(()) => rep.removed_jobs.push(job.id.clone()),
                        Err(e) => rep.errors.push(format!("job {}: {e}", job.id)),
                    }
                }
            }
        }
    }
    stale_workspaces(policy, retain, now, &live_workspaces, &mut rep);
    rep.removed_cgroups = crate::confine::cgroup::gc()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Ok(rep)
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
