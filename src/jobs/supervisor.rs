//! The detached supervisor: agent-rsh re-executed as `__supervise`, in its
//! own session, owning one job.
//!
//! `launch` (in the spawning process) starts `/proc/self/exe __supervise`
//! with the spec on stdin, a readiness pipe on fd 3 and the job's locked
//! lock file on fd 4. The new process forks at once and the parent exits,
//! so a long-lived spawner (the MCP server) reaps it and never collects
//! zombies; the child calls `setsid` and runs the job through the one door,
//! `engine::execute`, with a sink that writes the output files. It reports
//! on fd 3 once the command really runs (or why it could not start), keeps
//! the lock until the result is written, and exits.
//!
//! The run's guardian has a parent-death signal and a lifeline pipe to the
//! supervisor: a supervisor killed with SIGKILL takes the job's tree down,
//! and its lock is released without a result, which `status` reports as
//! `lost`.

use super::error::{JobError, JobResult};
use super::state::{Final, Started, State, SupervisorInfo, now_ms, write_atomic};
use super::store::{Layout, StreamWriter, newlines};
use crate::admit::Request;
use crate::engine::{self, RunOptions};
use crate::exec::Sink;
use crate::plan::StdinMode;
use crate::policy::Policy;
use crate::result::{Encoding, RunResult, Status, Stream, code};
use crate::sys::pipe;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Everything the supervisor needs, sent over its stdin (never read from
/// a file a job could have written).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Spec {
    pub id: String,
    pub dir: PathBuf,
    pub policy: Policy,
    /// The file the policy was read from (`Policy::origin` is not part of
    /// its serialized form), so the supervisor's verdict checks its reach
    /// as the spawner's did.
    pub origin: Option<PathBuf>,
    /// The request as spawn admitted it; its stdin becomes the job's FIFO.
    pub request: Request,
    pub workspace: Option<PathBuf>,
    pub keep: bool,
    pub layout: Layout,
}

/// The supervisor's first and only word on the readiness pipe.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadyMsg {
    ok: bool,
    #[serde(default)]
    pid: i32,
    #[serde(default)]
    supervisor_pid: i32,
    #[serde(default)]
    workspace: String,
    #[serde(default)]
    result: Option<Box<RunResult>>,
}

pub(super) struct Ready {
    pub pid: i32,
    pub supervisor_pid: i32,
    pub workspace: String,
}

/// How long spawn waits for the supervisor to start the command.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts the supervisor and waits until it reports.
pub(super) fn launch(spec: &Spec, lock: &File) -> JobResult<Ready> {
    let io_err = |e: io::Error| JobError::io("cannot start the job's supervisor", e);
    let (ready_r, ready_w) = pipe().map_err(io_err)?;
    let payload =
        serde_json::to_vec(spec).map_err(|e| JobError::io("spec", io::Error::other(e)))?;
    let (rw, lk) = (ready_w.as_raw_fd(), lock.as_raw_fd());
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(super::SUPERVISE)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Copies above 9 first, so neither target clobbers the other.
            let a = libc::fcntl(rw, libc::F_DUPFD_CLOEXEC, 10);
            let b = libc::fcntl(lk, libc::F_DUPFD_CLOEXEC, 10);
            if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        let _ = std::fs::remove_dir_all(&spec.dir);
        io_err(e)
    })?;
    drop(ready_w);
    if let Some(mut stdin) = child.stdin.take() {
        // A supervisor that died early closes the pipe; its readiness EOF
        // below says so.
        let _ = stdin.write_all(&payload);
    }
    // The intermediate process exits at once after forking the supervisor.
    let _ = child.wait();
    let line = read_line_with_timeout(&ready_r, START_TIMEOUT).map_err(io_err)?;
    let msg: ReadyMsg = match serde_json::from_slice(&line) {
        Ok(m) => m,
        Err(_) => {
            let _ = std::fs::remove_dir_all(&spec.dir);
            return Err(JobError::new(
                code::FAILED,
                if line.is_empty() {
                    "the job's supervisor exited before starting the command".to_string()
                } else {
                    "the job's supervisor sent an unreadable report".to_string()
                },
            ));
        }
    };
    if !msg.ok {
        // Nothing ran: the job never existed.
        let _ = std::fs::remove_dir_all(&spec.dir);
        return Err(match msg.result {
            Some(r) => JobError::from_result(*r),
            None => JobError::new(code::FAILED, "the command could not be started"),
        });
    }
    Ok(Ready {
        pid: msg.pid,
        supervisor_pid: msg.supervisor_pid,
        workspace: msg.workspace,
    })
}

fn read_line_with_timeout(fd: &OwnedFd, timeout: Duration) -> io::Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no report within 30 s",
            ));
        }
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis() as i32) };
        if n <= 0 {
            continue;
        }
        // SAFETY: read into a stack buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n as usize]);
        if out.contains(&b'\n') || out.len() > 1 << 20 {
            return Ok(out);
        }
    }
}

// ---- the supervisor process ----

/// Entry of `agent-rsh __supervise`: fd 0 the spec, fd 3 the readiness
/// pipe, fd 4 the job's locked lock file.
pub fn supervise_main() -> i32 {
    // SAFETY: fork in a process that has one thread (just exec'd); the
    // parent exits at once without touching anything.
    match unsafe { libc::fork() } {
        -1 => return code::FAILED,
        0 => {}
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: plain system calls; fds 3 and 4 were handed to us by launch.
    let (ready, lock) = unsafe {
        libc::setsid();
        libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 0);
        libc::umask(0o077);
        libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(4, libc::F_SETFD, libc::FD_CLOEXEC);
        (File::from(owned(3)), owned(4))
    };
    // SAFETY: fd 0 is the spec pipe, ours alone.
    let spec = read_all_fd(unsafe { owned(0) }, 64 << 20);
    // Fd 0 is /dev/null from now on (the lowest free fd).
    let _ = std::fs::File::open("/dev/null").map(|f| std::mem::forget(OwnedFd::from(f)));
    let _ = std::env::set_current_dir("/");
    let spec: Spec = match spec.ok().and_then(|s| serde_json::from_slice(&s).ok()) {
        Some(s) => s,
        None => return code::FAILED,
    };
    let r = supervise(spec, ready);
    drop(lock);
    r
}

/// What the control thread and the sink share.
struct Shared {
    /// A pidfd of the run's guardian, once it exists (never a bare pid:
    /// the number could be reused after the guardian is reaped).
    guardian: Mutex<Option<(i32, OwnedFd)>>,
    killed: AtomicBool,
    /// The signal `kill` asked for (reported as the job's signal).
    kill_signal: std::sync::atomic::AtomicI32,
    /// The supervisor's write end of the stdin FIFO: while it is open the
    /// child never sees end of file; `send --eof` closes it.
    stdin_holder: Mutex<Option<OwnedFd>>,
    /// Writing a byte here stops the run (exec's cancel fd).
    cancel: OwnedFd,
    grace: Duration,
}

impl Shared {
    fn cancel(&self) {
        let _ = crate::sys::write_all(&self.cancel, &[1]);
    }

    fn signal_guardian(&self, sig: i32) -> bool {
        let g = self.guardian.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, pidfd)) = g.as_ref() else {
            return false;
        };
        // SAFETY: pidfd_send_signal on a pidfd we own.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            ) == 0
        }
    }

    fn guardian_pid(&self) -> Option<i32> {
        self.guardian
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(p, _)| *p)
    }

    fn kill(&self, sig: i32) {
        self.kill_signal.store(sig, Ordering::SeqCst);
        self.killed.store(true, Ordering::SeqCst);
        match sig {
            libc::SIGINT => {
                // Forwarded into the tree by the guardian; if the tree is
                // still there after the grace period, stop it as TERM does.
                self.signal_guardian(libc::SIGINT);
                std::thread::sleep(self.grace);
                self.cancel();
            }
            libc::SIGKILL => {
                // The guardian is PID 1 of the job's namespace: its death
                // kills everything in it. Without a namespace, the cancel
                // path kills the process group.
                if self.guardian_pid().is_some_and(own_pid_namespace) {
                    self.signal_guardian(libc::SIGKILL);
                }
                self.cancel();
            }
            _ => self.cancel(),
        }
    }
}

/// True when `pid` is PID 1 of a PID namespace below ours.
fn own_pid_namespace(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("NSpid:").map(|r| {
                    r.split_whitespace().last() == Some("1") && r.split_whitespace().count() > 1
                })
            })
        })
        .unwrap_or(false)
}

fn control_loop(fd: OwnedFd, shared: Arc<Shared>) {
    let mut f = File::from(fd);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        let n = match f.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line[..nl]).into_owned();
            match line.split_once(' ') {
                None if line == "eof" => {
                    shared
                        .stdin_holder
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                }
                Some(("kill", sig)) => {
                    if let Ok(sig) = sig.parse::<i32>()
                        && [libc::SIGTERM, libc::SIGINT, libc::SIGKILL].contains(&sig)
                    {
                        shared.kill(sig);
                    }
                }
                _ => {}
            }
        }
        if buf.len() > 4096 {
            buf.clear();
        }
    }
}

/// The job's three output streams, shared by the sink and the flusher.
struct Streams {
    stdout: StreamWriter,
    stderr: StreamWriter,
    both: StreamWriter,
    /// The run ended: the flusher stops.
    done: bool,
}

impl Streams {
    fn all(&self) -> [&StreamWriter; 3] {
        [&self.stdout, &self.stderr, &self.both]
    }

    fn flush(&mut self) {
        self.stdout.flush();
        self.stderr.flush();
        self.both.flush();
    }

    /// Everything pending, flood or not: the run ended.
    fn flush_now(&mut self) {
        self.stdout.flush_now();
        self.stderr.flush_now();
        self.both.flush_now();
    }
}

/// How often the tail gathered in memory is written out while the job
/// runs: readers see output at most this late.
const FLUSH_EVERY: Duration = Duration::from_millis(25);

/// Writes the streams' pending tails every `FLUSH_EVERY` until the run ends.
fn flusher(streams: Arc<(Mutex<Streams>, std::sync::Condvar)>) {
    let (lock, cv) = &*streams;
    let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
    while !s.done {
        s.flush();
        s = cv
            .wait_timeout(s, FLUSH_EVERY)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Writes the job's output and reports readiness once the command runs.
struct JobSink {
    dir: PathBuf,
    streams: Arc<(Mutex<Streams>, std::sync::Condvar)>,
    ready: Option<File>,
    stdin_read: Option<OwnedFd>,
    shared: Arc<Shared>,
    workspace: String,
}

impl Sink for JobSink {
    fn started(&mut self, pid: i32, _argv: &[String], _cwd: &Path) {
        // SAFETY: pidfd_open on our own child (not yet reaped).
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if pidfd >= 0 {
            // SAFETY: a new fd we own.
            let fd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
            *self
                .shared
                .guardian
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some((pid, fd));
        }
        let started = Started {
            pid,
            started_at_ms: now_ms(),
        };
        let _ = write_atomic(
            &self.dir.join("started.json"),
            &serde_json::to_vec(&started).unwrap_or_default(),
        );
        // The run's relay has its own copy; ours would keep the FIFO
        // readable after the relay let it go (the command closed its
        // stdin), and `send` would not learn that nobody reads.
        self.stdin_read = None;
        if let Some(mut ready) = self.ready.take() {
            let msg = ReadyMsg {
                ok: true,
                pid,
                // SAFETY: getpid has no memory effects.
                supervisor_pid: unsafe { libc::getpid() },
                workspace: self.workspace.clone(),
                result: None,
            };
            let mut line = serde_json::to_vec(&msg).unwrap_or_default();
            line.push(b'\n');
            let _ = ready.write_all(&line);
        }
    }

    fn output(&mut self, stream: Stream, data: &[u8]) {
        // Counted once here, not by each of the two streams it goes to.
        let lines = newlines(data);
        let mut s = self.streams.0.lock().unwrap_or_else(|e| e.into_inner());
        match stream {
            Stream::Stdout => s.stdout.push_counted(data, lines),
            Stream::Stderr => s.stderr.push_counted(data, lines),
        }
        s.both.push_counted(data, lines);
    }
}

fn open_fifo(path: &Path, flags: i32) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(flags & libc::O_ACCMODE != libc::O_WRONLY)
        .write(flags & libc::O_ACCMODE != libc::O_RDONLY)
        .custom_flags((flags & !libc::O_ACCMODE) | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    Ok(f.into())
}

fn fail_before_start(ready: File, r: &RunResult) -> i32 {
    report_failure(Some(ready), r);
    code::FAILED
}

fn report_failure(ready: Option<File>, r: &RunResult) {
    if let Some(mut ready) = ready {
        let msg = ReadyMsg {
            ok: false,
            pid: 0,
            supervisor_pid: 0,
            workspace: String::new(),
            result: Some(Box::new(r.clone())),
        };
        let mut line = serde_json::to_vec(&msg).unwrap_or_default();
        line.push(b'\n');
        let _ = ready.write_all(&line);
    }
}

fn supervise(mut spec: Spec, ready: File) -> i32 {
    spec.policy.origin = spec.origin.take();
    let display = spec.request.display();
    let fail = |ready, e: String| fail_before_start(ready, &RunResult::failed(display.clone(), e));

    let (workspace, fresh) = match &spec.workspace {
        Some(w) => (w.clone(), false),
        None => match crate::workspace::Workspace::fresh(spec.policy.workspace.parent.as_deref()) {
            Ok(mut w) => (w.keep(), true),
            Err(e) => return fail(ready, format!("cannot create the workspace: {e}")),
        },
    };
    let remove_after = fresh && !spec.keep;
    let info = SupervisorInfo {
        // SAFETY: getpid has no memory effects.
        supervisor_pid: unsafe { libc::getpid() },
        workspace: workspace.clone(),
        fresh_workspace: remove_after,
    };
    if let Err(e) = write_atomic(
        &spec.dir.join("supervisor.json"),
        &serde_json::to_vec(&info).unwrap_or_default(),
    ) {
        if remove_after {
            let _ = std::fs::remove_dir_all(&workspace);
        }
        return fail(ready, format!("cannot write the job's state: {e}"));
    }

    let fifo = spec.dir.join("stdin");
    let opened = (|| -> io::Result<(OwnedFd, OwnedFd, OwnedFd, OwnedFd, OwnedFd)> {
        // Non-blocking: the run relays it into the command's stdin pipe
        // from its poll loop. The command never gets the FIFO itself (it
        // could change the FIFO's mode and times through it).
        let stdin_read = open_fifo(&fifo, libc::O_RDONLY | libc::O_NONBLOCK)?;
        let holder = open_fifo(&fifo, libc::O_WRONLY)?;
        // Read-write, so the FIFO never reports end of file to us.
        let control = open_fifo(&spec.dir.join("control"), libc::O_RDWR)?;
        let (cancel_r, cancel_w) = pipe()?;
        Ok((stdin_read, holder, control, cancel_r, cancel_w))
    })();
    let (stdin_read, holder, control, cancel_r, cancel_w) = match opened {
        Ok(v) => v,
        Err(e) => {
            if remove_after {
                let _ = std::fs::remove_dir_all(&workspace);
            }
            return fail(ready, format!("cannot open the job's FIFOs: {e}"));
        }
    };
    let shared = Arc::new(Shared {
        guardian: Mutex::new(None),
        killed: AtomicBool::new(false),
        kill_signal: std::sync::atomic::AtomicI32::new(0),
        stdin_holder: Mutex::new(Some(holder)),
        cancel: cancel_w,
        grace: Duration::from_millis(spec.policy.limits.kill_grace_ms),
    });
    {
        let shared = shared.clone();
        std::thread::spawn(move || control_loop(control, shared));
    }
    let req = Request {
        stdin: StdinMode::Fd(stdin_read.as_raw_fd()),
        ..spec.request.clone()
    };
    let opts = RunOptions {
        capture: false,
        encoding: Encoding::Text,
        color: false,
        workspace: Some(workspace.clone()),
        keep: true,
        cancel: Some(cancel_r.as_raw_fd()),
        max_output: None,
        verbose: false,
    };
    let streams = Arc::new((
        Mutex::new(Streams {
            stdout: StreamWriter::new(&spec.dir, "stdout", spec.layout),
            stderr: StreamWriter::new(&spec.dir, "stderr", spec.layout),
            both: StreamWriter::new(&spec.dir, "both", spec.layout),
            done: false,
        }),
        std::sync::Condvar::new(),
    ));
    let flush_thread = {
        let streams = streams.clone();
        std::thread::spawn(move || flusher(streams))
    };
    let mut sink = JobSink {
        dir: spec.dir.clone(),
        streams: streams.clone(),
        ready: Some(ready),
        stdin_read: Some(stdin_read),
        shared: shared.clone(),
        workspace: workspace.display().to_string(),
    };
    if let Err(e) = crate::exec::install_signal_forwarding() {
        let ready = sink.ready.take().expect("not started yet");
        return fail(ready, format!("cannot install signal handlers: {e}"));
    }
    let mut r = engine::execute(&spec.policy, &req, &opts, &mut sink);
    {
        let mut s = streams.0.lock().unwrap_or_else(|e| e.into_inner());
        s.done = true;
        s.flush_now();
        streams.1.notify_all();
    }
    let _ = flush_thread.join();
    let streams = streams.0.lock().unwrap_or_else(|e| e.into_inner());
    shared
        .stdin_holder
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if remove_after {
        let _ = std::fs::remove_dir_all(&workspace);
        r.workspace = None;
    }
    if let Some(ready) = sink.ready.take() {
        // The command never ran: spawn reports why and removes the job.
        report_failure(Some(ready), &r);
        return 0;
    }
    for w in streams.all() {
        if let Some(e) = &w.error {
            r.warnings
                .push(format!("output could not be stored completely: {e}"));
            break;
        }
    }
    // The output is in the job's files, not in the result.
    r.stdout.clear();
    r.stderr.clear();
    r.stdout_bytes = streams.stdout.total();
    r.stderr_bytes = streams.stderr.total();
    r.truncated = streams.all().iter().any(|w| w.total() > spec.layout.cap);
    let killed = shared.killed.load(Ordering::SeqCst);
    let status = match r.status {
        Status::TimedOut => State::TimedOut,
        _ if killed => State::Killed,
        Status::Exited => State::Exited,
        Status::Signaled => State::Signaled,
        Status::Interrupted => State::Killed,
        Status::Denied => State::Denied,
        Status::NotFound => State::NotFound,
        Status::Failed => State::Failed,
    };
    if status == State::Killed {
        let asked = shared.kill_signal.load(Ordering::SeqCst);
        r.signal = Some(if asked > 0 {
            asked
        } else {
            r.signal.unwrap_or(libc::SIGTERM)
        });
    }
    let fin = Final {
        status,
        ended_at_ms: now_ms(),
        run: r,
    };
    let _ = write_atomic(
        &spec.dir.join("result.json"),
        &serde_json::to_vec(&fin).unwrap_or_default(),
    );
    0
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
