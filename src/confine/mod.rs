//! Kernel confinement of the child, prepared before fork and applied between
//! fork and exec with raw system calls only.
//!
//! `Confinement::prepare` does everything that allocates or can fail slowly
//! (the Landlock rule set, the seccomp program) in the parent;
//! `apply_in_child` runs in the forked child and only makes system calls, so
//! it is safe after fork in a process that may have other threads.
//!
//! Layers, in the order the child applies them: rlimits, no_new_privs,
//! Landlock (files, TCP, abstract sockets, signals), capabilities dropped,
//! seccomp (last: it also refuses calls the earlier steps need). The guardian
//! adds a PID namespace and, with `network = "none"`, a network namespace;
//! a caller without CAP_SYS_ADMIN gets them inside a new user namespace
//! (see `userns` for what that changes and why it is safe).

pub mod cgroup;
mod error;
pub mod landlock;
pub mod netshare;
pub mod probe;
mod refusal;
pub mod seccomp;
mod sys;
pub mod userns;
pub mod view;

use self::landlock::LandlockReport;
use crate::plan::{Plan, StdinMode};
use crate::policy::{ConfinementMode, Network, Policy};
use crate::sys as sys_net;
pub use error::ConfineError;
pub use refusal::{inet_socket_refused, refusal_hint};
use seccompiler::sock_filter;
use serde::Serialize;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
pub use sys::receive_listener as receive_proxy_listener;

/// What was asked for and what the kernel enforced, for the RunResult.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub mode: ConfinementMode,
    /// The network the run has: the policy's, or `none` where
    /// `loopback` had no network namespace under "best-effort".
    pub network: Network,
    /// The child is PID 1's child in its own PID namespace: the whole tree
    /// dies with the run.
    pub pid_namespace: bool,
    /// The namespaces were created inside a new user namespace (the caller
    /// lacks CAP_SYS_ADMIN), with the caller's uid and gid mapped 1:1.
    pub user_namespace: bool,
    /// The run has its own network namespace: no interface but loopback,
    /// which is up with network = "loopback" and down otherwise.
    pub network_namespace: bool,
    /// The run sees a private root holding only its scopes (`view`):
    /// nothing outside the write scopes can change, no socket outside the
    /// scopes can be reached.
    pub mount_view: bool,
    /// A fresh workspace is a tmpfs of this many bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_bytes: Option<u64>,
    /// `/tmp` is the run's own (the mount view): what it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_tmp: Option<String>,
    /// Which mechanism holds each guarantee of the security model.
    pub guarantees: Guarantees,
    pub no_new_privs: bool,
    pub landlock: LandlockReport,
    pub seccomp: SeccompReport,
    /// Every capability dropped from the effective, permitted, inheritable
    /// and bounding sets (matters when agent-rsh runs as root).
    pub capabilities_dropped: bool,
    pub limits: LimitsReport,
    /// What bounds the memory and the tasks of the whole run.
    pub resources: ResourcesReport,
    /// Layers the simulation seam took away (tests only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub simulated_missing: Vec<&'static str>,
}

/// The mechanism behind each guarantee, as this run holds it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Guarantees {
    /// Only allowlisted programs and scopes.exec execute.
    pub exec: String,
    /// Nothing outside the workspace and write scopes changes.
    pub files: String,
    /// Modes, owners, times and extended attributes outside the write
    /// scopes.
    pub metadata: String,
    /// Sockets outside the scopes.
    pub sockets: String,
    /// No network unless the policy allows it (`none`, `loopback`).
    pub network: String,
    /// No descendant outlives the run.
    pub tree: String,
    /// One run cannot take the host: memory and tasks of the whole run.
    pub resources: String,
    /// The run sees and leaves behind no SysV IPC object or POSIX message
    /// queue of the host.
    pub ipc: String,
    /// No process outside the run (agent-rsh and the guardian included)
    /// gets a signal, rlimit, priority or scheduling change from it.
    pub other_processes: String,
    /// Every process of the run reads its own `/proc/self`, and nothing of
    /// a process outside the run.
    pub proc_self: String,
    /// What runs the `/bin/sh` (bash, dash) a program of the run starts.
    pub shells: String,
    /// What `/tmp` is inside the run: its own (the mount view), or the
    /// host's, which it may not write.
    pub tmp: String,
}

/// What bounds the memory and the tasks (processes and threads) of the
/// whole run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesReport {
    /// `cgroup v2` or `cgroup v1 memory+pids` (the run's own cgroup:
    /// `limits.memory_bytes` and `limits.processes` for the whole run);
    /// `rlimits` (no cgroup: RLIMIT_NPROC counts the caller's tasks,
    /// RLIMIT_AS bounds each process); `enclosing cgroup` (root without a
    /// run cgroup, whose tasks RLIMIT_NPROC does not count: the `pids.max`
    /// of a cgroup agent-rsh runs in, a container's, bounds them);
    /// `address space only` (root, best-effort or off, nothing bounding
    /// its tasks).
    pub mechanism: &'static str,
    /// The run's cgroup: bytes of memory the whole run may use (absent:
    /// not bounded by a cgroup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The run's cgroup: tasks the whole run may have at once (absent: not
    /// bounded by a cgroup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// The run's cgroup: swap held at zero, so it does not extend the
    /// memory bound (false where the kernel does not account swap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_bounded: Option<bool>,
    /// The run cgroup's directories (removed after the run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// After the run: processes the OOM killer ended at the memory bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_kills: Option<u64>,
    /// After the run: forks and clones refused at the task bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids_refused: Option<u64>,
    /// The run's highest memory use, where the kernel reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
    /// The most tasks the run had at once, where the kernel reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_peak: Option<u64>,
    /// `enclosing cgroup`: its `pids.max` and directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enclosing_pids_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enclosing_cgroup: Option<String>,
    /// Why the run has no cgroup of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `ResourcesReport::mechanism` values besides the cgroup versions.
pub const RESOURCES_RLIMITS: &str = "rlimits";
pub const RESOURCES_ENCLOSING: &str = "enclosing cgroup";
pub const RESOURCES_AS_ONLY: &str = "address space only";

impl ResourcesReport {
    fn of_cgroup(cg: &cgroup::RunCgroup) -> ResourcesReport {
        ResourcesReport {
            mechanism: match cg.mechanism() {
                cgroup::Mechanism::V2 => "cgroup v2",
                cgroup::Mechanism::V1 => "cgroup v1 memory+pids",
            },
            memory_bytes: cg.report().memory_bytes,
            processes: cg.report().processes,
            swap_bounded: Some(cg.report().swap_bounded),
            paths: cg.report().paths.clone(),
            oom_kills: None,
            pids_refused: None,
            memory_peak_bytes: None,
            tasks_peak: None,
            enclosing_pids_max: None,
            enclosing_cgroup: None,
            reason: None,
        }
    }
}

/// Whether the kernel exempts the caller's processes from RLIMIT_NPROC:
/// its real uid is root of the initial user namespace. A root whose user
/// namespace maps it to another uid (a rootless container) is counted like
/// any account. When the map cannot be read, exempt is assumed.
pub fn nproc_exempt() -> bool {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    uid == 0
        && nproc_exempt_by_map(&std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default())
}

/// Root is exempt when its uid map sends 0 to 0 outside (or cannot be
/// read: exempt is the safe assumption).
fn nproc_exempt_by_map(map: &str) -> bool {
    let outside = map.lines().find_map(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        (f.len() == 3 && f[0] == 0 && f[2] > 0).then_some(f[1])
    });
    outside.is_none_or(|o| o == 0)
}

/// The run's bounds when it gets no cgroup of its own (`why`, caused by
/// `cause` when creating it failed): rlimits for an account RLIMIT_NPROC
/// counts; for root, the `pids.max` of a cgroup it runs in, or nothing,
/// which "required" refuses.
fn resources_without_cgroup(
    mode: ConfinementMode,
    why: String,
    cause: Option<&cgroup::CgroupError>,
    warnings: &mut Vec<String>,
) -> Result<ResourcesReport, ConfineError> {
    let exempt = nproc_exempt();
    let enclosing = if exempt {
        cgroup::enclosing_pids_max()
    } else {
        None
    };
    fallback(mode, exempt, enclosing, why, cause, warnings)
}

/// What the policy's whole-run bounds become without a cgroup of the run's
/// own, for the warnings: `limits.memory_bytes` bounds nothing then (only
/// RLIMIT_AS, per process), and root's tasks are held by an enclosing
/// cgroup's `pids.max` rather than `limits.processes`. None where nothing
/// is lost, or where the best-effort warning of `fallback` says it already.
fn whole_run_warnings(
    mode: ConfinementMode,
    memory_bytes: u64,
    processes: u64,
    address_space_bytes: Option<u64>,
    r: &ResourcesReport,
) -> Vec<String> {
    let mut w = Vec::new();
    if r.mechanism == RESOURCES_AS_ONLY && mode == ConfinementMode::BestEffort {
        return w;
    }
    let why = r.reason.as_deref().unwrap_or("");
    if memory_bytes > 0 {
        w.push(match address_space_bytes {
            Some(a) => format!(
                "limits.memory_bytes ({memory_bytes} bytes) is not enforced: memory is bounded per process by RLIMIT_AS (limits.address_space_bytes, {a} bytes), not for the whole run: no writable cgroup ({why})"
            ),
            None => format!(
                "limits.memory_bytes ({memory_bytes} bytes) is not enforced: memory is bounded neither per process (limits.address_space_bytes = 0) nor for the whole run: no writable cgroup ({why})"
            ),
        });
    }
    if processes > 0 && r.mechanism == RESOURCES_ENCLOSING {
        w.push(format!(
            "limits.processes ({processes}) is not enforced: root's tasks are not counted by RLIMIT_NPROC, and without a writable cgroup of the run's own they are held only by the pids.max ({}) of {}, shared with everything in it ({why})",
            r.enclosing_pids_max.unwrap_or(0),
            r.enclosing_cgroup.as_deref().unwrap_or("the enclosing cgroup"),
        ));
    }
    w
}

/// The decision of `resources_without_cgroup`, from what it found: whether
/// RLIMIT_NPROC exempts the caller, and the enclosing cgroup's bound.
fn fallback(
    mode: ConfinementMode,
    nproc_exempt: bool,
    enclosing: Option<(u64, std::path::PathBuf)>,
    why: String,
    cause: Option<&cgroup::CgroupError>,
    warnings: &mut Vec<String>,
) -> Result<ResourcesReport, ConfineError> {
    let mut r = ResourcesReport {
        mechanism: RESOURCES_RLIMITS,
        memory_bytes: None,
        processes: None,
        swap_bounded: None,
        paths: Vec::new(),
        oom_kills: None,
        pids_refused: None,
        memory_peak_bytes: None,
        tasks_peak: None,
        enclosing_pids_max: None,
        enclosing_cgroup: None,
        reason: Some(why),
    };
    if !nproc_exempt {
        return Ok(r);
    }
    if let Some((max, dir)) = enclosing {
        r.mechanism = RESOURCES_ENCLOSING;
        r.enclosing_pids_max = Some(max);
        r.enclosing_cgroup = Some(dir.display().to_string());
        return Ok(r);
    }
    r.mechanism = RESOURCES_AS_ONLY;
    let why = r.reason.as_deref().unwrap_or_default();
    match mode {
        // The cgroup layer's own advice (for an account) gives way to the
        // one for root, unless it names the closer cause.
        ConfinementMode::Required => Err(ConfineError::ResourcesUnbounded {
            why: cause.map_or_else(|| why.to_string(), |c| c.problem()),
            fix: cause
                .is_some_and(|c| c.read_only())
                .then_some(cgroup::READ_ONLY_FIX),
        }),
        ConfinementMode::BestEffort => {
            warnings.push(format!(
                "limits.processes and limits.memory_bytes are not enforced for the whole run: the run's cgroup is not available ({why}) and root's processes are not bound by RLIMIT_NPROC; only RLIMIT_AS bounds each process (confinement = \"best-effort\")"
            ));
            Ok(r)
        }
        ConfinementMode::Off => Ok(r),
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeccompReport {
    pub enforced: bool,
    /// Socket families the child may create.
    pub socket_families: Vec<&'static str>,
    pub denied: Vec<&'static str>,
    /// The highest system call number the filter knows; every number
    /// above it fails with ENOSYS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_syscall_max: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitsReport {
    pub cpu_seconds: u64,
    pub address_space_bytes: Option<u64>,
    pub file_size_bytes: u64,
    pub open_files: u64,
    pub processes: u64,
    pub core_bytes: u64,
}

/// Where in the child's setup a failure happened; reported by the child to
/// the parent over the exec-error pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    Stdio = 1,
    Chdir = 2,
    Rlimit = 3,
    NoNewPrivs = 4,
    Landlock = 5,
    Capabilities = 6,
    Seccomp = 7,
    UserNamespace = 8,
    Exec = 9,
    MountView = 10,
    Cgroup = 11,
    Loopback = 12,
    ProxyListener = 13,
}

impl Stage {
    pub fn from_u8(v: u8) -> Option<Stage> {
        Some(match v {
            1 => Stage::Stdio,
            2 => Stage::Chdir,
            3 => Stage::Rlimit,
            4 => Stage::NoNewPrivs,
            5 => Stage::Landlock,
            6 => Stage::Capabilities,
            7 => Stage::Seccomp,
            8 => Stage::UserNamespace,
            9 => Stage::Exec,
            10 => Stage::MountView,
            11 => Stage::Cgroup,
            12 => Stage::Loopback,
            13 => Stage::ProxyListener,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stage::Stdio => "setting up standard streams",
            Stage::Chdir => "entering the working directory",
            Stage::Rlimit => "setting resource limits",
            Stage::NoNewPrivs => "setting no_new_privs",
            Stage::Landlock => "enforcing the Landlock rule set",
            Stage::Capabilities => "dropping capabilities",
            Stage::Seccomp => "installing the seccomp filter",
            Stage::UserNamespace => {
                "mapping the caller's uid and gid into the user namespace (uid 0 without CAP_SYS_ADMIN also needs CAP_SETFCAP to be mapped)"
            }
            Stage::Exec => "executing the program",
            Stage::MountView => "building the run's private mount view",
            Stage::Cgroup => "joining the run's cgroup",
            Stage::Loopback => {
                "bringing up the loopback interface in the run's network namespace (network = \"loopback\")"
            }
            Stage::ProxyListener => {
                "listening for the proxy in the run's network namespace (network = { allow = [...] })"
            }
        }
    }
}

/// A confinement ready to apply in a forked child.
pub struct Confinement {
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    no_new_privs: bool,
    landlock: Option<OwnedFd>,
    drop_caps: bool,
    seccomp: Option<&'static [sock_filter]>,
    /// The filter for a run without its mount view (metadata calls and
    /// UNIX sockets refused everywhere).
    seccomp_without_view: Option<&'static [sock_filter]>,
    /// Which variant `seccomp` and `seccomp_without_view` are: the network
    /// setting, and whether they are for a guardian without a PID (and
    /// IPC) namespace.
    seccomp_variant: seccomp::Variant,
    /// The private mount view, while it is wanted.
    view: Option<view::View>,
    /// Ask exec for a PID namespace (the tree dies with its init).
    pub want_pid_namespace: bool,
    /// Create the namespaces inside a new user namespace, with these maps.
    user_namespace: Option<userns::Maps>,
    want_net_namespace: bool,
    /// network = "loopback" (or a domain list): the guardian brings `lo`
    /// up in the run's network namespace, and the seccomp filter allows
    /// inet sockets.
    loopback: bool,
    /// A domain list: the guardian listens at `PROXY_PORT` in the run's
    /// namespace and hands the socket to agent-rsh, which serves it.
    proxy: Option<crate::proxy::Grant>,
    /// network.commands, a program run directly: its connect layer.
    net_layer: Option<OwnedFd>,
    /// network = "loopback" in a persistent workspace: the namespace its
    /// runs and jobs share (`netshare`).
    shared_net: Option<netshare::Shared>,
    /// The run's cgroup, created before the guardian is cloned; removed by
    /// `finish_cgroup` after the run (or on drop, on every other path).
    cgroup: Option<cgroup::RunCgroup>,
    warnings: Vec<String>,
    /// `LOADER_GAP_WARNING` is in `warnings` already.
    loader_gap_noted: bool,
    report: Report,
}

/// The exec guarantee without the mount view: what it does not hold.
/// Landlock governs execve, not mmap; only the view's noexec mounts keep
/// the loader from mapping a file the run wrote.
/// What the exec guarantee leaves with every mechanism in place: the loader
/// maps any ELF file it may read.
pub const READ_SCOPE_LOADER_NOTE: &str = "; the ELF loader can still run an ELF program that scopes.read holds (ld.so FILE), under this confinement: the default read scopes hold libraries and data, and the helper programs packaged beside libraries (gettext's, glib's, gstreamer's under /usr/lib/<arch>-linux-gnu); an interpreter with a C interface (ctypes) can run machine code it writes into anonymous memory, also under this confinement";

pub const LOADER_GAP_GUARANTEE: &str = "; NOT held for files the run writes: without the mount view the workspace and write scopes are not noexec, so the loader (ld.so ./file, dlopen, ctypes) can map an ELF written there and run it, under the same confinement";

/// The warning of a run without the mount view, about the same gap.
pub const LOADER_GAP_WARNING: &str = "the run has no private mount view, so the workspace and the write scopes are not mounted noexec: an ELF file written there can be mapped by the loader (`ld.so ./file`, dlopen, python ctypes) and run, under the run's confinement, although it is not an allowlisted program (Landlock governs execve, not mmap)";

/// Whether the kernel will let a script's interpreter execute: it is one
/// of the allowed programs (compared as the canonical files Landlock
/// grants, so `/usr/bin/python3` matches the `python3.11` it links to) or
/// lies under `scopes.exec`.
fn interpreter_executes(
    interp: &std::path::Path,
    allowed: &landlock::Programs,
    exec: &[std::path::PathBuf],
) -> bool {
    let real = std::fs::canonicalize(interp).unwrap_or_else(|_| interp.to_path_buf());
    allowed.programs.contains(&real)
        || exec
            .iter()
            .any(|e| interp.starts_with(e) || real.starts_with(e))
}

/// network = "loopback" without a network namespace (`why` it is
/// missing): "required" fails closed; "best-effort" warns that the run
/// has no network instead.
fn loopback_missing(
    mode: ConfinementMode,
    warnings: &mut Vec<String>,
    why: &str,
    level: Network,
) -> Result<(), ConfineError> {
    let (layer, setting, lost) = if level == Network::Domains {
        (
            "a network namespace (network = { allow = [...] })",
            "network = { allow = [...] }",
            "the proxy cannot be made the run's only way out",
        )
    } else {
        (
            "a network namespace (network = \"loopback\")",
            "network = \"loopback\"",
            "127.0.0.1 and ::1 cannot be told apart from the host's network",
        )
    };
    match mode {
        ConfinementMode::Required => Err(ConfineError::Required {
            layer,
            why: format!("{why}, and without one {lost} (network = \"none\" runs without it)"),
        }),
        _ => {
            warnings.push(format!(
                "{setting} is not enforced: the run has no network namespace ({why}), so it runs with no network at all, as network = \"none\" (confinement = \"best-effort\")"
            ));
            Ok(())
        }
    }
}

/// Fails closed under "required", records a warning under "best-effort".
fn missing(
    mode: ConfinementMode,
    warnings: &mut Vec<String>,
    what: &'static str,
    why: &str,
) -> Result<(), ConfineError> {
    match mode {
        ConfinementMode::Required => Err(ConfineError::Required {
            layer: what,
            why: why.to_string(),
        }),
        _ => {
            warnings.push(format!(
                "{what} is not enforced: {why} (confinement = \"best-effort\")"
            ));
            Ok(())
        }
    }
}

impl Confinement {
    /// Builds everything the child will apply. Fails (closed) when the
    /// policy requires a layer this kernel cannot provide.
    /// `fresh`: the workspace is new for this run (it becomes a tmpfs of
    /// `limits.workspace_bytes` in the mount view).
    /// `workspace_id`: the device and inode of a persistent workspace as it
    /// was opened and checked; the Landlock rule and the mount view's bind
    /// are made on that directory or not at all.
    pub fn prepare(
        policy: &Policy,
        plan: &Plan,
        workspace: &Path,
        workspace_id: Option<(u64, u64)>,
        fresh: bool,
        tmp: Option<&(PathBuf, (u64, u64))>,
    ) -> Result<Confinement, ConfineError> {
        Confinement::prepare_for(
            policy,
            &plan.program,
            plan.timeout,
            plan.stdin == StdinMode::Inherit && crate::sys::stdin_is_terminal(),
            workspace,
            workspace_id,
            fresh,
            tmp,
        )
    }

    /// `prepare` from the parts of a plan it uses: the program, the
    /// deadline, whether stdin is relayed through a pty (`/dev/tty` is then
    /// the command's own terminal). `tmp`: the directory (and its device
    /// and inode) that is `/tmp` in the mount view, a persistent
    /// workspace's (`workspace::private_tmp`); without it `/tmp` is a tmpfs
    /// of the run's own (`Policy::private_tmp` says whether either is made).
    #[allow(clippy::too_many_arguments)]
    pub fn prepare_for(
        policy: &Policy,
        program: &Path,
        timeout: std::time::Duration,
        tty: bool,
        workspace: &Path,
        workspace_id: Option<(u64, u64)>,
        fresh: bool,
        tmp: Option<&(PathBuf, (u64, u64))>,
    ) -> Result<Confinement, ConfineError> {
        let l = &policy.limits;
        let cpu = if l.cpu_seconds > 0 {
            l.cpu_seconds
        } else {
            // CPU time cannot exceed wall time per core; one extra second so
            // the deadline, not RLIMIT_CPU, is what normally ends a run.
            timeout.as_secs() * 2 + 1
        };
        let mut rlimits = vec![
            (libc::RLIMIT_CPU, cpu),
            (libc::RLIMIT_FSIZE, l.file_size_bytes),
            (libc::RLIMIT_NOFILE, l.open_files),
            (libc::RLIMIT_CORE, 0),
        ];
        // limits.processes = 0: not bounded by agent-rsh (no pids.max
        // either), as 0 means for the other byte limits; RLIMIT_NPROC = 0
        // would instead refuse an account's every fork while root, whom
        // it does not bind, ran unbounded.
        if l.processes > 0 {
            rlimits.push((libc::RLIMIT_NPROC, l.processes));
        }
        if l.address_space_bytes > 0 {
            rlimits.push((libc::RLIMIT_AS, l.address_space_bytes));
        }
        let mode = policy.confinement;
        let off = mode == ConfinementMode::Off;
        let kernel = probe::kernel();
        let mut warnings = Vec::new();
        // network = "loopback" is the run's own network namespace with `lo`
        // up: inet sockets are allowed because only 127.0.0.1 and ::1 exist
        // there. Without a namespace loopback cannot be told from the
        // host's network: "required" refuses, "best-effort" runs as "none".
        let mut network = if off {
            Network::Allow
        } else {
            policy.network.level
        };
        if matches!(network, Network::Loopback | Network::Domains) && !kernel.netns {
            let why = if kernel.simulated.contains(&"netns") {
                format!("simulated by {}", probe::SIMULATE_ENV)
            } else {
                "the kernel refuses one".to_string()
            };
            loopback_missing(mode, &mut warnings, &why, network)?;
            network = Network::None;
        }
        // network.commands: a program run directly gets its Landlock layer
        // here; agent-rsh's interpreter adds one before each command it
        // executes (`script`), so it gets none itself.
        let mut net_layer = None;
        if network == Network::Domains && policy.network.per_command() {
            let port = policy
                .network
                .grants_program(&policy.commands.search_path, program)
                .then_some(crate::policy::PROXY_PORT);
            match sys_net::connect_layer(port)
                .map_err(|e| ConfineError::LandlockRuleset { why: e.to_string() })?
            {
                Some(fd) => {
                    if *program != crate::script::interpreter_program() {
                        net_layer = Some(fd);
                    }
                }
                None => missing(
                    mode,
                    &mut warnings,
                    "Landlock TCP rules (network.commands)",
                    &format!(
                        "this kernel's Landlock ABI is {} and TCP rules need 4 (Linux 6.7): every command of the run may reach the proxy",
                        kernel.landlock_abi
                    ),
                )?,
            }
        }
        let network_allowed = network != Network::None;

        let mut landlock_report = LandlockReport {
            abi: kernel.landlock_abi,
            ..Default::default()
        };
        let mut landlock = None;
        let allowed = landlock::allowed_programs(policy);
        // commands.workspace: the project's own programs execute, so the
        // workspace is an exec scope too.
        let mut exec_scopes = policy.scopes.exec.clone();
        if policy.commands.workspace && !off {
            exec_scopes.push(workspace.to_path_buf());
        }
        // Compound syntax: the shells of the mount view are agent-rsh's
        // interpreter (nested shells: make's, npm's, git's, Python's).
        // Not from a place the run could write (as the interpreter itself).
        let shell_binary = (!off && policy.syntax == crate::policy::Syntax::Compound)
            .then(crate::script::interpreter_program)
            .filter(|b| {
                !b.starts_with(workspace) && !policy.scopes.write.iter().any(|w| b.starts_with(w))
            });
        // A persistent workspace's private /tmp: Landlock follows a path
        // up through mounts, not through the directory a bind was made
        // of, so the state directory's rule does not reach it at /tmp.
        let mut landlock_write = policy.scopes.write.clone();
        if let Some((dir, _)) = tmp.filter(|_| policy.private_tmp()) {
            landlock_write.push(dir.clone());
        }
        if off {
            landlock_report.reason = Some("confinement = \"off\"".into());
        } else if kernel.landlock_abi == 0 {
            let why = if kernel.simulated.contains(&"landlock") {
                format!("simulated by {}", probe::SIMULATE_ENV)
            } else {
                "this kernel has no Landlock (Linux 5.13+ with landlock in the lsm= boot list)"
                    .to_string()
            };
            missing(mode, &mut warnings, "Landlock", &why)?;
            landlock_report.reason = Some(why);
        } else {
            let inputs = landlock::Inputs {
                program,
                allowed: &allowed,
                workspace,
                workspace_id,
                read: &policy.scopes.read,
                write: &landlock_write,
                exec: &exec_scopes,
                network_allowed,
                tty,
                shell: shell_binary.as_deref(),
            };
            let built = landlock::build(&inputs, kernel.landlock_abi)?;
            landlock = Some(built.fd);
            landlock_report = built.report;
            if let Some(interp) = landlock::script_interpreter(program)
                && !interpreter_executes(&interp, &allowed, &policy.scopes.exec)
            {
                warnings.push(format!(
                    "{} is a script run by {}, which this policy does not allow to execute; the kernel will refuse it (add {} to scopes.exec to allow that interpreter for the whole run)",
                    program.display(),
                    interp.display(),
                    interp.display()
                ));
            }
        }

        let mut seccomp_report = SeccompReport::default();
        let mut seccomp = None;
        let mut seccomp_without_view = None;
        if off {
            seccomp_report.reason = Some("confinement = \"off\"".into());
        } else if !kernel.seccomp {
            let why = if kernel.simulated.contains(&"seccomp") {
                format!("simulated by {}", probe::SIMULATE_ENV)
            } else {
                "this kernel has no seccomp filter mode".to_string()
            };
            missing(mode, &mut warnings, "seccomp", &why)?;
            seccomp_report.reason = Some(why);
        } else {
            let variant = |without_view| seccomp::Variant {
                network_allowed,
                without_view,
                without_pid_ns: false,
            };
            match seccomp::program(variant(false))
                .and_then(|p| seccomp::program(variant(true)).map(|q| (p, q)))
            {
                Ok((p, q)) => {
                    seccomp = Some(p);
                    seccomp_without_view = Some(q);
                    seccomp_report.enforced = true;
                    seccomp_report.denied = seccomp::DENIED_GROUPS.to_vec();
                    seccomp_report.known_syscall_max = Some(seccomp::KNOWN_MAX);
                    seccomp_report.socket_families = family_names(variant(false));
                }
                Err(e) => {
                    let why = e.to_string();
                    missing(mode, &mut warnings, "seccomp", &why)?;
                    seccomp_report.reason = Some(why);
                }
            }
        }

        let want_net_namespace = matches!(network, Network::Loopback | Network::Domains)
            || network == Network::None && !off && kernel.netns && policy.network_namespace;
        // The decision: without CAP_SYS_ADMIN the kernel refuses a PID (and
        // network) namespace unless it is created together with a user
        // namespace, so an unprivileged caller asks for one. The guardian
        // maps the caller's own uid and gid 1:1 and drops every capability
        // the new namespace gave it before the command is forked; the
        // command still sets no_new_privs, Landlock and seccomp (which
        // refuses nested namespaces) itself. `userns` says why this keeps
        // the guarantees. With confinement off nothing is added.
        let user_namespace = (!off && !userns::has_cap_sys_admin()).then(userns::Maps::of_caller);
        let view = if off || kernel.simulated.contains(&"mountns") {
            None
        } else {
            let mut programs: Vec<&Path> = allowed.programs.iter().map(|p| p.as_path()).collect();
            programs.extend(allowed.loaders.iter().map(|p| p.as_path()));
            programs.push(program);
            let bytes = policy.limits.workspace_bytes;
            let inputs = view::Inputs {
                read: &policy.scopes.read,
                search_path: &policy.commands.search_path,
                programs,
                links: &allowed.links,
                exec: &exec_scopes,
                write: &policy.scopes.write,
                workspace,
                workspace_id,
                workspace_bytes: (fresh && bytes > 0).then_some(bytes),
                tty,
                shell: match &shell_binary {
                    Some(b) => Some((
                        b.as_path(),
                        shell_job(policy, workspace)?,
                        &policy.commands.allow[..],
                    )),
                    None => None,
                },
                private_tmp: policy.private_tmp().then(|| match tmp {
                    Some((dir, id)) => view::PrivateTmp::Dir(dir.clone(), *id),
                    None => view::PrivateTmp::Tmpfs(bytes),
                }),
            };
            let rule = landlock.as_ref().map(|fd| {
                let exec = if policy.commands.workspace {
                    landlock::EXECUTE
                } else {
                    0
                };
                (
                    fd.as_raw_fd(),
                    landlock::workspace_access(kernel.landlock_abi) | exec,
                )
            });
            Some(view::View::prepare(&inputs, rule)?)
        };
        // The run's cgroup, last: nothing above can fail after it exists
        // (it would be removed on drop anyway).
        let made = if kernel.simulated.contains(&"cgroup") {
            Err(None)
        } else {
            cgroup::RunCgroup::create(l.memory_bytes, l.processes).map_err(Some)
        };
        let (run_cgroup, resources) = match made {
            Ok(cg) => {
                let r = ResourcesReport::of_cgroup(&cg);
                (Some(cg), r)
            }
            Err(cause) => {
                let why = match &cause {
                    Some(e) => e.to_string(),
                    None => format!("simulated by {}", probe::SIMULATE_ENV),
                };
                let r = resources_without_cgroup(mode, why, cause.as_ref(), &mut warnings)?;
                let address_space = (l.address_space_bytes > 0).then_some(l.address_space_bytes);
                warnings.extend(whole_run_warnings(
                    mode,
                    l.memory_bytes,
                    l.processes,
                    address_space,
                    &r,
                ));
                (None, r)
            }
        };
        Ok(Confinement {
            rlimits,
            no_new_privs: true,
            landlock,
            drop_caps: !off,
            seccomp,
            seccomp_without_view,
            seccomp_variant: seccomp::Variant {
                network_allowed,
                without_view: false,
                without_pid_ns: false,
            },
            view,
            // The PID namespace is what makes the tree kill exact, so it is
            // wanted even with confinement off (which then tolerates its
            // absence).
            want_pid_namespace: true,
            user_namespace,
            want_net_namespace,
            loopback: matches!(network, Network::Loopback | Network::Domains),
            proxy: if network == Network::Domains {
                policy.network.grant()
            } else {
                None
            },
            net_layer,
            shared_net: None,
            cgroup: run_cgroup,
            warnings,
            loader_gap_noted: false,
            report: Report {
                mode,
                network: if off { policy.network.level } else { network },
                pid_namespace: false,
                user_namespace: false,
                network_namespace: false,
                mount_view: false,
                workspace_bytes: None,
                private_tmp: None,
                guarantees: Guarantees::default(),
                no_new_privs: true,
                landlock: landlock_report,
                seccomp: seccomp_report,
                capabilities_dropped: !off,
                limits: LimitsReport {
                    cpu_seconds: cpu,
                    address_space_bytes: (l.address_space_bytes > 0)
                        .then_some(l.address_space_bytes),
                    file_size_bytes: l.file_size_bytes,
                    open_files: l.open_files,
                    processes: l.processes,
                    core_bytes: 0,
                },
                resources,
                simulated_missing: kernel.simulated.clone(),
            },
        })
    }

    /// Records what exec obtained for the PID namespace (and with it the
    /// user namespace, which is only ever created together with it).
    pub fn set_pid_namespace(&mut self, on: bool) {
        self.report.pid_namespace = on;
        self.report.user_namespace = on && self.user_namespace.is_some();
    }

    /// The open `cgroup.procs` files the guardian writes to join the run's
    /// cgroup (empty without one).
    pub fn cgroup_join_fds(&self) -> &[RawFd] {
        self.cgroup.as_ref().map_or(&[], |c| c.join_fds())
    }

    /// Whether the run may go on without its cgroup: another mechanism
    /// holds the bounds, or the mode allows running without.
    pub fn may_run_without_cgroup(&self) -> bool {
        self.cgroup.is_some()
            && resources_without_cgroup(self.report.mode, String::new(), None, &mut Vec::new())
                .is_ok()
    }

    /// The guardian could not join the run's cgroup (`why`): run without
    /// it (and remove it) when `may_run_without_cgroup`; returns whether a
    /// retry without the cgroup makes sense.
    pub fn give_up_cgroup(&mut self, why: &str) -> bool {
        if self.cgroup.is_none() {
            return false;
        }
        let mut warnings = Vec::new();
        match resources_without_cgroup(
            self.report.mode,
            format!("joining it failed: {why}"),
            None,
            &mut warnings,
        ) {
            Ok(r) => {
                let cg = self.cgroup.take();
                let memory_bytes = cg.as_ref().and_then(|c| c.report().memory_bytes);
                let processes = cg.as_ref().and_then(|c| c.report().processes);
                drop(cg);
                warnings.extend(whole_run_warnings(
                    self.report.mode,
                    memory_bytes.unwrap_or(0),
                    processes.unwrap_or(0),
                    self.report.limits.address_space_bytes,
                    &r,
                ));
                self.report.resources = r;
                self.warnings.extend(warnings);
                true
            }
            Err(_) => false,
        }
    }

    /// After the run: reads what the run's cgroup counted (OOM kills,
    /// refused forks) into the report, then removes it, killing whatever
    /// is still inside. Returns warnings for the RunResult.
    pub fn finish_cgroup(&mut self) -> Vec<String> {
        let Some(cg) = self.cgroup.take() else {
            return Vec::new();
        };
        let ev = cg.events();
        let mut w = ev.warnings(cg.report());
        self.report.resources.oom_kills = Some(ev.oom_kills);
        self.report.resources.pids_refused = Some(ev.pids_refused);
        self.report.resources.memory_peak_bytes = cg.memory_peak_bytes();
        self.report.resources.tasks_peak = cg.tasks_peak();
        if let Err(e) = cg.remove() {
            w.push(format!(
                "the run's cgroup could not be removed ({e}); a later run of agent-rsh collects it"
            ));
        }
        w
    }

    /// The mount view the guardian should build, if still wanted.
    pub fn view(&self) -> Option<&view::View> {
        self.view.as_ref()
    }

    /// The kernel refused the mount namespace, or the view could not be
    /// built: run without it; the seccomp filter then refuses metadata
    /// changes and UNIX sockets everywhere. Returns whether there was a
    /// view to give up.
    pub fn give_up_view(&mut self, why: &str) -> bool {
        if self.view.take().is_none() {
            return false;
        }
        self.warnings.push(format!(
            "the run has no private mount view ({why}): metadata changes (chmod, chown, utime, xattrs) and UNIX sockets are refused everywhere by seccomp instead"
        ));
        true
    }

    /// The guardian runs without a PID namespace (`why`): noted in the
    /// warnings; the guarantees still hold through the subreaper.
    pub fn note_no_pid_namespace(&mut self, why: &str) {
        if self.report.mode != ConfinementMode::Off {
            self.warnings.push(format!(
                "the run has no PID namespace ({why}): the guardian, a child subreaper, kills the whole tree at the end and when agent-rsh dies; only a guardian that is itself SIGKILLed would leave descendants behind"
            ));
        }
    }

    /// Records how the guardian was set up and which mechanism holds each
    /// guarantee.
    pub fn record_setup(&mut self, pid_ns: bool) {
        self.set_pid_namespace(pid_ns);
        self.set_extra_namespaces();
        let r = &mut self.report;
        let off = r.mode == ConfinementMode::Off;
        r.mount_view = self.view.is_some();
        r.workspace_bytes = self.view.as_ref().and_then(|v| v.workspace_tmpfs);
        r.private_tmp = self.view.as_ref().and_then(|v| v.private_tmp.clone());
        let seccomp = r.seccomp.enforced;
        if seccomp {
            let v = seccomp::Variant {
                without_view: !r.mount_view,
                ..self.seccomp_variant
            };
            r.seccomp.socket_families = family_names(v);
        }
        let none = || "none".to_string();
        if !off && !r.mount_view && r.landlock.enforced && !self.loader_gap_noted {
            self.loader_gap_noted = true;
            self.warnings.push(LOADER_GAP_WARNING.to_string());
        }
        let g = &mut r.guarantees;
        g.exec = match (r.landlock.enforced, seccomp) {
            (true, true) => "landlock (execute rights) + seccomp (no memfd)".into(),
            (true, false) => "landlock (execute rights); memfds not refused".into(),
            _ => none(),
        };
        if r.landlock.enforced {
            g.exec.push_str(if r.mount_view {
                " + noexec workspace and write scopes (mount view)"
            } else {
                LOADER_GAP_GUARANTEE
            });
            g.exec.push_str(READ_SCOPE_LOADER_NOTE);
        }
        g.ipc = match (pid_ns, seccomp) {
            _ if off => none(),
            (true, _) => "ipc namespace of the run (destroyed with it; its segments count against the run's memory)".into(),
            (false, true) => "seccomp (SysV IPC and POSIX message queues refused)".into(),
            (false, false) => none(),
        };
        g.other_processes = match (pid_ns, seccomp) {
            _ if off => none(),
            (true, true) => "pid namespace (no other process visible) + seccomp (the guardian, pid 1, cannot be named)".into(),
            (false, true) if r.landlock.restricts.contains(&"signal") => "seccomp (prlimit64, setpriority, sched_set*, ioprio_set name the caller only) + landlock (no signal out of the run)".into(),
            (false, true) => "seccomp (prlimit64, setpriority, sched_set*, ioprio_set name the caller only); signals to the caller's other processes are NOT refused (Landlock ABI 6 scopes them)".into(),
            (true, false) => "pid namespace; the guardian (pid 1) is not protected".into(),
            (false, false) => none(),
        };
        g.shells = match self.view.as_ref().map(|v| v.shells) {
            _ if off => "the real shells; nothing checked".into(),
            Some(true) => "agent-rsh's interpreter (mount view: /bin/sh, bash and dash are agent-rsh, every command checked)".into(),
            _ if r.landlock.enforced => "the real shells, only where the policy lets them execute (commands.allow, scopes.exec): confined by the kernel, not checked word by word".into(),
            _ => "the real shells where they are installed: not checked word by word".into(),
        };
        g.tmp = match &r.private_tmp {
            _ if off => "the host's /tmp, as the account may use it (confinement = \"off\")".into(),
            Some(what) => format!(
                "private to the workspace (mount view): {what}; the host's /tmp is not reachable"
            ),
            None if r.mount_view => "the host's /tmp, as the policy's scopes name it (a scope covers /tmp, or the workspace is /tmp)".into(),
            None => "the host's /tmp, writable only where the policy's scopes say: the private /tmp needs the mount view (write to $TMPDIR or the workspace instead)".into(),
        };
        g.proc_self = match (r.landlock.enforced, r.mount_view && pid_ns) {
            (false, _) => "not restricted".into(),
            (true, true) => "the mount view's /proc, of the run's own pid namespace, readable whole; landlock keeps the guardian's environment, memory and descriptors out of reach".into(),
            (true, false) => "landlock: the command's first process reads its own /proc/self, the processes it starts do not (the host's /proc: no mount view of the run's own)".into(),
        };
        g.files = match (r.landlock.enforced, r.mount_view) {
            (true, true) => "landlock + read-only mount view".into(),
            (true, false) => "landlock".into(),
            (false, true) => "read-only mount view".into(),
            _ => none(),
        };
        g.metadata = if r.mount_view {
            "read-only mount view".into()
        } else if seccomp {
            "seccomp (metadata calls refused everywhere)".into()
        } else {
            none()
        };
        g.sockets = if r.mount_view {
            "mount view (only the scopes exist)".into()
        } else if seccomp {
            "seccomp (UNIX sockets refused)".into()
        } else {
            none()
        };
        g.network = match r.network {
            _ if off => none(),
            Network::Allow => "allowed by the policy (network = \"allow\")".into(),
            Network::Loopback => {
                "network namespace: loopback only (127.0.0.1, ::1), no other interface; one per persistent workspace, shared by its runs and jobs".into()
            }
            Network::Domains => "network namespace whose one way out is agent-rsh's proxy: the hosts of network.allow only (CONNECT host and TLS server name), each connection reported".into(),
            Network::None => {
                let mut by = Vec::new();
                if seccomp && !r.seccomp.socket_families.contains(&"inet") {
                    by.push("seccomp (no inet sockets)");
                }
                if r.landlock.restricts.contains(&"tcp-bind-connect") {
                    by.push("landlock (TCP bind and connect refused)");
                }
                if r.network_namespace {
                    by.push("network namespace (no interface up)");
                }
                if by.is_empty() {
                    none()
                } else {
                    by.join(" + ")
                }
            }
        };
        let cgroup = self.cgroup.is_some();
        g.tree = match (pid_ns, cgroup) {
            (true, false) => "pid namespace".into(),
            (true, true) => "pid namespace + the run's cgroup, emptied at the end".into(),
            (false, true) => {
                "subreaper + the run's cgroup, emptied by agent-rsh at the end (a guardian SIGKILLed together with agent-rsh leaves the tree until a later run's sweep of leftover cgroups kills it)".into()
            }
            (false, false) if off => "process group + subreaper".into(),
            (false, false) => {
                "subreaper (a guardian that is itself SIGKILLed leaves the tree)".into()
            }
        };
        let res = &r.resources;
        g.resources = match res.mechanism {
            RESOURCES_RLIMITS if r.limits.processes == 0 => {
                "rlimits: RLIMIT_AS (per process) only; tasks not bounded (limits.processes = 0); no cgroup of its own".into()
            }
            RESOURCES_RLIMITS => format!(
                "rlimits: RLIMIT_NPROC ({}) + RLIMIT_AS (per process); no cgroup of its own",
                if r.user_namespace {
                    "the caller's tasks in the run's user namespace"
                } else {
                    "every task of the caller's uid"
                }
            ),
            RESOURCES_ENCLOSING => format!(
                "the enclosing cgroup: pids.max {} of {} (shared with everything in it) + RLIMIT_AS (per process)",
                res.enclosing_pids_max.unwrap_or(0),
                res.enclosing_cgroup.as_deref().unwrap_or("?")
            ),
            RESOURCES_AS_ONLY => {
                "RLIMIT_AS (per process) only: root's tasks are not bounded".into()
            }
            cg => match (res.memory_bytes, res.processes) {
                (Some(_), Some(_)) => {
                    format!("{cg}: memory and tasks of the whole run, root's included")
                }
                (None, Some(_)) => format!(
                    "{cg}: tasks of the whole run, root's included; memory not bounded (limits.memory_bytes = 0)"
                ),
                (Some(_), None) => format!(
                    "{cg}: memory of the whole run; tasks not bounded (limits.processes = 0)"
                ),
                _ => format!("{cg}: no bound set (limits.memory_bytes and limits.processes = 0)"),
            },
        };
    }

    /// The user namespace the guardian is created in, when the caller needs
    /// one for its PID namespace. `None` when the caller has CAP_SYS_ADMIN,
    /// with confinement off, or when the simulation seam took user
    /// namespaces away (the clone then fails as on a kernel that refuses).
    pub fn user_namespace(&self) -> Option<&userns::Maps> {
        if probe::kernel().simulated.contains(&"userns") {
            return None;
        }
        self.user_namespace.as_ref()
    }

    /// Whether the caller needs a user namespace for its PID namespace.
    pub fn needs_user_namespace(&self) -> bool {
        self.user_namespace.is_some()
    }

    /// Namespace flags exec adds to the guardian's clone.
    pub fn extra_clone_flags(&self) -> libc::c_ulong {
        if self.want_net_namespace {
            libc::CLONE_NEWNET as libc::c_ulong
        } else {
            0
        }
    }

    /// The kernel refused the extra namespaces (`why`): run without them
    /// (the seccomp socket filter still holds). Returns whether there was
    /// anything to give up, i.e. whether a retry makes sense. With
    /// network = "loopback" the namespace is what keeps the run off the
    /// host's network: "required" refuses (the error), "best-effort" runs
    /// as network = "none" (seccomp refuses inet sockets) with a warning.
    pub fn give_up_extra_namespaces(&mut self, why: &str) -> Result<bool, ConfineError> {
        if !self.want_net_namespace {
            return Ok(false);
        }
        if self.loopback {
            loopback_missing(
                self.report.mode,
                &mut self.warnings,
                why,
                self.report.network,
            )?;
            self.loopback = false;
            self.proxy = None;
            self.net_layer = None;
            self.report.network = Network::None;
            self.seccomp_variant.network_allowed = false;
            let variant = |without_view| seccomp::Variant {
                without_view,
                ..self.seccomp_variant
            };
            if self.seccomp.is_none() {
                self.warnings.push(
                    "without seccomp nothing refuses inet sockets either: the run can reach the host's network".into(),
                );
            } else {
                self.seccomp = seccomp::program(variant(false)).ok();
                self.seccomp_without_view = seccomp::program(variant(true)).ok();
                self.report.seccomp.socket_families = family_names(variant(false));
                if self.seccomp.is_none() || self.seccomp_without_view.is_none() {
                    return Err(ConfineError::SeccompCompile {
                        why: "the filter without inet sockets".into(),
                    });
                }
            }
        }
        self.want_net_namespace = false;
        Ok(true)
    }

    /// Chooses the seccomp filters for a guardian with or without its PID
    /// (and IPC) namespace; exec calls this before each clone it tries.
    /// Without the namespace, the filters refuse SysV IPC and POSIX
    /// message queues (the host's) and calls aimed at any process but the
    /// caller itself.
    pub fn select_seccomp(&mut self, pid_ns: bool) -> Result<(), ConfineError> {
        if self.seccomp.is_none() || self.seccomp_variant.without_pid_ns != pid_ns {
            return Ok(());
        }
        self.seccomp_variant.without_pid_ns = !pid_ns;
        let v = self.seccomp_variant;
        self.seccomp = Some(seccomp::program(seccomp::Variant {
            without_view: false,
            ..v
        })?);
        self.seccomp_without_view = Some(seccomp::program(seccomp::Variant {
            without_view: true,
            ..v
        })?);
        Ok(())
    }

    /// Whether the guardian brings `lo` up in the run's network namespace.
    pub fn loopback_up(&self) -> bool {
        self.loopback && self.want_net_namespace
    }

    /// Whether the guardian makes the proxy's listening socket in the
    /// run's network namespace (a domain list).
    pub fn proxy_listener(&self) -> bool {
        self.proxy.is_some() && self.loopback_up()
    }

    /// What the proxy admits, when the run has one.
    pub fn proxy_grant(&self) -> Option<&crate::proxy::Grant> {
        self.proxy.as_ref().filter(|_| self.loopback_up())
    }

    /// In the guardian, inside the run's network namespace: brings `lo`
    /// up. Raw system calls only.
    pub fn bring_up_loopback(&self) -> Result<(), i32> {
        sys::loopback_up()
    }

    /// In the guardian, after `bring_up_loopback`: the proxy's listener,
    /// sent to agent-rsh over `chan`. Raw system calls only.
    pub fn send_proxy_listener(&self, chan: RawFd) -> Result<(), i32> {
        sys::send_listener(chan, crate::policy::PROXY_PORT)
    }

    /// network = "loopback" in a persistent workspace whose state
    /// directory is `state`: the run joins the network namespace of the
    /// workspace's live runs and jobs, or makes the one later runs join.
    /// Holds the workspace's registry lock until `register_loopback`.
    pub fn share_loopback(&mut self, state: &Path) {
        if !self.loopback_up() || self.proxy.is_some() || self.report.network != Network::Loopback {
            return;
        }
        match netshare::Shared::open(state, self.needs_user_namespace()) {
            Ok(s) => self.shared_net = Some(s),
            Err(e) => self.warnings.push(format!(
                "the runs of this workspace cannot share their loopback ({}: {e}): this run has its own",
                netshare::registry(state).display()
            )),
        }
    }

    /// The namespaces the guardian joins instead of making its network
    /// (and user) namespace.
    pub fn net_join(&self) -> Option<&netshare::Join> {
        self.shared_net
            .as_ref()
            .filter(|_| self.want_net_namespace)
            .and_then(|s| s.join())
    }

    /// Joining the workspace's namespace failed (`why`): the run makes its
    /// own, which later runs join.
    pub fn forget_net_join(&mut self, why: &str) {
        if let Some(s) = &mut self.shared_net {
            s.forget_join();
            self.warnings.push(format!(
                "could not join the loopback of this workspace's other runs ({why}): this run has its own"
            ));
        }
    }

    /// After the guardian started in a network namespace of its own or
    /// joined: later runs of the workspace find it.
    pub fn register_loopback(&mut self, guardian: i32) {
        match &mut self.shared_net {
            Some(s) if self.want_net_namespace => s.register(guardian),
            _ => self.shared_net = None,
        }
    }

    /// Records that the guardian was created with `extra_clone_flags`.
    pub fn set_extra_namespaces(&mut self) {
        self.report.network_namespace = self.want_net_namespace;
    }

    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Warnings about layers best-effort mode could not enforce.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// In the forked child, just before exec. Raw system calls only.
    /// `own_proc`: `/proc` is the mount view's, of the run's own PID
    /// namespace, so all of it may be read (see `landlock_in_child`).
    pub fn apply_in_child(&self, with_view: bool, own_proc: bool) -> Result<(), (Stage, i32)> {
        for &(res, val) in &self.rlimits {
            let lim = libc::rlimit {
                rlim_cur: val,
                rlim_max: val,
            };
            // SAFETY: setrlimit with a valid pointer to a stack value.
            if unsafe { libc::setrlimit(res, &lim) } != 0 {
                return Err((Stage::Rlimit, errno()));
            }
        }
        if self.no_new_privs {
            // SAFETY: prctl with integer arguments.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err((Stage::NoNewPrivs, errno()));
            }
        }
        if let Some(fd) = &self.landlock {
            landlock_in_child(fd.as_raw_fd(), own_proc).map_err(|e| (Stage::Landlock, e))?;
        }
        if let Some(fd) = &self.net_layer {
            sys_net::restrict_self(fd.as_raw_fd()).map_err(|e| (Stage::Landlock, e))?;
        }
        if self.drop_caps {
            sys::drop_capabilities().map_err(|e| (Stage::Capabilities, e))?;
        }
        let filter = if with_view {
            self.seccomp
        } else {
            self.seccomp_without_view
        };
        if let Some(prog) = filter {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: the kernel copies the program from live memory.
            if unsafe {
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const libc::sock_fprog,
                    0,
                    0,
                )
            } != 0
            {
                return Err((Stage::Seccomp, errno()));
            }
        }
        Ok(())
    }
}

/// Adds /proc and restricts the calling thread with the rule set.
///
/// A Landlock rule names an inode, and `/proc/self` resolves to this
/// process's `/proc/PID`: a rule on it would let no other process of the
/// run read its own. So where `/proc` is the mount view's, a proc of the
/// run's own PID namespace (`own_proc`), all of it is readable: it holds
/// the run's processes and its init, the guardian, whose environment,
/// memory, descriptors and maps Landlock keeps from the run (a sandboxed
/// process cannot ptrace, nor read the ptrace-guarded files of, a process
/// outside its domain). Otherwise `/proc` is the host's, and only this
/// process's own directory is granted (opened here, so it names this
/// process): its children cannot read their own `/proc/self`, which the
/// report says.
fn landlock_in_child(ruleset: RawFd, own_proc: bool) -> Result<(), i32> {
    let path = if own_proc { c"/proc" } else { c"/proc/self" };
    // SAFETY: raw system calls on a NUL-terminated literal.
    unsafe {
        let proc_self = libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if proc_self >= 0 {
            let r = sys::landlock_add_path_rule(ruleset, proc_self, landlock::PROC_SELF_ACCESS);
            libc::close(proc_self);
            r?;
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(errno());
        }
    }
    Ok(())
}

fn family_names(v: seccomp::Variant) -> Vec<&'static str> {
    seccomp::socket_families(v)
        .iter()
        .map(|f| match *f {
            libc::AF_UNIX => "unix",
            libc::AF_INET => "inet",
            _ => "inet6",
        })
        .collect()
}

pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The job of the run's nested shells: its policy and workspace.
fn shell_job(policy: &Policy, workspace: &Path) -> Result<Vec<u8>, ConfineError> {
    let job = crate::script::ShellJob {
        policy: policy.clone(),
        workspace: workspace.to_path_buf(),
    };
    serde_json::to_vec(&job).map_err(|e| ConfineError::ShellJob { why: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_exempt_from_rlimit_nproc_unless_remapped() {
        for (map, exempt) in [
            ("         0          0 4294967295\n", true),
            // A rootless container: uid 0 is 1000 outside.
            ("0 1000 1\n1 100000 65536\n", false),
            ("1 100000 65536\n0 0 1\n", true),
            // Unreadable: assume exempt (the safe side).
            ("", true),
        ] {
            assert_eq!(nproc_exempt_by_map(map), exempt, "{map:?}");
        }
    }

    /// Without a cgroup of the run's own: an account is held by rlimits in
    /// every mode; root by an enclosing pids.max, else "required" refuses
    /// in one line and best-effort warns.
    #[test]
    fn without_a_cgroup_the_fallback_depends_on_who_and_the_mode() {
        use ConfinementMode::*;
        let enclosing = || Some((2048, std::path::PathBuf::from("/sys/fs/cgroup/pids")));
        for mode in [Required, BestEffort, Off] {
            let mut w = Vec::new();
            let r = fallback(mode, false, None, "why".into(), None, &mut w).unwrap();
            assert_eq!((r.mechanism, w.len()), (RESOURCES_RLIMITS, 0), "{mode:?}");
            assert_eq!(r.reason.as_deref(), Some("why"));
            let r = fallback(mode, true, enclosing(), "why".into(), None, &mut w).unwrap();
            assert_eq!((r.mechanism, w.len()), (RESOURCES_ENCLOSING, 0), "{mode:?}");
            assert_eq!(r.enclosing_pids_max, Some(2048));
        }
        let mut w = Vec::new();
        let e = fallback(Required, true, None, "ro".into(), None, &mut w)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        for said in [
            "(ro)",
            "RLIMIT_NPROC",
            "pids.max",
            "--pids-limit",
            "\"best-effort\"",
        ] {
            assert!(e.contains(said), "{said}: {e}");
        }
        let r = fallback(BestEffort, true, None, "ro".into(), None, &mut w).unwrap();
        assert_eq!(r.mechanism, RESOURCES_AS_ONLY);
        assert!(w[0].contains("limits.processes"), "{w:?}");
        let mut w = Vec::new();
        let r = fallback(Off, true, None, "ro".into(), None, &mut w).unwrap();
        assert_eq!((r.mechanism, w.len()), (RESOURCES_AS_ONLY, 0));
    }

    /// Without a cgroup, the whole-run bounds the policy asked for are
    /// named as not enforced, once: memory for everyone, tasks for root
    /// held by an enclosing cgroup; nothing when the policy sets none.
    #[test]
    fn whole_run_bounds_lost_without_a_cgroup_are_named() {
        use ConfinementMode::*;
        let mut w = Vec::new();
        let rl = fallback(Required, false, None, "no cgroup here".into(), None, &mut w).unwrap();
        let got = whole_run_warnings(Required, 1 << 30, 128, Some(16 << 30), &rl);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("limits.memory_bytes (1073741824 bytes) is not enforced: memory is bounded per process by RLIMIT_AS")
                && got[0].contains("not for the whole run: no writable cgroup (no cgroup here)"),
            "{got:?}"
        );
        let got = whole_run_warnings(Off, 1 << 30, 0, None, &rl);
        assert!(got[0].contains("bounded neither per process"), "{got:?}");
        assert!(whole_run_warnings(Required, 0, 128, None, &rl).is_empty());
        let enclosing = Some((2048, std::path::PathBuf::from("/sys/fs/cgroup/pids/x")));
        let en = fallback(Required, true, enclosing, "ro".into(), None, &mut w).unwrap();
        let got = whole_run_warnings(Required, 0, 128, None, &en);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("limits.processes (128) is not enforced")
                && got[0].contains("pids.max (2048) of /sys/fs/cgroup/pids/x"),
            "{got:?}"
        );
        // best-effort root with nothing: fallback's own warning says it.
        let none = fallback(BestEffort, true, None, "ro".into(), None, &mut w).unwrap();
        assert!(whole_run_warnings(BestEffort, 1 << 30, 128, None, &none).is_empty());
    }

    /// The refusal gives its advice once: the cgroup layer's own advice
    /// (written for an account) gives way to root's, and a read-only
    /// cgroup file system names its fix in root's list.
    #[test]
    fn a_refusal_advises_once() {
        let read_only = cgroup::CgroupError::NotPermitted {
            path: "/sys/fs/cgroup/x".into(),
            errno: libc::EROFS,
        };
        let denied = cgroup::CgroupError::NotPermitted {
            path: "/sys/fs/cgroup/x".into(),
            errno: libc::EACCES,
        };
        for (cause, fix) in [
            (&read_only, "give the container a writable cgroup namespace"),
            (&denied, "make a cgroup hierarchy with the memory and pids"),
        ] {
            let reason = cause.to_string();
            let e = fallback(
                ConfinementMode::Required,
                true,
                None,
                reason,
                Some(cause),
                &mut Vec::new(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.starts_with("the run's cgroup is not available (cannot create a cgroup in /sys/fs/cgroup/x: "),
                "{e}"
            );
            assert!(e.contains(fix), "{fix}: {e}");
            for once in [
                "confinement = \"best-effort\"",
                "agent-rsh doctor",
                "delegated",
                "run as root",
            ] {
                assert!(e.matches(once).count() <= 1, "{once}: {e}");
            }
            assert!(!e.contains("run as root"), "{e}");
        }
        let e = ConfineError::Required {
            layer: "Landlock",
            why: "simulated".into(),
        }
        .to_string();
        assert!(
            e.starts_with("Landlock is not available: simulated; "),
            "{e}"
        );
        assert_eq!(e.matches("best-effort").count(), 1, "{e}");
    }
}
