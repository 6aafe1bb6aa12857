//! Background jobs: a command checked like `run`, then owned by a detached
//! supervisor (agent-rsh itself, in its own session) that outlives the
//! calling process. Every other call (status, output, grep, send, kill,
//! wait, list, gc) is a separate process reading the job's private state
//! directory; the CLI and the MCP server are thin renderers over the
//! functions here.
//!
//! State directory (0700; `[jobs] state_dir`, else
//! `$XDG_STATE_HOME/agent-rsh/jobs`, else `~/.local/state/agent-rsh/jobs`):
//!
//! ```text
//! lock            flock'd by spawn (id allocation, max_concurrent) and gc
//! next-id         the id counter
//! N/lock          held (flock) by the spawner, then by the supervisor, for
//!                 as long as the job is alive: free and no result = lost
//! N/meta.json     command, output layout, limits (written by spawn)
//! N/supervisor.json  supervisor pid, workspace (as soon as it exists)
//! N/started.json  the tree's pid, start time (once the command runs)
//! N/result.json   the final RunResult and the job's status
//! N/stdin         FIFO: the child's stdin; the supervisor holds a writer
//! N/control       FIFO read by the supervisor: `eof`, `kill SIG`
//! N/{stdout,stderr,both}.{head,seg.I.L}   output (see `store`)
//! ```

pub mod cli;
mod grep;
pub mod store;
mod supervisor;

pub use grep::{GrepMatch, GrepQuery, GrepResult};
pub use supervisor::supervise_main;

use crate::check::{self, Denial, Request};
use crate::plan::StdinMode;
use crate::policy::Policy;
pub use crate::policy::jobs::{MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES};
use crate::result::{RunResult, code};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use store::Layout;

/// A failed job call: what went wrong, agent-rsh's exit code, and for a
/// command that was refused or could not start, its RunResult.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobError {
    #[serde(skip)]
    pub code: i32,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The id names no job (malformed, never spawned, or removed by gc),
    /// so a face can say where ids come from.
    #[serde(skip)]
    pub unknown_job: bool,
}

impl JobError {
    fn new(code: i32, error: impl Into<String>) -> JobError {
        JobError {
            code,
            error: error.into(),
            result: None,
            unknown_job: false,
        }
    }

    fn no_such_job(error: impl Into<String>) -> JobError {
        JobError {
            unknown_job: true,
            ..JobError::new(code::USAGE, error)
        }
    }

    fn io(what: &str, e: io::Error) -> JobError {
        JobError::new(code::FAILED, format!("{what}: {e}"))
    }

    fn from_result(r: &RunResult) -> JobError {
        let error = match (&r.denial, &r.error) {
            (Some(d), _) => d.to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => format!("the command could not start ({:?})", r.status),
        };
        JobError {
            code: r.exit_code(),
            error,
            result: serde_json::to_value(r).ok(),
            unknown_job: false,
        }
    }
}

type JobResult<T> = Result<T, JobError>;

/// Which stored stream to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StreamSel {
    Stdout,
    Stderr,
    /// stdout and stderr interleaved in arrival order.
    #[default]
    Both,
}

impl StreamSel {
    fn file(self) -> &'static str {
        match self {
            StreamSel::Stdout => "stdout",
            StreamSel::Stderr => "stderr",
            StreamSel::Both => "both",
        }
    }
}

/// What a job is doing, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
struct Meta {
    id: String,
    command: String,
    created_at_ms: u64,
    layout: Layout,
    strip_ansi: bool,
    grace_ms: u64,
}

/// Written by the supervisor as soon as it has a workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SupervisorInfo {
    supervisor_pid: i32,
    workspace: PathBuf,
    /// A workspace the supervisor made (removed at the end, or by gc when
    /// the job is lost) as opposed to one the caller named or kept.
    fresh_workspace: bool,
}

/// Written once the command runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Started {
    pid: i32,
    started_at_ms: u64,
}

/// Written when the job ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Final {
    status: State,
    ended_at_ms: u64,
    run: serde_json::Value,
}

/// `spawn`'s answer.
#[derive(Debug, Clone, Serialize)]
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

/// `status`'s answer (also one row of `list`).
#[derive(Debug, Clone, Serialize)]
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

// ---- the state directory ----

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
        Ok(Some(StateDir { root }))
    }

    fn must_open(policy: &Policy) -> JobResult<StateDir> {
        StateDir::open(policy, false)?.ok_or_else(|| {
            JobError::no_such_job(
                "there are no jobs yet (no state directory); start one with `agent-rsh spawn`",
            )
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn lock(&self) -> JobResult<OwnedFd> {
        let f = open_lock(&self.root.join("lock"))
            .map_err(|e| JobError::io("cannot open the jobs lock", e))?;
        flock(&f, libc::LOCK_EX).map_err(|e| JobError::io("cannot lock the jobs dir", e))?;
        Ok(f)
    }

    fn job(&self, id: &str) -> JobResult<JobDir> {
        if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(JobError::no_such_job(format!(
                "`{id}` is not a job id (ids are numbers; `agent-rsh jobs` lists them)"
            )));
        }
        let dir = self.root.join(id);
        if !dir.join("meta.json").is_file() {
            return Err(JobError::no_such_job(format!(
                "no job {id} in {} (`agent-rsh jobs` lists them; finished jobs are removed by `jobs --gc`)",
                self.root.display()
            )));
        }
        Ok(JobDir {
            id: id.to_string(),
            dir,
        })
    }

    /// Every job, oldest first.
    fn jobs(&self) -> Vec<JobDir> {
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

fn open_lock(path: &Path) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)?;
    Ok(f.into())
}

fn flock(fd: &OwnedFd, op: i32) -> io::Result<()> {
    loop {
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(fd.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One job's directory.
struct JobDir {
    id: String,
    dir: PathBuf,
}

impl JobDir {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Option<T> {
        let text = std::fs::read(self.path(name)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn meta(&self) -> JobResult<Meta> {
        self.read("meta.json").ok_or_else(|| {
            JobError::new(
                code::FAILED,
                format!("job {}: meta.json is missing or unreadable", self.id),
            )
        })
    }

    /// True while a spawner or supervisor holds the job's lock.
    fn alive(&self) -> bool {
        let Ok(f) = File::open(self.path("lock")) else {
            return false;
        };
        let f: OwnedFd = f.into();
        // SAFETY: flock on an fd we own; closing it drops the probe lock.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
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
    fn last_activity_ms(&self) -> u64 {
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

    fn status(&self) -> JobResult<JobStatus> {
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
                let r = &f.run;
                st.exit_code = r["exitCode"].as_i64().map(|c| c as i32);
                st.signal = r["signal"].as_i64().map(|c| c as i32);
                st.runtime_ms = r["durationMs"].as_u64().unwrap_or(st.runtime_ms);
                st.error = r["error"].as_str().map(str::to_string);
                if let Some(w) = r["warnings"].as_array() {
                    st.warnings = w
                        .iter()
                        .filter_map(|w| w.as_str().map(str::to_string))
                        .collect();
                }
                if let Some(d) = r.get("denial").filter(|d| d.is_object()) {
                    st.error = Some(format!(
                        "{}: {}",
                        d["rule"].as_str().unwrap_or(""),
                        d["reason"].as_str().unwrap_or("")
                    ));
                }
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

// ---- spawn ----

/// Checks the command exactly as `run` does and, when allowed, starts it
/// under a detached supervisor; returns once the command is running.
pub fn spawn(policy: &Policy, sreq: &SpawnRequest) -> JobResult<Spawned> {
    if policy.jobs.max_concurrent == 0 {
        let d = Denial::new(
            "jobs.disabled",
            "the policy allows no background jobs (jobs.max_concurrent = 0)",
            "use `agent-rsh run`, or raise jobs.max_concurrent in the policy",
        );
        return Err(JobError::from_result(&RunResult::denied(
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
    let plan = check::admit(&jpolicy, &req, sreq.workspace.as_deref())
        .map_err(|d| JobError::from_result(&RunResult::denied(req.display(), d)))?;
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
        return Err(JobError::from_result(&RunResult::denied(req.display(), d)));
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
) -> io::Result<(PathBuf, OwnedFd)> {
    std::fs::DirBuilder::new().mode(0o700).create(tmp)?;
    let lock = open_lock(&tmp.join("lock"))?;
    flock(&lock, libc::LOCK_EX)?;
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
        let p = std::ffi::CString::new(tmp.join(fifo).into_os_string().into_encoded_bytes())
            .map_err(io::Error::other)?;
        // SAFETY: mkfifo with a valid C string.
        if unsafe { libc::mkfifo(p.as_ptr(), 0o600) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let dir = root.join(id);
    std::fs::rename(tmp, &dir)?;
    Ok((dir, lock))
}

/// Writes a file whole or not at all (temp file, then rename).
fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    // No fsync: job state does not outlive a reboot (the jobs do not).
    f.write_all(data)?;
    std::fs::rename(&tmp, path)
}

// ---- queries ----

pub fn status(policy: &Policy, id: &str) -> JobResult<JobStatus> {
    StateDir::must_open(policy)?.job(id)?.status()
}

/// Every job, oldest first.
pub fn list(policy: &Policy) -> JobResult<Vec<JobStatus>> {
    let Some(state) = StateDir::open(policy, false)? else {
        return Ok(Vec::new());
    };
    Ok(state
        .jobs()
        .iter()
        .filter_map(|j| j.status().ok())
        .collect())
}

/// What `output` asks for.
#[derive(Debug, Clone)]
pub struct OutputQuery {
    pub stream: StreamSel,
    pub offset: u64,
    pub limit: usize,
    pub base64: bool,
    /// Keep ANSI escapes (otherwise stripped when the policy strips them).
    pub color: bool,
}

pub const DEFAULT_OUTPUT_LIMIT: usize = 64 * 1024;
pub const MAX_OUTPUT_LIMIT: usize = 16 << 20;

/// `output`'s answer: a contiguous piece of a stream.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputChunk {
    pub id: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<&'static str>,
    pub stream: StreamSel,
    /// Stream offset of `content`'s first byte: the requested offset, or
    /// the first stored byte after it when that part was elided.
    pub offset: u64,
    /// Where the next call should continue.
    pub next_offset: u64,
    /// Bytes the job has written to the stream so far.
    pub total_size: u64,
    /// More bytes are stored after `nextOffset`.
    pub has_more: bool,
    /// Part of the stream was elided on disk (over the cap).
    pub truncated: bool,
    /// The job is still running (more output may come).
    pub running: bool,
    #[serde(skip)]
    pub raw: Vec<u8>,
}

pub fn output(policy: &Policy, id: &str, q: &OutputQuery) -> JobResult<OutputChunk> {
    let job = StateDir::must_open(policy)?.job(id)?;
    read_output(&job, q)
}

fn read_output(job: &JobDir, q: &OutputQuery) -> JobResult<OutputChunk> {
    let meta = job.meta()?;
    // Alive is sampled before reading: output read after the job ended
    // is complete.
    let running = job.alive();
    let limit = q.limit.clamp(1, MAX_OUTPUT_LIMIT);
    let (view, start, mut bytes) = store::with_view(&job.dir, q.stream.file(), meta.layout, |v| {
        let (s, b) = v.read(q.offset, limit)?;
        Ok((v.clone(), s, b))
    })
    .map_err(|e| JobError::io(&format!("cannot read job {}'s output", job.id), e))?;
    // Do not split a UTF-8 sequence at the end of a page: the next call
    // starts at its first byte.
    let end = start + bytes.len() as u64;
    if !q.base64 && (end < view.total || running) {
        let keep = utf8_complete_prefix(&bytes);
        if keep > 0 {
            bytes.truncate(keep);
        }
    }
    let next = start + bytes.len() as u64;
    let shown = if meta.strip_ansi && !q.color {
        crate::result::strip_ansi(&bytes)
    } else {
        bytes.clone()
    };
    let (content, encoding) = if q.base64 {
        use base64::Engine as _;
        (
            base64::engine::general_purpose::STANDARD.encode(&shown),
            Some("base64"),
        )
    } else {
        match String::from_utf8(shown) {
            Ok(s) => (s, None),
            Err(e) => (
                String::from_utf8_lossy(e.as_bytes()).into_owned(),
                Some("utf-8-lossy"),
            ),
        }
    };
    let has_more = view.pieces.iter().any(|p| p.start + p.len > next);
    Ok(OutputChunk {
        id: job.id.clone(),
        content,
        encoding,
        stream: q.stream,
        offset: start,
        next_offset: next,
        total_size: view.total,
        has_more,
        truncated: view.truncated(),
        running,
        raw: bytes,
    })
}

/// Length of the longest prefix that does not end inside a UTF-8 sequence.
fn utf8_complete_prefix(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=n.min(3) {
        let c = b[n - back];
        if c & 0xC0 == 0x80 {
            continue;
        }
        let need = match c {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return n,
        };
        return if back < need { n - back } else { n };
    }
    n
}

/// Calls `each` with every new piece of output until the job ends.
pub fn follow(
    policy: &Policy,
    id: &str,
    q: &OutputQuery,
    mut each: impl FnMut(&OutputChunk) -> io::Result<()>,
) -> JobResult<JobStatus> {
    let job = StateDir::must_open(policy)?.job(id)?;
    let mut q = q.clone();
    let mut pause = Duration::from_millis(10);
    loop {
        let chunk = read_output(&job, &q)?;
        if !chunk.raw.is_empty() {
            each(&chunk).map_err(|e| JobError::io("cannot write the output", e))?;
            pause = Duration::from_millis(10);
        }
        q.offset = chunk.next_offset;
        if chunk.has_more {
            continue;
        }
        if !chunk.running {
            return job.status();
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

pub fn grep(policy: &Policy, id: &str, q: &GrepQuery) -> JobResult<GrepResult> {
    let job = StateDir::must_open(policy)?.job(id)?;
    let meta = job.meta()?;
    let running = job.alive();
    grep::grep(&job.dir, &job.id, &meta, running, q)
}

// ---- send, kill, wait ----

/// `send`'s answer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    pub id: String,
    pub bytes: usize,
    pub eof: bool,
}

/// Writes `data` to the job's stdin (waiting at most `timeout` for the job
/// to read it) and with `eof` closes it.
pub fn send(
    policy: &Policy,
    id: &str,
    data: &[u8],
    eof: bool,
    timeout: Duration,
) -> JobResult<Sent> {
    let job = StateDir::must_open(policy)?.job(id)?;
    if job.path("stdin.closed").exists() {
        return Err(JobError::new(
            code::FAILED,
            format!("job {id}'s stdin was closed (send --eof); nothing was sent"),
        ));
    }
    if !job.alive() {
        return Err(JobError::new(
            code::FAILED,
            format!("job {id} is not running; nothing was sent"),
        ));
    }
    let mut sent = 0;
    if !data.is_empty() {
        let fifo = open_fifo_writer(&job.path("stdin")).map_err(|e| {
            JobError::new(
                code::FAILED,
                format!(
                    "job {id} does not read its stdin ({}); nothing was sent",
                    if e.raw_os_error() == Some(libc::ENXIO) {
                        "it closed it or has not started".to_string()
                    } else {
                        e.to_string()
                    }
                ),
            )
        })?;
        sent = write_with_deadline(&fifo, data, Instant::now() + timeout);
        if sent < data.len() {
            return Err(JobError::new(
                code::FAILED,
                format!(
                    "job {id} did not read its stdin: {sent} of {} bytes were sent",
                    data.len()
                ),
            ));
        }
    }
    if eof {
        write_atomic(&job.path("stdin.closed"), b"")
            .map_err(|e| JobError::io("cannot mark stdin closed", e))?;
        control(&job, "eof")?;
    }
    Ok(Sent {
        id: id.to_string(),
        bytes: sent,
        eof,
    })
}

fn open_fifo_writer(path: &Path) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    let md = f.metadata()?;
    use std::os::unix::fs::FileTypeExt;
    if !md.file_type().is_fifo() {
        return Err(io::Error::other("not a FIFO"));
    }
    Ok(f.into())
}

fn write_with_deadline(fd: &OwnedFd, mut data: &[u8], deadline: Instant) -> usize {
    let mut sent = 0;
    while !data.is_empty() {
        // SAFETY: write from a live slice.
        let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        if n > 0 {
            sent += n as usize;
            data = &data[n as usize..];
            continue;
        }
        let e = io::Error::last_os_error().raw_os_error();
        if e == Some(libc::EINTR) {
            continue;
        }
        if e != Some(libc::EAGAIN) {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: poll on one pollfd.
        unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
    }
    sent
}

/// Sends one line to the supervisor's control FIFO.
fn control(job: &JobDir, line: &str) -> JobResult<()> {
    let fifo = open_fifo_writer(&job.path("control")).map_err(|e| {
        JobError::new(
            code::FAILED,
            format!("job {}'s supervisor is gone ({e})", job.id),
        )
    })?;
    let msg = format!("{line}\n");
    if write_with_deadline(
        &fifo,
        msg.as_bytes(),
        Instant::now() + Duration::from_secs(5),
    ) < msg.len()
    {
        return Err(JobError::new(
            code::FAILED,
            format!("job {}'s supervisor does not answer", job.id),
        ));
    }
    Ok(())
}

/// The signals `kill` accepts.
pub fn parse_signal(name: &str) -> Option<i32> {
    match name.trim_start_matches("SIG").to_ascii_uppercase().as_str() {
        "TERM" | "15" => Some(libc::SIGTERM),
        "KILL" | "9" => Some(libc::SIGKILL),
        "INT" | "2" => Some(libc::SIGINT),
        _ => None,
    }
}

/// Signals the job's whole tree (TERM, INT: then, after the grace period,
/// TERM and KILL; KILL at once) and waits for it to end.
pub fn kill(policy: &Policy, id: &str, signal: i32) -> JobResult<JobStatus> {
    let job = StateDir::must_open(policy)?.job(id)?;
    if !job.alive() {
        return job.status();
    }
    let meta = job.meta()?;
    match control(&job, &format!("kill {signal}")) {
        Ok(()) => {}
        // It ended between the check and the write.
        Err(_) if !job.alive() => return job.status(),
        Err(e) => return Err(e),
    }
    let limit = Duration::from_millis(meta.grace_ms.saturating_mul(3)) + Duration::from_secs(10);
    wait_dir(&job, Some(limit))
}

/// Waits for the job to end (at most `timeout`); returns its status, which
/// is still `running` when the timeout passed first.
pub fn wait(policy: &Policy, id: &str, timeout: Option<Duration>) -> JobResult<JobStatus> {
    let job = StateDir::must_open(policy)?.job(id)?;
    wait_dir(&job, timeout)
}

fn wait_dir(job: &JobDir, timeout: Option<Duration>) -> JobResult<JobStatus> {
    let until = timeout.map(|t| Instant::now() + t);
    let mut pause = Duration::from_millis(5);
    while job.alive() {
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            break;
        }
        let nap = until.map_or(pause, |u| pause.min(u - now));
        std::thread::sleep(nap);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    job.status()
}

// ---- gc ----

/// `jobs --gc`'s answer.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GcReport {
    /// Finished jobs whose state was removed.
    pub removed_jobs: Vec<String>,
    /// Workspaces removed: of lost jobs, and left by crashed runs.
    pub removed_workspaces: Vec<String>,
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
                    && flock(&l, libc::LOCK_EX | libc::LOCK_NB).is_ok()
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
    let Ok(f) = File::open(dir) else {
        return true;
    };
    let f: OwnedFd = f.into();
    // SAFETY: flock on an fd we own; closing it drops the probe lock.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
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

/// Reads all of `fd` (a pipe) into memory, at most `max` bytes.
fn read_all_fd(fd: OwnedFd, max: u64) -> io::Result<Vec<u8>> {
    let mut f = File::from(fd);
    let mut buf = Vec::new();
    (&mut f).take(max).read_to_end(&mut buf)?;
    Ok(buf)
}

/// An fd from its number, for fds handed over across exec.
///
/// # Safety
/// `fd` must be open and owned by nobody else in this process.
unsafe fn owned(fd: i32) -> OwnedFd {
    // SAFETY: the caller's promise.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_prefix_never_splits_a_sequence() {
        assert_eq!(utf8_complete_prefix(b"abc"), 3);
        assert_eq!(utf8_complete_prefix("aé".as_bytes()), 3);
        assert_eq!(utf8_complete_prefix(&"aé".as_bytes()[..2]), 1);
        assert_eq!(utf8_complete_prefix(&"a€".as_bytes()[..3]), 1);
        assert_eq!(utf8_complete_prefix(&"a😀".as_bytes()[..4]), 1);
        assert_eq!(utf8_complete_prefix("a😀".as_bytes()), 5);
        assert_eq!(utf8_complete_prefix(b"\xff\xfe"), 2);
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("TERM"), Some(libc::SIGTERM));
        assert_eq!(parse_signal("SIGKILL"), Some(libc::SIGKILL));
        assert_eq!(parse_signal("int"), Some(libc::SIGINT));
        assert_eq!(parse_signal("HUP"), None);
    }

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
