//! The state directory: where jobs live, what each file holds, and the
//! job lock that tells a live job from a finished or lost one.

use super::error::{JobError, JobResult};
use super::store::{self, Layout};
use crate::policy::Policy;
use crate::result::{RunResult, code};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Which stored stream to read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum StreamSel {
    Stdout,
    Stderr,
    /// stdout and stderr interleaved in arrival order.
    #[default]
    Both,
}

impl StreamSel {
    pub(super) fn file(self) -> &'static str {
        match self {
            StreamSel::Stdout => "stdout",
            StreamSel::Stderr => "stderr",
            StreamSel::Both => "both",
        }
    }
}

/// What a job is doing, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum State {
    Running,
    Exited,
    Signaled,
    TimedOut,
    /// Stopped by `kill` (or a signal to its supervisor).
    Killed,
    /// The supervisor died without a result; its tree died with it.
    Lost,
    /// The command could not be started.
    Failed,
    NotFound,
    Denied,
}

/// Written by spawn before the supervisor starts; never changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Meta {
    pub(super) id: String,
    pub(super) command: String,
    pub(super) created_at_ms: u64,
    pub(super) layout: Layout,
    pub(super) strip_ansi: bool,
    pub(super) grace_ms: u64,
}

/// Written by the supervisor as soon as it has a workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SupervisorInfo {
    pub(super) supervisor_pid: i32,
    pub(super) workspace: PathBuf,
    /// A workspace the supervisor made (removed at the end, or by gc when
    /// the job is lost) as opposed to one the caller named or kept.
    pub(super) fresh_workspace: bool,
}

/// Written once the command runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Started {
    pub(super) pid: i32,
    pub(super) started_at_ms: u64,
}

/// Written when the job ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Final {
    pub(super) status: State,
    pub(super) ended_at_ms: u64,
    pub(super) run: RunResult,
}

/// `status`'s answer (also one row of `list`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub id: String,
    pub status: State,
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Output beyond the cap was elided on disk (head and tail kept).
    pub truncated: bool,
    pub runtime_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub created_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl JobStatus {
    /// agent-rsh's exit code for `wait` and `kill`: as `run` would exit.
    pub fn exit_code(&self) -> i32 {
        match self.status {
            State::Running => code::TIMEOUT,
            State::Exited => self.exit_code.unwrap_or(code::FAILED),
            State::Signaled | State::Killed => 128 + self.signal.unwrap_or(libc::SIGTERM),
            State::TimedOut => code::TIMEOUT,
            State::Lost | State::Failed => self.exit_code.unwrap_or(code::FAILED),
            State::NotFound => code::NOT_FOUND,
            State::Denied => code::DENIED,
        }
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The private directory holding every job.
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Where the policy puts job state.
    pub fn path(policy: &Policy) -> JobResult<PathBuf> {
        if let Some(d) = &policy.jobs.state_dir {
            return Ok(d.clone());
        }
        let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        if let Some(x) = std::env::var_os("XDG_STATE_HOME").and_then(abs) {
            return Ok(x.join("agent-rsh/jobs"));
        }
        if let Some(h) = std::env::var_os("HOME").and_then(abs) {
            return Ok(h.join(".local/state/agent-rsh/jobs"));
        }
        Err(JobError::new(
            code::FAILED,
            "no state directory for jobs: set XDG_STATE_HOME or HOME, or jobs.state_dir in the policy",
        ))
    }

    /// Opens (creating when asked) the state dir and checks that it is a
    /// real directory of ours that nobody else can enter.
    pub fn open(policy: &Policy, create: bool) -> JobResult<Option<StateDir>> {
        let root = StateDir::path(policy)?;
        if create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&root)
                .map_err(|e| JobError::io(&format!("cannot create {}", root.display()), e))?;
        }
        let md = match std::fs::symlink_metadata(&root) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(JobError::io(&format!("state dir {}", root.display()), e)),
        };
        // SAFETY: geteuid has no memory effects.
        let me = unsafe { libc::geteuid() };
        if !md.is_dir() || md.uid() != me || md.mode() & 0o077 != 0 {
            return Err(JobError::new(
                code::FAILED,
                format!(
                    "state dir {} must be a directory owned by uid {me} with mode 0700 (it is {} uid {} mode {:o}); fix it (chmod 700) or set jobs.state_dir",
                    root.display(),
                    if md.is_dir() {
                        "a directory"
                    } else {
                        "not a directory"
                    },
                    md.uid(),
                    md.mode() & 0o7777
                ),
            ));
        }
        if let Err(why) = crate::workspace::safe_ancestors(&root) {
            return Err(JobError::new(
                code::FAILED,
                format!(
                    "state dir {}: {why}; set jobs.state_dir (or XDG_STATE_HOME) to a directory of this account",
                    root.display()
                ),
            ));
        }
        Ok(Some(StateDir { root }))
    }

    pub(super) fn must_open(policy: &Policy) -> JobResult<StateDir> {
        StateDir::open(policy, false)?.ok_or_else(|| {
            JobError::no_such_job(
                "there are no jobs yet (no state directory); start one with `agent-rsh spawn`",
            )
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The state dir's own lock (id allocation, max_concurrent, gc).
    pub(super) fn lock(&self) -> JobResult<File> {
        let f = open_lock(&self.root.join("lock"))
            .map_err(|e| JobError::io("cannot open the jobs lock", e))?;
        crate::sys::lock(&f).map_err(|e| JobError::io("cannot lock the jobs dir", e))?;
        Ok(f)
    }

    pub(super) fn job(&self, id: &str) -> JobResult<JobDir> {
        if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(JobError::no_such_job(format!(
                "`{id}` is not a job id (ids are numbers; `agent-rsh jobs` lists them)"
            )));
        }
        let dir = self.root.join(id);
        if !dir.join("meta.json").is_file() {
            return Err(JobError::no_such_job(format!(
                "no job {id} in {} (`agent-rsh jobs` lists them; finished jobs are removed beyond jobs.max_retained and by `jobs --gc`)",
                self.root.display()
            )));
        }
        Ok(JobDir {
            id: id.to_string(),
            dir,
        })
    }

    /// Every job, oldest first.
    pub(super) fn jobs(&self) -> Vec<JobDir> {
        let mut ids: Vec<u64> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|i| self.job(&i.to_string()).ok())
            .collect()
    }
}

/// Opens (creating) a lock file. Locks are taken with `sys::lock`: a
/// job's lock is handed to its supervisor and must outlive the spawner's
/// copy, so nothing unlocks it on drop.
pub(super) fn open_lock(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

/// One job's directory.
pub(super) struct JobDir {
    pub(super) id: String,
    pub(super) dir: PathBuf,
}

impl JobDir {
    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub(super) fn read<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Option<T> {
        let text = std::fs::read(self.path(name)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    pub(super) fn meta(&self) -> JobResult<Meta> {
        self.read("meta.json").ok_or_else(|| {
            JobError::new(
                code::FAILED,
                format!("job {}: meta.json is missing or unreadable", self.id),
            )
        })
    }

    /// True while a spawner or supervisor holds the job's lock.
    pub(super) fn alive(&self) -> bool {
        File::open(self.path("lock")).is_ok_and(|f| crate::sys::held_by_another(&f))
    }

    fn totals(&self, meta: &Meta) -> (u64, u64, bool) {
        let view = |s: StreamSel| store::StreamView::open(&self.dir, s.file(), meta.layout).ok();
        let (o, e, b) = (
            view(StreamSel::Stdout),
            view(StreamSel::Stderr),
            view(StreamSel::Both),
        );
        let t = |v: &Option<store::StreamView>| v.as_ref().is_some_and(|v| v.truncated());
        (
            o.as_ref().map_or(0, |v| v.total),
            e.as_ref().map_or(0, |v| v.total),
            t(&o) || t(&e) || t(&b),
        )
    }

    /// The last time anything in the job dir changed.
    pub(super) fn last_activity_ms(&self) -> u64 {
        std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.metadata().ok()?.modified().ok())
            .filter_map(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .max()
            .unwrap_or(0)
    }

    pub(super) fn status(&self) -> JobResult<JobStatus> {
        let meta = self.meta()?;
        let alive = self.alive();
        let fin: Option<Final> = self.read("result.json");
        let sup: Option<SupervisorInfo> = self.read("supervisor.json");
        let started: Option<Started> = self.read("started.json");
        let (stdout_bytes, stderr_bytes, truncated) = self.totals(&meta);
        let begin = started
            .as_ref()
            .map_or(meta.created_at_ms, |s| s.started_at_ms);
        let mut st = JobStatus {
            id: self.id.clone(),
            status: State::Running,
            command: meta.command.clone(),
            exit_code: None,
            signal: None,
            stdout_bytes,
            stderr_bytes,
            truncated,
            runtime_ms: now_ms().saturating_sub(begin),
            pid: started.as_ref().map(|s| s.pid),
            workspace: sup.as_ref().map(|s| s.workspace.display().to_string()),
            created_at_ms: meta.created_at_ms,
            error: None,
            warnings: Vec::new(),
        };
        match fin {
            Some(f) => {
                st.status = f.status;
                let r = f.run;
                st.exit_code = r.exit_code;
                st.signal = r.signal;
                st.runtime_ms = r.duration_ms;
                st.error = match r.denial {
                    Some(d) => Some(format!("{}: {}", d.rule, d.reason)),
                    None => r.error,
                };
                st.warnings = r.warnings;
            }
            None if alive => {}
            None => {
                st.status = State::Lost;
                st.runtime_ms = self.last_activity_ms().saturating_sub(begin);
                st.error = Some(
                    "the job's supervisor ended without a result (killed?); the job's processes were killed with it"
                        .into(),
                );
            }
        }
        Ok(st)
    }
}

/// Writes a file whole or not at all (temp file, then rename).
pub(super) fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    // A fresh file, never one that is there (a planted symlink would be
    // followed and truncated); a concurrent writer's leftover is removed
    // and the creation tried again.
    let mut tries = 0;
    let mut f = loop {
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            r => break r?,
        }
    };
    // No fsync: job state does not outlive a reboot (the jobs do not).
    f.write_all(data)?;
    std::fs::rename(&tmp, path)
}
