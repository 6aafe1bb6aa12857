//! Spawning, the poll pump, the deadline and the tree kill.
//!
//! Process layout of a run:
//!
//! ```text
//! agent-rsh (P) ── guardian (G) ── command (H) ── its descendants
//! ```
//!
//! G is created with `clone(CLONE_NEWPID)` when the kernel allows it, so it
//! is PID 1 of a fresh PID namespace: when G exits, the kernel kills every
//! process left in the namespace, including ones that called `setsid` or
//! double-forked. G has a parent-death signal (SIGKILL) and a lifeline pipe,
//! so killing P kills G and with it the tree. G reaps, forwards signals
//! into the namespace, and reports H's wait status to P over a pipe.
//!
//! A caller without CAP_SYS_ADMIN cannot create a PID namespace alone: G is
//! then created with `clone(CLONE_NEWUSER | CLONE_NEWPID)`, maps the
//! caller's uid and gid 1:1, and drops the capabilities the new user
//! namespace gave it before it forks H (see `confine::userns`).
//!
//! Without a PID namespace (confinement off, or a kernel that refuses it in
//! best-effort mode) G is a child subreaper and kills H's process group;
//! a descendant that leaves the group can then outlive the run, and the
//! RunResult's `confinement.pidNamespace` says so.
//!
//! After `clone` the children make raw system calls only: no allocation, no
//! locks, so a multi-threaded parent cannot deadlock them.

use crate::confine::{Confinement, Stage, errno};
use crate::plan::{Plan, StdinMode};
use crate::result::{Capture, Status, Stream};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Receives the run's live events.
pub trait Sink {
    /// The command was started: the guardian's pid (the process agent-rsh
    /// signals), the argv and the absolute cwd.
    fn started(&mut self, _pid: i32, _argv: &[String], _cwd: &Path) {}
    /// A chunk of output, as it arrived.
    fn output(&mut self, stream: Stream, data: &[u8]);
}

/// How a run ended, before rendering.
pub struct Outcome {
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration: Duration,
    pub stdout: Capture,
    pub stderr: Capture,
    pub warnings: Vec<String>,
    /// Set when exec failed in the child: where, and errno.
    pub exec_error: Option<(Stage, i32)>,
}

/// The signals agent-rsh forwards to the tree and reports as `interrupted`.
pub const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A self-pipe that receives forwarded signals as bytes (the signal number).
struct Interrupts {
    read: OwnedFd,
}

fn interrupts() -> io::Result<&'static Interrupts> {
    static CELL: OnceLock<Result<Interrupts, i32>> = OnceLock::new();
    let r = CELL.get_or_init(|| {
        let (r, w) =
            pipe(libc::O_CLOEXEC | libc::O_NONBLOCK).map_err(|e| e.raw_os_error().unwrap_or(0))?;
        let wfd = w.as_raw_fd();
        std::mem::forget(w);
        for sig in FORWARDED {
            // SAFETY: the handler only calls write(2), which is
            // async-signal-safe; the fd lives for the whole process.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    let b = sig as u8;
                    libc::write(wfd, (&b as *const u8).cast(), 1);
                })
            }
            .map_err(|e| e.raw_os_error().unwrap_or(0))?;
        }
        Ok(Interrupts { read: r })
    });
    r.as_ref().map_err(|e| io::Error::from_raw_os_error(*e))
}

/// Installs the forwarding handlers now (so a signal that arrives before
/// the child starts is not lost).
pub fn install_signal_forwarding() -> io::Result<()> {
    interrupts().map(|_| ())
}

/// Empties the forwarding pipe and returns the last signal in it, if any.
/// A face that runs several commands (the interactive shell) calls this
/// between runs, so a signal that arrived after one run ended does not
/// interrupt the next.
pub fn take_pending_signal() -> io::Result<Option<i32>> {
    let ints = interrupts()?;
    let mut last = None;
    let mut b = [0u8; 64];
    loop {
        // SAFETY: read into a stack buffer from our non-blocking pipe.
        let n = unsafe { libc::read(ints.read.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
        if n <= 0 {
            return Ok(last);
        }
        last = Some(b[n as usize - 1] as i32);
    }
}

fn pipe(flags: i32) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are new and owned by nobody else.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

fn cstring(s: &[u8], what: &str) -> io::Result<CString> {
    CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} contains NUL")))
}

/// Everything the children need, built before clone.
struct ChildSpec {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    exec_err: RawFd,
    status: RawFd,
    lifeline: RawFd,
    new_pgrp: bool,
    pid_ns: bool,
    /// Build the mount view (the guardian is cloned with CLONE_NEWNS).
    view: bool,
    mask: libc::sigset_t,
    /// Open `cgroup.procs` files of the run's cgroup (one per hierarchy:
    /// v1's memory and pids `tasks`), written by the guardian before
    /// anything else.
    cgroup: [RawFd; 2],
    cgroup_n: usize,
    /// Kept open across exec (`Plan::pass_fd`), or -1.
    pass_fd: RawFd,
}

const MSG_PID: u8 = b'P';

/// Signals whose disposition the command gets reset to default.
const RESET_SIGNALS: [i32; 14] = [
    libc::SIGPIPE,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCHLD,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGXFSZ,
    libc::SIGXCPU,
];
const MSG_STATUS: u8 = b'S';

/// Runs a checked plan in `cwd` (absolute, inside the workspace) with
/// environment `envp`, streaming output into `sink`. `capture` keeps the
/// bounded head and tail of each stream for the RunResult. When `cancel`
/// (an fd the caller owns) becomes readable, the run is stopped as if
/// agent-rsh had received SIGTERM.
pub fn run(
    plan: &Plan,
    cwd: &Path,
    envp: &[(String, String)],
    confinement: &mut Confinement,
    sink: &mut dyn Sink,
    capture: bool,
    cancel: Option<RawFd>,
) -> io::Result<Outcome> {
    let ints = interrupts()?;
    let started = Instant::now();

    let program = cstring(plan.program.as_os_str().as_bytes(), "program path")?;
    let argv_c: Vec<CString> = plan
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes(), "argument"))
        .collect::<io::Result<_>>()?;
    let envp_c: Vec<CString> = envp
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}").as_bytes(), "environment"))
        .collect::<io::Result<_>>()?;
    let cwd_c = cstring(cwd.as_os_str().as_bytes(), "cwd")?;

    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envv: Vec<*const libc::c_char> = envp_c.iter().map(|c| c.as_ptr()).collect();
    envv.push(std::ptr::null());

    // SAFETY: sigset manipulation on a local value.
    let mask = unsafe {
        let mut m: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut m);
        for s in
            FORWARDED
                .iter()
                .chain(&[libc::SIGCHLD, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2])
        {
            libc::sigaddset(&mut m, *s);
        }
        m
    };

    // A mount view that cannot be built (a /proc the kernel will not mount
    // again, say) is given up and the guardian started again without it:
    // nothing of the command has run yet, and the seccomp filter then holds
    // the metadata and socket guarantees instead.
    let started_run = loop {
        let s = start(
            plan,
            confinement,
            ChildSpecParts {
                program: &program,
                argv: &argv,
                envp: &envv,
                cwd: &cwd_c,
                mask,
            },
        )?;
        if let Some((Stage::MountView, e)) = s.exec_error
            && confinement.give_up_view(&format!(
                "building it failed: {}",
                io::Error::from_raw_os_error(e)
            ))
        {
            reap(s.guardian);
            continue;
        }
        // The guardian could not join the run's cgroup: run without it
        // where another mechanism holds the bounds (else the error stands).
        // Reaped first: a zombie still counts as inside, and the cgroup is
        // removed when given up.
        if let Some((Stage::Cgroup, e)) = s.exec_error
            && confinement.may_run_without_cgroup()
        {
            reap(s.guardian);
            confinement.give_up_cgroup(&io::Error::from_raw_os_error(e).to_string());
            continue;
        }
        break s;
    };
    let Started {
        guardian,
        pid_ns,
        out_r,
        err_r,
        status_r,
        _lifeline_w,
        mut stdin_writer,
        exec_error,
    } = started_run;
    confinement.record_setup(pid_ns);
    // SAFETY: pidfd_open on our own child.
    let pidfd_raw = unsafe { libc::syscall(libc::SYS_pidfd_open, guardian, 0) } as RawFd;
    if pidfd_raw < 0 {
        let e = io::Error::last_os_error();
        kill(guardian, libc::SIGKILL);
        reap(guardian);
        return Err(e);
    }
    // SAFETY: a new fd we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd_raw) };
    if exec_error.is_none() {
        sink.started(guardian, &plan.argv, cwd);
    }

    set_nonblocking(out_r.as_raw_fd());
    set_nonblocking(err_r.as_raw_fd());
    if let Some((w, _)) = &stdin_writer {
        set_nonblocking(w.as_raw_fd());
    }

    let mut pump = Pump {
        stdout: Capture::new(if capture { plan.output_cap } else { 0 }),
        stderr: Capture::new(if capture { plan.output_cap } else { 0 }),
        buf: vec![0u8; 64 * 1024],
    };
    let deadline = started + plan.timeout;
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut interrupted: Option<i32> = None;
    let mut child_status: Option<i32> = None;
    let mut child_pid: Option<i32> = None;
    let mut out_open = true;
    let mut err_open = true;
    let mut guardian_done = false;
    let mut status_open = true;
    let mut drain_until: Option<Instant> = None;
    let mut warnings = Vec::new();

    loop {
        let now = Instant::now();
        if !guardian_done && !timed_out && interrupted.is_none() && now >= deadline {
            timed_out = true;
            kill(guardian, libc::SIGTERM);
            kill_at = Some(now + plan.grace);
        }
        if !guardian_done
            && let Some(k) = kill_at
            && now >= k
        {
            kill(guardian, libc::SIGKILL);
            if !pid_ns && let Some(pid) = child_pid {
                kill(-pid, libc::SIGKILL);
            }
            kill_at = None;
        }
        if guardian_done && !out_open && !err_open {
            break;
        }
        if let Some(d) = drain_until
            && now >= d
        {
            warnings.push("a process outside the run's process group kept its output open; output after the command ended was not read".to_string());
            break;
        }

        let running = !guardian_done && !timed_out && interrupted.is_none();
        let wake = [running.then_some(deadline), kill_at, drain_until]
            .into_iter()
            .flatten()
            .min();
        let timeout_ms = wake.map_or(-1, |w| {
            let us = w.saturating_duration_since(Instant::now()).as_micros();
            us.div_ceil(1000).min(i32::MAX as u128) as i32
        });

        let mut fds = [
            pfd(out_r.as_raw_fd(), out_open),
            pfd(err_r.as_raw_fd(), err_open),
            pfd(ints.read.as_raw_fd(), true),
            pfd(pidfd.as_raw_fd(), !guardian_done),
            pfd(status_r.as_raw_fd(), !guardian_done && status_open),
            libc::pollfd {
                fd: stdin_writer.as_ref().map_or(-1, |(w, _)| w.as_raw_fd()),
                events: libc::POLLOUT,
                revents: 0,
            },
            pfd(
                cancel.unwrap_or(-1),
                !guardian_done && interrupted.is_none(),
            ),
        ];
        // SAFETY: poll on a stack array of pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            kill(guardian, libc::SIGKILL);
            reap(guardian);
            return Err(e);
        }
        if fds[0].revents != 0 {
            out_open = pump.read(out_r.as_raw_fd(), Stream::Stdout, sink);
        }
        if fds[1].revents != 0 {
            err_open = pump.read(err_r.as_raw_fd(), Stream::Stderr, sink);
        }
        if fds[6].revents != 0 && !guardian_done && interrupted.is_none() {
            interrupted = Some(libc::SIGTERM);
            kill(guardian, libc::SIGTERM);
            kill_at.get_or_insert(Instant::now() + plan.grace);
        }
        if fds[2].revents != 0 {
            let mut b = [0u8; 16];
            // SAFETY: read into a stack buffer.
            let n = unsafe { libc::read(ints.read.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
            if n > 0 && !guardian_done {
                let sig = b[n as usize - 1] as i32;
                interrupted.get_or_insert(sig);
                kill(guardian, sig);
                kill_at.get_or_insert(Instant::now() + plan.grace);
            }
        }
        if fds[4].revents != 0 {
            status_open = read_status(&status_r, &mut child_pid, &mut child_status);
        }
        if fds[5].revents != 0
            && let Some((w, rest)) = &mut stdin_writer
        {
            // SAFETY: write from a live slice.
            let n = unsafe {
                libc::write(
                    w.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len().min(64 * 1024),
                )
            };
            if n > 0 {
                *rest = &rest[n as usize..];
            }
            if n < 0 && errno() != libc::EAGAIN || rest.is_empty() {
                stdin_writer = None;
            }
        }
        if fds[3].revents != 0 && !guardian_done {
            reap(guardian);
            let _ = read_status(&status_r, &mut child_pid, &mut child_status);
            guardian_done = true;
            stdin_writer = None;
            // In a PID namespace every writer is dead now; otherwise a
            // daemon may hold the pipes, so drain for a bounded time.
            drain_until =
                Some(Instant::now() + Duration::from_millis(if pid_ns { 2000 } else { 200 }));
        }
    }

    // Every process of the run has ended (or is killed now): what its
    // cgroup counted becomes warnings, and the cgroup goes.
    warnings.extend(confinement.finish_cgroup());

    let (status, exit_code, signal) = match (interrupted, timed_out, child_status) {
        (Some(sig), _, st) => (Status::Interrupted, st.and_then(exit_of), Some(sig)),
        (None, true, st) => (
            Status::TimedOut,
            st.and_then(exit_of),
            st.and_then(signal_of).or(Some(libc::SIGKILL)),
        ),
        (None, false, Some(st)) => match (exit_of(st), signal_of(st)) {
            (Some(c), _) => (Status::Exited, Some(c), None),
            (None, s) => (Status::Signaled, None, s),
        },
        (None, false, None) => (Status::Failed, None, None),
    };
    if status == Status::Failed && exec_error.is_none() {
        warnings.push("the guardian process ended without reporting the command's status".into());
    }
    Ok(Outcome {
        status,
        exit_code,
        signal,
        timed_out,
        duration: started.elapsed(),
        stdout: pump.stdout,
        stderr: pump.stderr,
        warnings,
        exec_error,
    })
}

/// What `run` builds once and every start attempt shares.
struct ChildSpecParts<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CString,
    mask: libc::sigset_t,
}

/// A started guardian and the parent's ends of its pipes.
struct Started<'p> {
    guardian: i32,
    pid_ns: bool,
    out_r: OwnedFd,
    err_r: OwnedFd,
    status_r: OwnedFd,
    /// Held for the whole run; the guardian sees end of file on its end
    /// when agent-rsh dies.
    _lifeline_w: OwnedFd,
    stdin_writer: Option<(OwnedFd, &'p [u8])>,
    /// Set when the setup failed before the command's exec.
    exec_error: Option<(Stage, i32)>,
}

/// Makes the pipes, starts the guardian and waits for the command's exec
/// (or the setup's failure).
fn start<'p>(
    plan: &'p Plan,
    confinement: &mut Confinement,
    parts: ChildSpecParts,
) -> io::Result<Started<'p>> {
    let (out_r, out_w) = pipe(libc::O_CLOEXEC)?;
    let (err_r, err_w) = pipe(libc::O_CLOEXEC)?;
    let (xerr_r, xerr_w) = pipe(libc::O_CLOEXEC)?;
    let (status_r, status_w) = pipe(libc::O_CLOEXEC)?;
    let (life_r, lifeline_w) = pipe(libc::O_CLOEXEC)?;
    let mut stdin_writer: Option<(OwnedFd, &[u8])> = None;
    let stdin_child: Option<OwnedFd> = match &plan.stdin {
        StdinMode::Null => Some(std::fs::File::open("/dev/null")?.into()),
        StdinMode::Inherit => None,
        StdinMode::Data(bytes) => {
            let (r, w) = pipe(libc::O_CLOEXEC)?;
            stdin_writer = Some((w, bytes.as_slice()));
            Some(r)
        }
        StdinMode::Fd(fd) => {
            // SAFETY: F_DUPFD_CLOEXEC returns a new fd we own.
            let dup = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if dup < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a new fd, owned by nobody else.
            Some(unsafe { OwnedFd::from_raw_fd(dup) })
        }
    };
    let join = confinement.cgroup_join_fds();
    let mut cgroup = [-1; 2];
    let cgroup_n = join.len().min(cgroup.len());
    cgroup[..cgroup_n].copy_from_slice(&join[..cgroup_n]);
    let mut spec = ChildSpec {
        program: parts.program.as_ptr(),
        argv: parts.argv.as_ptr(),
        envp: parts.envp.as_ptr(),
        cwd: parts.cwd.as_ptr(),
        stdin: stdin_child.as_ref().map_or(-1, |f| f.as_raw_fd()),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        exec_err: xerr_w.as_raw_fd(),
        status: status_w.as_raw_fd(),
        lifeline: life_r.as_raw_fd(),
        // With the caller's terminal as stdin the child must stay in the
        // foreground process group, or reading the tty stops it.
        new_pgrp: plan.stdin != StdinMode::Inherit,
        pid_ns: confinement.want_pid_namespace,
        view: confinement.view().is_some(),
        mask: parts.mask,
        cgroup,
        cgroup_n,
        pass_fd: plan.pass_fd.unwrap_or(-1),
    };
    let guardian = spawn_guardian(&mut spec, confinement)?;
    drop((out_w, err_w, xerr_w, status_w, life_r, stdin_child));
    // Exec errors arrive before anything else; EOF means exec succeeded.
    let exec_error = read_exec_error(&xerr_r);
    Ok(Started {
        guardian,
        pid_ns: spec.pid_ns,
        out_r,
        err_r,
        status_r,
        _lifeline_w: lifeline_w,
        stdin_writer,
        exec_error,
    })
}

struct Pump {
    stdout: Capture,
    stderr: Capture,
    buf: Vec<u8>,
}

impl Pump {
    /// Reads what is available; returns false at end of file.
    fn read(&mut self, fd: RawFd, stream: Stream, sink: &mut dyn Sink) -> bool {
        loop {
            // SAFETY: read into our own buffer.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n > 0 {
                let data = &self.buf[..n as usize];
                match stream {
                    Stream::Stdout => self.stdout.push(data),
                    Stream::Stderr => self.stderr.push(data),
                }
                sink.output(stream, data);
                if (n as usize) < self.buf.len() {
                    return true;
                }
                continue;
            }
            if n == 0 {
                return false;
            }
            return matches!(errno(), libc::EAGAIN | libc::EINTR);
        }
    }
}

fn pfd(fd: RawFd, on: bool) -> libc::pollfd {
    libc::pollfd {
        fd: if on { fd } else { -1 },
        events: libc::POLLIN,
        revents: 0,
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    unsafe {
        libc::kill(pid, sig);
    }
}

fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: waitpid on our own child.
    while unsafe { libc::waitpid(pid, &mut st, 0) } < 0 && errno() == libc::EINTR {}
}

fn exit_of(st: i32) -> Option<i32> {
    libc::WIFEXITED(st).then(|| libc::WEXITSTATUS(st))
}

fn signal_of(st: i32) -> Option<i32> {
    libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st))
}

fn read_exec_error(fd: &OwnedFd) -> Option<(Stage, i32)> {
    let mut b = [0u8; 5];
    let mut got = 0;
    while got < b.len() {
        // SAFETY: read into a stack buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), b[got..].as_mut_ptr().cast(), b.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || errno() != libc::EINTR {
            break;
        }
    }
    (got == b.len()).then(|| {
        (
            Stage::from_u8(b[0]).unwrap_or(Stage::Exec),
            i32::from_ne_bytes([b[1], b[2], b[3], b[4]]),
        )
    })
}

/// Reads the guardian's 5-byte messages: the command's pid, then its status.
fn read_status(fd: &OwnedFd, pid: &mut Option<i32>, status: &mut Option<i32>) -> bool {
    set_nonblocking(fd.as_raw_fd());
    let mut b = [0u8; 5];
    loop {
        // SAFETY: read into a stack buffer; messages are 5 bytes, written
        // atomically (below PIPE_BUF).
        let n = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
        if n != 5 {
            return n != 0;
        }
        let v = i32::from_ne_bytes([b[1], b[2], b[3], b[4]]);
        match b[0] {
            MSG_PID => *pid = Some(v),
            MSG_STATUS => *status = Some(v),
            _ => {}
        }
    }
}

// ---- the children: raw system calls only below this line ----

fn raw_fork(flags: libc::c_ulong) -> libc::c_long {
    // SAFETY: clone without a new stack behaves like fork: the child
    // continues on a copy of the parent's stack.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags | libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    }
}

/// Starts the guardian with the most confinement the kernel grants:
/// PID and mount namespaces (with a user namespace for a caller without
/// CAP_SYS_ADMIN, and a network namespace when wanted), then without the
/// network namespace, then without the mount view, then without any
/// namespace. Each step down is recorded; every guarantee still holds by
/// another mechanism (seccomp refuses metadata changes and UNIX sockets
/// without the view; the guardian, a child subreaper, kills the whole tree
/// without the PID namespace).
fn spawn_guardian(spec: &mut ChildSpec, confinement: &mut Confinement) -> io::Result<i32> {
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: block the signals the guardian will wait for, so none is lost
    // between clone and its signalfd; restored below in the parent.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &spec.mask, &mut old) };
    let mut r;
    let mut first_err = 0;
    loop {
        r = try_clone(spec, confinement);
        if r >= 0 {
            break;
        }
        let e = errno();
        if first_err == 0 {
            first_err = e;
        }
        let why = format!(
            "the kernel refused a mount namespace: {}",
            io::Error::from_raw_os_error(e)
        );
        if confinement.give_up_extra_namespaces() {
            continue;
        }
        if spec.view && confinement.give_up_view(&why) {
            spec.view = false;
            continue;
        }
        if spec.pid_ns {
            spec.pid_ns = false;
            continue;
        }
        break;
    }
    // SAFETY: restore the parent's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if r < 0 {
        return Err(io::Error::from_raw_os_error(first_err));
    }
    if !spec.pid_ns && confinement.want_pid_namespace {
        let simulated =
            confinement.user_namespace().is_none() && confinement.needs_user_namespace();
        let why = if crate::confine::probe::kernel().simulated.contains(&"pidns") {
            format!("simulated by {}", crate::confine::probe::SIMULATE_ENV)
        } else if confinement.needs_user_namespace() {
            format!(
                "agent-rsh runs without CAP_SYS_ADMIN and {}",
                crate::confine::userns::blocker(simulated)
            )
        } else {
            format!(
                "the kernel refused it: {}",
                io::Error::from_raw_os_error(first_err)
            )
        };
        confinement.note_no_pid_namespace(&why);
    }
    Ok(r as i32)
}

fn try_clone(spec: &mut ChildSpec, confinement: &Confinement) -> libc::c_long {
    // The user namespace comes only with the PID namespace it is for; a
    // network namespace alone (best-effort fallback) is then refused and
    // given up as on any kernel that refuses it.
    let user_ns = if spec.pid_ns {
        confinement.user_namespace()
    } else {
        None
    };
    if spec.pid_ns && user_ns.is_none() && confinement.needs_user_namespace()
        || spec.pid_ns && crate::confine::probe::kernel().simulated.contains(&"pidns")
    {
        // The simulation seam took user (or PID) namespaces away.
        // SAFETY: setting errno for the caller to read.
        unsafe { *libc::__errno_location() = libc::EPERM };
        return -1;
    }
    let mut flags = confinement.extra_clone_flags();
    if spec.pid_ns {
        flags |= libc::CLONE_NEWPID as libc::c_ulong;
    }
    if spec.view && (spec.pid_ns || user_ns.is_none() && !confinement.needs_user_namespace()) {
        flags |= libc::CLONE_NEWNS as libc::c_ulong;
    } else {
        spec.view = false;
    }
    if user_ns.is_some() {
        flags |= libc::CLONE_NEWUSER as libc::c_ulong;
    }
    let r = raw_fork(flags);
    if r == 0 {
        guardian_main(spec, confinement, user_ns);
    }
    r
}

fn write_msg(fd: RawFd, tag: u8, v: i32) {
    let v = v.to_ne_bytes();
    let b = [tag, v[0], v[1], v[2], v[3]];
    // SAFETY: write from a stack buffer.
    unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
}

/// Closes every fd above 2 except those in `keep` (sorted ascending).
fn close_except(keep: &[RawFd]) {
    let mut from: u32 = 3;
    for &k in keep {
        let k = k as u32;
        if k >= from {
            if k > from {
                // SAFETY: close_range has no memory effects.
                unsafe { libc::syscall(libc::SYS_close_range, from, k - 1, 0) };
            }
            from = k + 1;
        }
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) };
}

fn guardian_main(
    spec: &ChildSpec,
    confinement: &Confinement,
    user_ns: Option<&crate::confine::userns::Maps>,
) -> ! {
    let fail = |stage: Stage, e: i32| -> ! {
        let b = e.to_ne_bytes();
        let msg = [stage as u8, b[0], b[1], b[2], b[3]];
        // SAFETY: write then _exit, raw calls only.
        unsafe {
            libc::write(spec.exec_err, msg.as_ptr().cast(), msg.len());
            libc::_exit(125);
        }
    };
    // The run's cgroup first, before anything is forked: every process of
    // the run is born inside it. The fds were opened by agent-rsh, whose
    // credentials the kernel checks, so this works in a user namespace.
    if let Err(e) = crate::confine::cgroup::join_raw(&spec.cgroup[..spec.cgroup_n]) {
        fail(Stage::Cgroup, e);
    }
    // SAFETY: raw system calls in a freshly cloned child.
    unsafe {
        if spec.pid_ns {
            // PID 1 of the run's namespace: its death kills the tree.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        } else {
            // Without a PID namespace the guardian must outlive agent-rsh
            // long enough to kill the tree: it learns of agent-rsh's death
            // from the lifeline, not by dying with it, and leaves
            // agent-rsh's process group so a group kill aimed at agent-rsh
            // does not take it first.
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            if spec.new_pgrp {
                libc::setpgid(0, 0);
            }
        }
        if let Some(maps) = user_ns
            && let Err(e) = maps.map_ids()
        {
            fail(Stage::UserNamespace, e);
        }
        if spec.view
            && let Some(view) = confinement.view()
            && let Err(e) = view.build_in_guardian()
        {
            fail(Stage::MountView, e);
        }
        if let Some(maps) = user_ns
            && let Err(e) = maps.lock()
        {
            fail(Stage::UserNamespace, e);
        }
        let sfd = libc::signalfd(-1, &spec.mask, libc::SFD_CLOEXEC);
        let h = raw_fork(0);
        if h == 0 {
            command_main(spec, confinement);
        }
        if h < 0 {
            let e = errno();
            let b = e.to_ne_bytes();
            let msg = [Stage::Exec as u8, b[0], b[1], b[2], b[3]];
            libc::write(spec.exec_err, msg.as_ptr().cast(), msg.len());
            libc::_exit(125);
        }
        let h = h as i32;
        let mut keep = [sfd, spec.status, spec.lifeline];
        keep.sort_unstable();
        close_except(&keep);
        if !spec.pid_ns {
            write_msg(spec.status, MSG_PID, h);
        }
        // Without a PID namespace: kills H's group, then every process that
        // is (or becomes, as its parent dies) the guardian's child, until
        // none is left. The guardian is a child subreaper, so a descendant
        // that called setsid or double-forked is reparented to it.
        let kill_tree = || {
            if spec.new_pgrp {
                libc::kill(-h, libc::SIGKILL);
            }
            let mut buf = [0u8; 4096];
            loop {
                let fd = libc::open(
                    c"/proc/thread-self/children".as_ptr(),
                    libc::O_RDONLY | libc::O_CLOEXEC,
                );
                let mut n = 0;
                if fd >= 0 {
                    let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    n = r.max(0) as usize;
                    libc::close(fd);
                }
                let mut pid: i32 = 0;
                for &c in buf[..n].iter().chain(b" ") {
                    if c.is_ascii_digit() {
                        pid = pid.saturating_mul(10).saturating_add((c - b'0') as i32);
                    } else if pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                        pid = 0;
                    }
                }
                let mut st = 0;
                if libc::waitpid(-1, &mut st, 0) < 0 && errno() == libc::ECHILD {
                    break;
                }
            }
        };
        let forward = |sig: i32| {
            if spec.pid_ns {
                libc::kill(-1, sig);
            } else if spec.new_pgrp {
                libc::kill(-h, sig);
            } else {
                libc::kill(h, sig);
            }
        };
        let finish = |code: i32| -> ! {
            if !spec.pid_ns {
                kill_tree();
            }
            libc::_exit(code)
        };
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: sfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: spec.lifeline,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                continue;
            }
            if fds[1].revents != 0 {
                // agent-rsh is gone: take the tree down.
                if spec.pid_ns {
                    forward(libc::SIGKILL);
                }
                finish(1);
            }
            if fds[0].revents == 0 {
                continue;
            }
            let mut info: libc::signalfd_siginfo = std::mem::zeroed();
            let n = libc::read(
                sfd,
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                std::mem::size_of::<libc::signalfd_siginfo>(),
            );
            if n <= 0 {
                continue;
            }
            let sig = info.ssi_signo as i32;
            if sig != libc::SIGCHLD {
                forward(sig);
                continue;
            }
            loop {
                let mut st = 0;
                let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if r <= 0 {
                    break;
                }
                if r == h {
                    write_msg(spec.status, MSG_STATUS, st);
                    finish(0);
                }
            }
        }
    }
}

fn command_main(spec: &ChildSpec, confinement: &Confinement) -> ! {
    let fail = |stage: Stage, e: i32| -> ! {
        let b = e.to_ne_bytes();
        let msg = [stage as u8, b[0], b[1], b[2], b[3]];
        // SAFETY: write then _exit, raw calls only.
        unsafe {
            libc::write(spec.exec_err, msg.as_ptr().cast(), msg.len());
            libc::_exit(if stage == Stage::Exec && e == libc::ENOENT {
                127
            } else {
                126
            })
        }
    };
    // SAFETY: raw system calls in a freshly cloned child.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        // execve resets handled signals; only ignored ones survive it.
        // agent-rsh ignores SIGPIPE (Rust's runtime does), and a caller
        // such as nohup or a non-interactive `&` may have left others
        // ignored: the command starts with default dispositions.
        for sig in RESET_SIGNALS {
            libc::signal(sig, libc::SIG_DFL);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        if spec.new_pgrp {
            libc::setpgid(0, 0);
        }
        if (spec.stdin >= 0 && libc::dup2(spec.stdin, 0) < 0)
            || libc::dup2(spec.stdout, 1) < 0
            || libc::dup2(spec.stderr, 2) < 0
        {
            fail(Stage::Stdio, errno());
        }
        if libc::chdir(spec.cwd) != 0 {
            fail(Stage::Chdir, errno());
        }
        if let Err((stage, e)) = confinement.apply_in_child(spec.view) {
            fail(stage, e);
        }
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        // The compound-command interpreter's job (see `script::interp`).
        if spec.pass_fd >= 0 {
            libc::fcntl(spec.pass_fd, libc::F_SETFD, 0);
        }
        libc::execve(spec.program, spec.argv, spec.envp);
        fail(Stage::Exec, errno());
    }
}
