//! The per-run cgroup against the real kernel: a child that joins through
//! the open `cgroup.procs` fds is bounded in memory and tasks, and nothing
//! is left behind. As root a cgroup must be created; as another account the
//! typed refusal is checked instead.

use agent_rsh::confine::cgroup::{self, CgroupError, RunCgroup};
use std::path::Path;

fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Forks a child that joins `cg` and then runs `body` (raw system calls
/// only); returns its pid.
fn fork_joined(cg: &RunCgroup, body: impl FnOnce() -> i32) -> i32 {
    let fds = cg.join_fds().to_vec();
    // SAFETY: the child makes raw system calls only and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        if cgroup::join_raw(&fds).is_err() {
            unsafe { libc::_exit(100) };
        }
        let code = body();
        unsafe { libc::_exit(code) };
    }
    pid
}

fn wait(pid: i32) -> i32 {
    let mut st = 0;
    // SAFETY: waitpid on our own child.
    let r = unsafe { libc::waitpid(pid, &mut st, 0) };
    assert_eq!(r, pid);
    st
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn assert_gone(paths: &[std::path::PathBuf]) {
    for p in paths {
        assert!(!p.exists(), "{} was left behind", p.display());
    }
}

#[test]
fn memory_bound_ends_the_run_with_the_oom_killer() {
    if !root() {
        let e = RunCgroup::create(64 << 20, 16).unwrap_err();
        assert!(
            matches!(e, CgroupError::NotPermitted { .. }),
            "as non-root: {e}"
        );
        return;
    }
    let cg = RunCgroup::create(64 << 20, 64).expect("a cgroup as root");
    let paths = cg.paths().to_vec();
    assert!(paths.iter().all(|p| p.is_dir()));
    let report = cg.report().clone();
    assert_eq!(report.memory_bytes, Some(64 << 20));
    assert_eq!(report.processes, Some(64));
    match cg.mechanism() {
        cgroup::Mechanism::V1 => {
            assert_eq!(
                read(&paths[0].join("memory.limit_in_bytes")).trim(),
                (64u64 << 20).to_string()
            );
            assert_eq!(read(&paths[1].join("pids.max")).trim(), "64");
        }
        cgroup::Mechanism::V2 => {
            assert_eq!(
                read(&paths[0].join("memory.max")).trim(),
                (64u64 << 20).to_string()
            );
            assert_eq!(read(&paths[0].join("pids.max")).trim(), "64");
        }
    }
    // Allocate and touch 512 MiB, eight times the bound.
    let pid = fork_joined(&cg, || {
        const LEN: usize = 512 << 20;
        // SAFETY: an anonymous private mapping, touched page by page.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return 101;
            }
            let p = p as *mut u8;
            let mut i = 0;
            while i < LEN {
                std::ptr::write_volatile(p.add(i), 1);
                i += 4096;
            }
        }
        0
    });
    let st = wait(pid);
    assert!(
        libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL,
        "the child was not killed by the OOM killer: status {st:#x}"
    );
    let ev = cg.events();
    assert!(ev.oom_killed(), "{ev:?}");
    if let Some(peak) = cg.memory_peak_bytes() {
        assert!(peak <= 64 << 20, "peak {peak} above the bound");
    }
    let w = ev.warnings(&report);
    assert!(w[0].contains("limits.memory_bytes"), "{w:?}");
    cg.remove().expect("removed");
    assert_gone(&paths);
}

#[test]
fn task_bound_stops_a_fork_loop_and_remove_kills_the_rest() {
    if !root() {
        assert!(RunCgroup::create(0, 16).is_err());
        return;
    }
    const MAX: u64 = 16;
    let cg = RunCgroup::create(256 << 20, MAX).expect("a cgroup as root");
    let paths = cg.paths().to_vec();
    let mut p = [0; 2];
    // SAFETY: pipe into a stack array.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    let (r, w) = (p[0], p[1]);
    // The child forks sleepers until the kernel refuses, reports how many
    // it got, and exits; the sleepers stay for `remove` to kill.
    let pid = fork_joined(&cg, || {
        let mut n: u32 = 0;
        loop {
            // SAFETY: raw fork; the sleeper only pauses.
            let c = unsafe { libc::fork() };
            if c == 0 {
                loop {
                    unsafe { libc::pause() };
                }
            }
            if c < 0 || n > 1000 {
                break;
            }
            n += 1;
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let msg = [n.to_ne_bytes(), (errno as u32).to_ne_bytes()].concat();
        unsafe { libc::write(w, msg.as_ptr().cast(), msg.len()) };
        0
    });
    unsafe { libc::close(w) };
    let mut buf = [0u8; 8];
    // SAFETY: read into a stack buffer.
    let got = unsafe { libc::read(r, buf.as_mut_ptr().cast(), 8) };
    unsafe { libc::close(r) };
    assert_eq!(got, 8);
    assert_eq!(wait(pid), 0);
    let forked = u32::from_ne_bytes(buf[..4].try_into().unwrap());
    let errno = u32::from_ne_bytes(buf[4..].try_into().unwrap()) as i32;
    // The looping child itself is one task of the sixteen.
    assert_eq!(forked as u64, MAX - 1, "forks before the refusal");
    assert_eq!(errno, libc::EAGAIN);
    let ev = cg.events();
    assert!(ev.pids_refused(), "{ev:?}");
    let procs = paths.last().unwrap().join("cgroup.procs");
    let sleepers: Vec<i32> = read(&procs).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(sleepers.len() as u64, MAX - 1);
    cg.remove().expect("removed, sleepers killed");
    assert_gone(&paths);
    for s in sleepers {
        // SAFETY: signal 0 checks existence. Reaped by init or a zombie of
        // ours at most (they were reparented away from the test).
        let alive = unsafe { libc::kill(s, 0) } == 0;
        let zombie = std::fs::read_to_string(format!("/proc/{s}/stat"))
            .map(|t| {
                t.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        assert!(!alive || zombie, "sleeper {s} survived remove");
    }
}

/// The guardian joins after it has entered a user namespace and dropped
/// its privileges: the kernel checks the credentials of whoever opened the
/// fd, so a child running as nobody still joins.
#[test]
fn join_works_after_dropping_privileges() {
    if !root() {
        return;
    }
    let cg = RunCgroup::create(0, 0).expect("a cgroup as root");
    assert_eq!(cg.report().memory_bytes, None);
    assert_eq!(cg.report().processes, None);
    let fds = cg.join_fds().to_vec();
    // SAFETY: raw calls in the child.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                libc::_exit(90);
            }
            if cgroup::join_raw(&fds).is_err() {
                libc::_exit(91);
            }
            libc::_exit(0);
        }
    }
    assert_eq!(libc::WEXITSTATUS(wait(pid)), 0, "nobody could not join");
    let paths = cg.paths().to_vec();
    cg.remove().unwrap();
    assert_gone(&paths);
}

/// A run cgroup left by an agent-rsh that was SIGKILLed (its pid is gone)
/// is collected once it is old enough; a fresh one is left alone.
#[test]
fn gc_collects_leftovers_of_dead_processes() {
    if !root() {
        return;
    }
    let layout = cgroup::layout().expect("layout as root");
    // A pid above pid_max never exists; the counter part is this test
    // process's own, so test runs at the same time do not collide.
    let me = std::process::id();
    let stale: Vec<_> = layout
        .parents
        .iter()
        .map(|p| p.join(format!("4194999-{me}0")))
        .collect();
    let young: Vec<_> = layout
        .parents
        .iter()
        .map(|p| p.join(format!("4194999-{me}1")))
        .collect();
    for d in stale.iter().chain(&young) {
        std::fs::create_dir(d).unwrap();
    }
    let old = libc::timespec {
        tv_sec: 1_000_000_000,
        tv_nsec: 0,
    };
    for d in &stale {
        let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: utimensat with a NUL-terminated path and two timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [old, old].as_ptr(), 0) };
        assert_eq!(r, 0, "utimensat: {}", std::io::Error::last_os_error());
    }
    let removed = cgroup::gc();
    for d in &stale {
        // Another test process's gc may have been first.
        assert!(
            removed.contains(d) || !d.exists(),
            "{} not collected: {removed:?}",
            d.display()
        );
    }
    assert_gone(&stale);
    assert!(
        young.iter().all(|d| d.is_dir()),
        "a young one was collected"
    );
    for d in &young {
        std::fs::remove_dir(d).unwrap();
    }
}
