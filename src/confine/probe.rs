//! What this kernel offers, probed once per process.
//!
//! The simulation seam: `AGENT_RSH_SIMULATE_MISSING=landlock,seccomp,netns,userns,mountns,pidns,cgroup`
//! makes the probe report those layers as unavailable. It can only take
//! layers away, never add them; under `confinement = "required"` a layer
//! taken away makes the run fail closed, under "best-effort" the RunResult
//! carries a warning and the report shows the layer as not enforced. It
//! exists so tests can show the fail-closed path on a kernel that has
//! everything.

use std::sync::OnceLock;

/// The environment variable of the simulation seam.
pub const SIMULATE_ENV: &str = "AGENT_RSH_SIMULATE_MISSING";

/// Layers the seam can take away.
pub const SIMULABLE: [&str; 7] = [
    "landlock", "seccomp", "netns", "userns", "mountns", "pidns", "cgroup",
];

#[derive(Debug, Clone)]
pub struct Kernel {
    /// Landlock ABI version, 0 when Landlock is unavailable (or simulated so).
    pub landlock_abi: u32,
    /// seccomp filter mode with SECCOMP_RET_ERRNO.
    pub seccomp: bool,
    /// A network namespace may be requested (false only when simulated off;
    /// whether the kernel grants it is learned at clone time).
    pub netns: bool,
    /// Layers the seam took away, in the order of `SIMULABLE`.
    pub simulated: Vec<&'static str>,
    /// The ABI the kernel really has, for the doctor.
    pub real_landlock_abi: u32,
}

static SEAM_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes the seam ignore `SIMULATE_ENV` from now on: a login shell whose
/// account did not choose its policy must not let the account take layers
/// away (the mount view, the PID namespace; under "best-effort" Landlock
/// and seccomp too). Call it before the first `kernel()`.
pub fn close_seam() {
    SEAM_CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn kernel() -> &'static Kernel {
    static K: OnceLock<Kernel> = OnceLock::new();
    K.get_or_init(|| {
        let wanted = if SEAM_CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            String::new()
        } else {
            std::env::var(SIMULATE_ENV).unwrap_or_default()
        };
        let simulated: Vec<&'static str> = SIMULABLE
            .iter()
            .copied()
            .filter(|l| wanted.split(',').any(|w| w.trim() == *l))
            .collect();
        let off = |l: &str| simulated.contains(&l);
        let real = landlock_abi();
        Kernel {
            landlock_abi: if off("landlock") { 0 } else { real },
            seccomp: !off("seccomp") && seccomp_filter_available(),
            netns: !off("netns"),
            simulated,
            real_landlock_abi: real,
        }
    })
}

fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
    // SAFETY: the version query takes no pointer.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0) as u32
}

fn seccomp_filter_available() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from a live stack value.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0usize,
            &action as *const u32,
        ) == 0
    }
}

/// Tries a clone with `flags` (namespaces) whose child exits at once;
/// returns whether the kernel allowed it and how long it took.
pub fn try_namespaces(flags: libc::c_ulong) -> (bool, std::time::Duration) {
    let t = std::time::Instant::now();
    let pid = crate::sys::fork_with(flags);
    if pid == 0 {
        // SAFETY: leave the child at once.
        unsafe { libc::_exit(0) };
    }
    if pid < 0 {
        return (false, t.elapsed());
    }
    let mut st = 0;
    // SAFETY: reap our own child.
    unsafe { libc::waitpid(pid as i32, &mut st, 0) };
    (true, t.elapsed())
}
