//! The guardian and the command: the two processes a run creates, from
//! their `clone` to the command's `execve`. Raw system calls only after
//! `clone`: no allocation, no locks, so a multi-threaded parent cannot
//! deadlock them.

use super::Stage;
use crate::confine::{Confinement, errno};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Everything the children need, built before clone.
pub(super) struct ChildSpec {
    pub(super) program: *const libc::c_char,
    pub(super) argv: *const *const libc::c_char,
    pub(super) envp: *const *const libc::c_char,
    pub(super) cwd: *const libc::c_char,
    pub(super) stdin: RawFd,
    pub(super) stdout: RawFd,
    pub(super) stderr: RawFd,
    pub(super) exec_err: RawFd,
    pub(super) status: RawFd,
    pub(super) lifeline: RawFd,
    pub(super) new_pgrp: bool,
    /// The command starts a session of its own (`setsid`).
    pub(super) session: bool,
    /// ... and makes its stdin (a pty agent-rsh allocated) its controlling
    /// terminal.
    pub(super) ctty: bool,
    pub(super) pid_ns: bool,
    /// Build the mount view (the guardian is cloned with CLONE_NEWNS).
    pub(super) view: bool,
    pub(super) mask: libc::sigset_t,
    /// Open `cgroup.procs` files of the run's cgroup (one per hierarchy:
    /// v1's memory and pids `tasks`), written by the guardian before
    /// anything else.
    pub(super) cgroup: [RawFd; 2],
    pub(super) cgroup_n: usize,
    /// Kept open across exec (`Plan::pass_fd`), or -1.
    pub(super) pass_fd: RawFd,
    /// A domain list: where the guardian sends the proxy's listener, or -1.
    pub(super) proxy_chan: RawFd,
}

pub(super) const MSG_PID: u8 = b'P';

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
pub(super) const MSG_STATUS: u8 = b'S';

/// Starts the guardian with the most confinement the kernel grants:
/// PID and mount namespaces (with a user namespace for a caller without
/// CAP_SYS_ADMIN, and a network namespace when wanted), then without the
/// network namespace, then without the mount view, then without any
/// namespace. Each step down is recorded; every guarantee still holds by
/// another mechanism (seccomp refuses metadata changes and UNIX sockets
/// without the view; the guardian, a child subreaper, kills the whole tree
/// without the PID namespace).
pub(super) fn spawn_guardian(
    spec: &mut ChildSpec,
    confinement: &mut Confinement,
) -> io::Result<i32> {
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: block the signals the guardian will wait for, so none is lost
    // between clone and its signalfd; restored below in the parent.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &spec.mask, &mut old) };
    let mut r;
    let mut first_err = 0;
    let mut refused = None;
    loop {
        if let Err(e) = confinement.select_seccomp(spec.pid_ns) {
            refused = Some(e);
            r = -1;
            break;
        }
        let joining = joins(spec, confinement);
        r = try_clone(spec, confinement, joining);
        if r >= 0 {
            break;
        }
        let e = errno();
        if joining {
            // The workspace's other runs ended, or the kernel refused:
            // make a network namespace of its own instead.
            confinement.forget_net_join(&io::Error::from_raw_os_error(e).to_string());
            continue;
        }
        if first_err == 0 {
            first_err = e;
        }
        let err = io::Error::from_raw_os_error(e);
        // network = "loopback" needs its network namespace: the mount view
        // is given up before it.
        let loopback = confinement.loopback_up();
        let give_up_net = |c: &mut Confinement| {
            c.give_up_extra_namespaces(&format!("the kernel refused a network namespace: {err}"))
        };
        if !loopback {
            match give_up_net(confinement) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if spec.view
            && confinement.give_up_view(&format!("the kernel refused a mount namespace: {err}"))
        {
            spec.view = false;
            continue;
        }
        if loopback {
            match give_up_net(confinement) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if spec.pid_ns {
            spec.pid_ns = false;
            continue;
        }
        break;
    }
    // SAFETY: restore the parent's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if let Some(e) = refused {
        return Err(io::Error::other(e.to_string()));
    }
    if r < 0 {
        return Err(io::Error::from_raw_os_error(first_err));
    }
    confinement.register_loopback(r as i32);
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

/// Whether the guardian joins the network namespace of the workspace's
/// live runs (`confine::netshare`): with its PID namespace, and inside
/// their user namespace exactly when it would make one of its own.
fn joins(spec: &ChildSpec, confinement: &Confinement) -> bool {
    spec.pid_ns
        && confinement
            .net_join()
            .is_some_and(|j| j.user.is_some() == confinement.user_namespace().is_some())
}

fn try_clone(spec: &mut ChildSpec, confinement: &Confinement, joining: bool) -> libc::c_long {
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
        // The run's own IPC namespace comes with its PID namespace: SysV
        // segments, queues and semaphores and POSIX message queues of the
        // host are out of sight, and what the run creates is destroyed
        // with the namespace when its last process exits. Without it the
        // seccomp filter refuses those calls (`select_seccomp`).
        flags |= (libc::CLONE_NEWPID | libc::CLONE_NEWIPC) as libc::c_ulong;
    }
    if spec.view && (spec.pid_ns || user_ns.is_none() && !confinement.needs_user_namespace()) {
        flags |= libc::CLONE_NEWNS as libc::c_ulong;
    } else {
        spec.view = false;
    }
    if joining && let Some(join) = confinement.net_join() {
        flags &= !(libc::CLONE_NEWNET as libc::c_ulong);
        let user = match user_ns {
            Some(maps) => UserNs::Joined(maps),
            None => UserNs::Own,
        };
        return clone_joined(spec, confinement, join.raw(), flags, user);
    }
    if user_ns.is_some() {
        flags |= libc::CLONE_NEWUSER as libc::c_ulong;
    }
    let r = crate::sys::fork_with(flags);
    if r == 0 {
        let user = match user_ns {
            Some(maps) => UserNs::New(maps),
            None => UserNs::Own,
        };
        guardian_main(spec, confinement, user);
    }
    r
}

/// The user namespace the guardian runs in.
#[derive(Clone, Copy)]
enum UserNs<'a> {
    /// agent-rsh's own (it has CAP_SYS_ADMIN).
    Own,
    /// A new one, with these maps to write.
    New(&'a crate::confine::userns::Maps),
    /// An earlier run's, joined with its network namespace: mapped already.
    Joined(&'a crate::confine::userns::Maps),
}

/// Starts the guardian in the network namespace (and user namespace) of
/// the workspace's live runs: a joiner, forked, enters them and clones the
/// guardian as agent-rsh's own child (CLONE_PARENT), with the PID, IPC and
/// mount namespaces `flags` asks for, made inside the joined user
/// namespace; it reports the guardian's pid, or the error, and exits.
fn clone_joined(
    spec: &ChildSpec,
    confinement: &Confinement,
    (user, net): (Option<RawFd>, RawFd),
    flags: libc::c_ulong,
    user_ns: UserNs,
) -> libc::c_long {
    let Ok((reader, writer)) = crate::sys::pipe() else {
        return -1;
    };
    let (r, w) = (reader.as_raw_fd(), writer.as_raw_fd());
    let j = crate::sys::fork_with(0);
    if j < 0 {
        return -1;
    }
    if j == 0 {
        let out: i64 = match crate::confine::netshare::enter(user, net) {
            Err(e) => -i64::from(e),
            Ok(()) => {
                let g = crate::sys::fork_with(flags | libc::CLONE_PARENT as libc::c_ulong);
                if g == 0 {
                    guardian_main(spec, confinement, user_ns);
                }
                if g < 0 { -i64::from(errno()) } else { g }
            }
        };
        // SAFETY: write from a stack buffer, then _exit: raw calls only.
        unsafe {
            libc::write(w, out.to_ne_bytes().as_ptr().cast(), 8);
            libc::_exit(0);
        }
    }
    // Only the joiner (and the guardian it may have cloned) hold the
    // write end now: a joiner that dies early is an end of file here.
    drop(writer);
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: read into our stack buffer.
        let n = unsafe { libc::read(r, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || errno() != libc::EINTR {
            break;
        }
    }
    // SAFETY: reaping the joiner, our child.
    unsafe { libc::waitpid(j as i32, std::ptr::null_mut(), 0) };
    let v = if got == buf.len() {
        i64::from_ne_bytes(buf)
    } else {
        -i64::from(libc::EIO)
    };
    if v < 0 {
        // SAFETY: setting errno for the caller to read.
        unsafe { *libc::__errno_location() = -v as i32 };
        return -1;
    }
    v as libc::c_long
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

fn guardian_main(spec: &ChildSpec, confinement: &Confinement, user_ns: UserNs) -> ! {
    let (new_maps, maps) = match user_ns {
        UserNs::Own => (None, None),
        UserNs::New(m) => (Some(m), Some(m)),
        UserNs::Joined(m) => (None, Some(m)),
    };
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
        if let Some(m) = new_maps
            && let Err(e) = m.map_ids()
        {
            fail(Stage::UserNamespace, e);
        }
        // network = "loopback": `lo` up in the run's own network namespace,
        // with the capabilities the guardian holds there (the command drops
        // them before it execs).
        if confinement.loopback_up()
            && let Err(e) = confinement.bring_up_loopback()
        {
            fail(Stage::Loopback, e);
        }
        if spec.proxy_chan >= 0
            && confinement.proxy_listener()
            && let Err(e) = confinement.send_proxy_listener(spec.proxy_chan)
        {
            fail(Stage::ProxyListener, e);
        }
        if spec.view
            && let Some(view) = confinement.view()
            && let Err(e) = view.build_in_guardian()
        {
            fail(Stage::MountView, e);
        }
        if let Some(m) = maps
            && let Err(e) = m.lock()
        {
            fail(Stage::UserNamespace, e);
        }
        let sfd = libc::signalfd(-1, &spec.mask, libc::SFD_CLOEXEC);
        let h = crate::sys::fork_with(0);
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
        if spec.session {
            // Out of the caller's session: no controlling terminal but the
            // pty below, so `/dev/tty` is never the caller's terminal.
            libc::setsid();
        } else if spec.new_pgrp {
            libc::setpgid(0, 0);
        }
        if (spec.stdin >= 0 && libc::dup2(spec.stdin, 0) < 0)
            || libc::dup2(spec.stdout, 1) < 0
            || libc::dup2(spec.stderr, 2) < 0
            || spec.ctty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0
        {
            fail(Stage::Stdio, errno());
        }
        if libc::chdir(spec.cwd) != 0 {
            fail(Stage::Chdir, errno());
        }
        if let Err((stage, e)) = confinement.apply_in_child(spec.view, spec.view && spec.pid_ns) {
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
