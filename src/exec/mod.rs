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

mod child;
mod lifecycle;
mod stdin;

use crate::confine::{Confinement, Stage, errno};
use crate::plan::Plan;
use crate::result::{Capture, Status, Stream};
use crate::sys;
use child::{ChildSpec, MSG_PID, MSG_STATUS, spawn_guardian};
use lifecycle::{Kill, Lifecycle, Stop};
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
    /// A domain list: the connections the run asked the proxy for.
    pub network: Option<crate::proxy::Log>,
}

/// The most read from, or written to, a pipe at once.
const READ_CHUNK: usize = 64 * 1024;

/// Full reads of one pipe before the loop polls again.
const READS_PER_WAKE: usize = 16;

/// The signals agent-rsh forwards to the tree and reports as `interrupted`.
pub const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A self-pipe that receives forwarded signals as bytes (the signal number).
struct Interrupts {
    read: OwnedFd,
}

fn interrupts() -> io::Result<&'static Interrupts> {
    static CELL: OnceLock<Result<Interrupts, i32>> = OnceLock::new();
    let r = CELL.get_or_init(|| {
        let (r, w) = sys::pipe().map_err(|e| e.raw_os_error().unwrap_or(0))?;
        // Non-blocking both ways: the handler must never block, and the
        // run loop drains the read end until EAGAIN.
        set_nonblocking(r.as_raw_fd());
        set_nonblocking(w.as_raw_fd());
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

fn cstring(s: &[u8], what: &str) -> io::Result<CString> {
    CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} contains NUL")))
}

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

    let mut relay = stdin::Relay::new(&plan.stdin)?;

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
            &relay,
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
        exec_error,
        proxy_listener,
    } = started_run;
    // A domain list: agent-rsh serves the run's one way out until every
    // process of the run has ended.
    let proxy = match (proxy_listener, confinement.proxy_grant()) {
        (Some(l), Some(grant)) if exec_error.is_none() => {
            match crate::proxy::Proxy::start(std::net::TcpListener::from(l), grant.clone()) {
                Ok(p) => Some(p),
                Err(e) => {
                    kill(guardian, libc::SIGKILL);
                    reap(guardian);
                    return Err(io::Error::other(format!(
                        "cannot start the network proxy: {e}"
                    )));
                }
            }
        }
        _ => None,
    };
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
        relay.begin();
    } else {
        relay.end();
    }

    set_nonblocking(out_r.as_raw_fd());
    set_nonblocking(err_r.as_raw_fd());

    let mut pump = Pump {
        stdout: Capture::new(if capture { plan.output_cap } else { 0 }),
        stderr: Capture::new(if capture { plan.output_cap } else { 0 }),
        buf: Vec::with_capacity(READ_CHUNK),
    };
    let mut life = Lifecycle::new(started, plan.timeout, plan.grace, pid_ns);
    let mut child_status: Option<i32> = None;
    let mut child_pid: Option<i32> = None;
    let mut out_open = true;
    let mut err_open = true;
    let mut status_open = true;
    let mut warnings: Vec<String> = relay.warning.take().into_iter().collect();
    // The grace period ran out with the tree still there.
    let mut forced = false;
    let act = |k: Kill, child_pid: Option<i32>| match k {
        Kill::Guardian(sig) => kill(guardian, sig),
        Kill::Tree => {
            kill(guardian, libc::SIGKILL);
            if !pid_ns && let Some(pid) = child_pid {
                kill(-pid, libc::SIGKILL);
            }
        }
    };

    loop {
        let now = Instant::now();
        // Both kills can be due at once (a zero grace period).
        while let Some(k) = life.tick(now) {
            forced |= k == Kill::Tree && life.guardian_alive();
            act(k, child_pid);
        }
        match life.stop(now, out_open || err_open) {
            Some(Stop::Done) => break,
            Some(Stop::DrainExpired) => {
                warnings.push("a process outside the run's process group kept its output open; output after the command ended was not read".to_string());
                break;
            }
            None => {}
        }

        let alive = life.guardian_alive();
        let r = relay.pollfds();
        let mut fds = [
            pfd(out_r.as_raw_fd(), out_open),
            pfd(err_r.as_raw_fd(), err_open),
            pfd(ints.read.as_raw_fd(), true),
            pfd(pidfd.as_raw_fd(), alive),
            pfd(status_r.as_raw_fd(), alive && status_open),
            pfd(cancel.unwrap_or(-1), life.cancellable()),
            r[0],
            r[1],
            r[2],
            r[3],
        ];
        let timeout_ms = life.poll_timeout_ms(Instant::now());
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
        if fds[5].revents != 0
            && let Some(k) = life.cancel(Instant::now())
        {
            act(k, child_pid);
        }
        if fds[2].revents != 0 {
            let mut b = [0u8; 16];
            // SAFETY: read into a stack buffer.
            let n = unsafe { libc::read(ints.read.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
            if n > 0
                && let Some(k) = life.signal(b[n as usize - 1] as i32, Instant::now())
            {
                act(k, child_pid);
            }
        }
        if fds[4].revents != 0 {
            status_open = read_status(&status_r, &mut child_pid, &mut child_status);
        }
        if alive {
            relay.handle(&fds[6..6 + stdin::SLOTS]);
        }
        if fds[3].revents != 0 && life.guardian_alive() {
            reap(guardian);
            let _ = read_status(&status_r, &mut child_pid, &mut child_status);
            life.guardian_exited(Instant::now());
            relay.end();
        }
    }

    relay.end();
    let network = proxy.map(crate::proxy::Proxy::finish);
    // Every process of the run has ended (or is killed now): what its
    // cgroup counted becomes warnings, and the cgroup goes.
    warnings.extend(confinement.finish_cgroup());

    let (status, exit_code, signal) = life.verdict(child_status);
    if forced {
        warnings.push(format!(
            "the command was still running {} ms (limits.kill_grace_ms) after {}; its process tree was killed with SIGKILL",
            plan.grace.as_millis(),
            match (status, signal) {
                (Status::Interrupted, Some(libc::SIGINT)) => "SIGINT",
                (Status::Interrupted, Some(libc::SIGHUP)) => "SIGHUP",
                _ => "SIGTERM",
            }
        ));
    }
    if status == Status::Failed && exec_error.is_none() {
        warnings.push("the guardian process ended without reporting the command's status".into());
    }
    Ok(Outcome {
        status,
        exit_code,
        signal,
        timed_out: life.timed_out(),
        duration: started.elapsed(),
        stdout: pump.stdout,
        stderr: pump.stderr,
        warnings,
        exec_error,
        network,
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
struct Started {
    guardian: i32,
    pid_ns: bool,
    out_r: OwnedFd,
    err_r: OwnedFd,
    status_r: OwnedFd,
    /// Held for the whole run; the guardian sees end of file on its end
    /// when agent-rsh dies.
    _lifeline_w: OwnedFd,
    /// Set when the setup failed before the command's exec.
    exec_error: Option<(Stage, i32)>,
    /// A domain list: the listener the proxy serves.
    proxy_listener: Option<OwnedFd>,
}

/// Makes the pipes, starts the guardian and waits for the command's exec
/// (or the setup's failure).
fn start(
    plan: &Plan,
    confinement: &mut Confinement,
    parts: ChildSpecParts,
    relay: &stdin::Relay,
) -> io::Result<Started> {
    let (out_r, out_w) = sys::pipe()?;
    let (err_r, err_w) = sys::pipe()?;
    let (xerr_r, xerr_w) = sys::pipe()?;
    let (status_r, status_w) = sys::pipe()?;
    let (life_r, lifeline_w) = sys::pipe()?;
    let proxy_w = if confinement.proxy_listener() {
        Some(sys::seqpacket_pair()?)
    } else {
        None
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
        stdin: relay.child_fd(),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        exec_err: xerr_w.as_raw_fd(),
        status: status_w.as_raw_fd(),
        lifeline: life_r.as_raw_fd(),
        // The command never reads the caller's terminal (stdin is relayed),
        // so it never needs the caller's foreground process group.
        new_pgrp: true,
        session: relay.session,
        ctty: relay.ctty,
        pid_ns: confinement.want_pid_namespace,
        view: confinement.view().is_some(),
        mask: parts.mask,
        cgroup,
        cgroup_n,
        pass_fd: plan.pass_fd.unwrap_or(-1),
        proxy_chan: proxy_w.as_ref().map_or(-1, |(_, w)| w.as_raw_fd()),
    };
    let guardian = spawn_guardian(&mut spec, confinement)?;
    drop((out_w, err_w, xerr_w, status_w, life_r));
    // The proxy's listener comes before the command is forked; none when
    // the guardian ended first (the exec error says why) or the namespace
    // was given up on the way.
    let mut proxy_listener = None;
    if let Some((r, w)) = proxy_w {
        drop(w);
        if confinement.proxy_listener() {
            proxy_listener = crate::confine::receive_proxy_listener(r.as_raw_fd())?;
        }
    }
    // Exec errors arrive before anything else; EOF means exec succeeded.
    let exec_error = read_exec_error(&xerr_r);
    Ok(Started {
        guardian,
        pid_ns: spec.pid_ns,
        out_r,
        err_r,
        status_r,
        _lifeline_w: lifeline_w,
        exec_error,
        proxy_listener,
    })
}

struct Pump {
    stdout: Capture,
    stderr: Capture,
    buf: Vec<u8>,
}

impl Pump {
    /// Reads what is available; returns false at end of file. The buffer
    /// is read into its spare capacity: never zeroed, so a run whose
    /// command prints nothing touches none of its pages.
    fn read(&mut self, fd: RawFd, stream: Stream, sink: &mut dyn Sink) -> bool {
        // A few full reads at most, then back to poll: a writer faster than
        // the sink must not starve the deadline, kills and signals.
        for _ in 0..READS_PER_WAKE {
            let spare = self.buf.spare_capacity_mut();
            // SAFETY: read into our own buffer's spare capacity.
            let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
            if n > 0 {
                // SAFETY: read(2) initialised the first n bytes.
                let data =
                    unsafe { std::slice::from_raw_parts(spare.as_ptr().cast::<u8>(), n as usize) };
                match stream {
                    Stream::Stdout => self.stdout.push(data),
                    Stream::Stderr => self.stderr.push(data),
                }
                sink.output(stream, data);
                if (n as usize) < spare.len() {
                    return true;
                }
                continue;
            }
            if n == 0 {
                return false;
            }
            return matches!(errno(), libc::EAGAIN | libc::EINTR);
        }
        true
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
