//! The seccomp filter: compiled once per process and network mode, installed
//! last in the child, right before exec. Refused calls fail with EPERM.

use super::ConfineError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Groups of refused system calls, for reports and hints.
pub const DENIED_GROUPS: [&str; 15] = [
    "ptrace and process_vm_*",
    "io_uring",
    "bpf and perf_event_open",
    "keyrings",
    "mount and new mount API",
    "namespaces (unshare, setns, clone with namespace flags, clone3)",
    "kexec and kernel modules",
    "handle-based open, userfaultfd, pidfd_getfd, kcmp",
    "host administration (reboot, swap, clock, hostname, syslog, acct, quotactl, chroot)",
    "terminal input injection (TIOCSTI, TIOCLINUX)",
    "setuid and setgid bits (chmod family)",
    "setuid and setgid bits at creation (open, openat, creat with O_CREAT or O_TMPFILE; mknod, mknodat); openat2 gets ENOSYS",
    "anonymous files (memfd_create, memfd_secret: ENOSYS; the loader could map one executable)",
    "scheduling, priority and resource limits of other processes (prlimit64, setpriority, sched_set*, ioprio_set, process_madvise)",
    "system calls newer than the filter (ENOSYS above the highest number it knows)",
];

/// What a filter is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub network_allowed: bool,
    /// The run has no private mount view: metadata changes (modes, owners,
    /// times, extended attributes) and pathname UNIX sockets cannot be
    /// confined to the scopes by the mount table, so they are refused
    /// everywhere instead.
    pub without_view: bool,
    /// The run has no PID namespace (nor the IPC namespace created with
    /// it): every process of the host is visible, so calls that act on
    /// another process by its id may act only on the caller itself, and
    /// SysV IPC and POSIX message queues (the host's) are refused.
    pub without_pid_ns: bool,
}

impl Variant {
    fn index(self) -> usize {
        self.network_allowed as usize
            | (self.without_view as usize) << 1
            | (self.without_pid_ns as usize) << 2
    }
}

/// The highest system call number the filter knows: `file_setattr`
/// (Linux 6.17) on x86_64 and aarch64, whose tables share every number
/// from 424 up. Every number above it fails with ENOSYS, as on a kernel
/// that lacks it, so a call a newer kernel adds stays closed until this
/// filter has been taught what it does.
pub const KNOWN_MAX: u32 = 469;

/// file_setattr (Linux 6.17): sets the inode flags FS_IOC_FSSETXATTR sets.
const FILE_SETATTR: libc::c_long = 469;
/// open_tree_attr (Linux 6.15): open_tree with mount attributes.
const OPEN_TREE_ATTR: libc::c_long = 467;
/// The ioctls that change an inode's metadata: its flags (immutable,
/// append-only, no-dump, sync, project id: FS_IOC_SETFLAGS and its 32-bit
/// twin, FS_IOC_FSSETXATTR) and its generation number (FS_IOC_SETVERSION,
/// EXT4_IOC_SETVERSION, each in both widths), which also moves its ctime.
const SETFLAGS_IOCTLS: [u64; 7] = [
    0x4008_6602,
    0x4004_6602,
    0x401c_5820,
    0x4008_7602,
    0x4004_7602,
    0x4008_6604,
    0x4004_6604,
];

/// Calls refused in a run without a private mount view: every change of a
/// file's metadata (Landlock does not govern them, and root owns the
/// system's files).
pub const METADATA_CALLS: [libc::c_long; 18] = [
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_chown,
    libc::SYS_fchown,
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
];

/// setxattrat and removexattrat (Linux 6.13) and file_setattr (Linux
/// 6.17), not yet in libc; the numbers are shared by x86_64 and aarch64.
const NEW_METADATA_CALLS: [libc::c_long; 3] = [463, 466, FILE_SETATTR];

/// SysV IPC and POSIX message queues: refused without the run's own IPC
/// namespace, where they would reach the host's segments and queues.
fn ipc_calls() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ];
    v.sort_unstable();
    v
}

/// The filter for a variant; `Err` names why it cannot be built.
pub fn program(v: Variant) -> Result<&'static [sock_filter], ConfineError> {
    static P: [OnceLock<Result<BpfProgram, ConfineError>>; 8] = [const { OnceLock::new() }; 8];
    P[v.index()]
        .get_or_init(|| build(v))
        .as_ref()
        .map(|p| p.as_slice())
        .map_err(Clone::clone)
}

fn cond(arg: u8, op: SeccompCmpOp, v: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).expect("valid seccomp condition")
}

fn build(v: Variant) -> Result<BpfProgram, ConfineError> {
    build_with(v, true)
}

fn build_with(v: Variant, fast: bool) -> Result<BpfProgram, ConfineError> {
    build_at(v, fast, KNOWN_MAX)
}

/// `build_with` for a filter that knows the calls up to `known_max` (the
/// tests lower it to prove, on a real kernel, that a call above it fails).
fn build_at(v: Variant, fast: bool, known_max: u32) -> Result<BpfProgram, ConfineError> {
    let compile = |why: String| ConfineError::SeccompCompile { why };
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| compile(format!("unsupported architecture: {e}")))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let always: &[libc::c_long] = &[
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_userfaultfd,
        libc::SYS_pidfd_getfd,
        libc::SYS_kcmp,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_syslog,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_vhangup,
        libc::SYS_chroot,
        libc::SYS_fanotify_init,
        libc::SYS_process_madvise,
        libc::SYS_process_mrelease,
        OPEN_TREE_ATTR,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_iopl,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_ioperm,
    ];
    for &nr in always {
        rules.insert(nr, Vec::new());
    }
    let ns_flags = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
    ];
    // clone's flags are its first argument on x86_64 and aarch64.
    let clone_rules = ns_flags
        .iter()
        .map(|&f| SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(f as u64), f as u64)]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| compile(e.to_string()))?;
    rules.insert(libc::SYS_clone, clone_rules);
    // Inode flags are metadata: without the view's read-only mounts (which
    // make the ioctls fail with EROFS) they are refused everywhere.
    let setflags: &[u64] = if v.without_view {
        &SETFLAGS_IOCTLS
    } else {
        &[]
    };
    let ioctl_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .chain(setflags)
        .map(|&r| SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, r)]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| compile(e.to_string()))?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    let families = socket_families(v);
    let socket_rule = if families.is_empty() {
        Vec::new()
    } else {
        vec![
            SeccompRule::new(
                families
                    .iter()
                    .map(|&f| cond(0, SeccompCmpOp::Ne, f as u64))
                    .collect(),
            )
            .map_err(|e| compile(e.to_string()))?,
        ]
    };
    rules.insert(libc::SYS_socket, socket_rule);

    // The setuid and setgid bits are never set, in the workspace either
    // (its mount is nosuid too; this also holds without a mount view).
    let mode_arg = [
        (libc::SYS_chmod, 1u8),
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ];
    for (nr, arg) in mode_arg {
        let r = [libc::S_ISUID, libc::S_ISGID]
            .iter()
            .map(|&bit| {
                SeccompRule::new(vec![cond(
                    arg,
                    SeccompCmpOp::MaskedEq(bit as u64),
                    bit as u64,
                )])
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| compile(e.to_string()))?;
        rules.insert(nr, r);
    }
    // Nor at creation: a file created with a mode carrying them would keep
    // them (the kernel strips S_ISGID only for a group the caller is not
    // in, S_ISUID never). open and openat read their mode argument only
    // with O_CREAT or O_TMPFILE in the flags, so only then is it looked at;
    // creat always creates, mknod and mknodat always take a mode. openat2
    // keeps its mode in a struct a filter cannot read: it gets ENOSYS in
    // `prefix`, and the C library falls back to openat.
    let o_creat = libc::O_CREAT as u64;
    // __O_TMPFILE: the kernel reads the mode whenever this bit is set.
    let o_tmpfile = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64;
    let mut create_rules: Vec<(libc::c_long, Option<u8>, u8)> =
        vec![(libc::SYS_openat, Some(2), 3), (libc::SYS_mknodat, None, 2)];
    #[cfg(target_arch = "x86_64")]
    create_rules.extend([
        (libc::SYS_open, Some(1), 2),
        (libc::SYS_creat, None, 1),
        (libc::SYS_mknod, None, 1),
    ]);
    for (nr, flags_arg, mode_arg) in create_rules {
        let mut r = Vec::new();
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            let mode = cond(mode_arg, SeccompCmpOp::MaskedEq(bit as u64), bit as u64);
            match flags_arg {
                None => r.push(SeccompRule::new(vec![mode])),
                Some(f) => {
                    for flag in [o_creat, o_tmpfile] {
                        r.push(SeccompRule::new(vec![
                            cond(f, SeccompCmpOp::MaskedEq(flag), flag),
                            mode.clone(),
                        ]));
                    }
                }
            }
        }
        let r = r
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| compile(e.to_string()))?;
        rules.insert(nr, r);
    }
    // Calls that act on another process by its id. In the run's PID
    // namespace every process but its init, the guardian (pid 1), belongs
    // to the run, and PRIO_USER and IOPRIO_WHO_USER reach every process of
    // a uid it sees, the guardian included. Without the namespace every
    // process of the host is visible: only the caller itself (id 0) may
    // be named.
    let rule =
        |conds: Vec<SeccompCondition>| SeccompRule::new(conds).map_err(|e| compile(e.to_string()));
    let pid_first: &[libc::c_long] = &[
        libc::SYS_prlimit64,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_sched_setaffinity,
    ];
    const PRIO_USER: u64 = 2;
    const IOPRIO_WHO_PROCESS: u64 = 1;
    const IOPRIO_WHO_USER: u64 = 3;
    if v.without_pid_ns {
        for &nr in pid_first {
            rules.insert(nr, vec![rule(vec![cond(0, SeccompCmpOp::Ne, 0)])?]);
        }
        // PRIO_PROCESS is 0: only (PRIO_PROCESS, 0) passes.
        rules.insert(
            libc::SYS_setpriority,
            vec![
                rule(vec![cond(0, SeccompCmpOp::Ne, 0)])?,
                rule(vec![cond(1, SeccompCmpOp::Ne, 0)])?,
            ],
        );
        rules.insert(
            libc::SYS_ioprio_set,
            vec![
                rule(vec![cond(0, SeccompCmpOp::Ne, IOPRIO_WHO_PROCESS)])?,
                rule(vec![cond(1, SeccompCmpOp::Ne, 0)])?,
            ],
        );
        for nr in ipc_calls() {
            rules.insert(nr, Vec::new());
        }
    } else {
        for &nr in pid_first {
            rules.insert(nr, vec![rule(vec![cond(0, SeccompCmpOp::Eq, 1)])?]);
        }
        rules.insert(
            libc::SYS_setpriority,
            vec![
                rule(vec![cond(0, SeccompCmpOp::Eq, PRIO_USER)])?,
                rule(vec![cond(1, SeccompCmpOp::Eq, 1)])?,
            ],
        );
        rules.insert(
            libc::SYS_ioprio_set,
            vec![
                rule(vec![cond(0, SeccompCmpOp::Eq, IOPRIO_WHO_USER)])?,
                rule(vec![cond(1, SeccompCmpOp::Eq, 1)])?,
            ],
        );
    }
    if v.without_view {
        for nr in METADATA_CALLS.iter().chain(NEW_METADATA_CALLS.iter()) {
            rules.insert(*nr, Vec::new());
        }
    }

    let denied: Vec<u32> = rules.keys().map(|&nr| nr as u32).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| compile(e.to_string()))?;
    let body: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| compile(e.to_string()))?;
    let mut prog = prefix_with(known_max);
    if fast && let Some(fast) = fast_allow(&denied) {
        prog.extend(fast);
    }
    prog.extend(body);
    Ok(prog)
}

/// Socket families a variant may create. Without a mount view, UNIX
/// sockets are refused (socketpair still works): a pathname socket outside
/// the scopes could otherwise be reached.
pub fn socket_families(v: Variant) -> &'static [i32] {
    match (v.network_allowed, v.without_view) {
        (true, false) => &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6],
        (true, true) => &[libc::AF_INET, libc::AF_INET6],
        (false, false) => &[libc::AF_UNIX],
        (false, true) => &[],
    }
}

const LD_W_ABS: u16 = 0x20;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: Option<u32> = None;

/// A binary search over the refused numbers that allows every other system
/// call of the native architecture at once; refused numbers and foreign
/// architectures fall through to the full filter. Without it the kernel,
/// which precomputes at install time which calls a filter always allows,
/// walks the whole linear chain for each of ~450 numbers (a few hundred
/// microseconds per run); and every allowed call at run time is cheaper.
fn fast_allow(denied: &[u32]) -> Option<BpfProgram> {
    const TO_END: u32 = u32::MAX;
    let arch = AUDIT_ARCH?;
    fn tree(v: &[u32]) -> Option<BpfProgram> {
        if v.len() <= 4 {
            let n = v.len();
            let mut b: BpfProgram = v
                .iter()
                .enumerate()
                .map(|(i, &nr)| ins(JEQ_K, (n - i) as u8, 0, nr))
                .collect();
            b.push(ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
            b.push(ins(JA, 0, 0, TO_END));
            return Some(b);
        }
        let mid = v.len() / 2;
        let left = tree(&v[..mid])?;
        let right = tree(&v[mid..])?;
        let mut b = vec![ins(JGE_K, u8::try_from(left.len()).ok()?, 0, v[mid])];
        b.extend(left);
        b.extend(right);
        Some(b)
    }
    let mut v = denied.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut b = vec![
        ins(LD_W_ABS, 0, 0, 4),
        ins(JEQ_K, 1, 0, arch),
        ins(JA, 0, 0, TO_END),
        ins(LD_W_ABS, 0, 0, 0),
    ];
    b.extend(tree(&v)?);
    let len = b.len() as u32;
    for (i, f) in b.iter_mut().enumerate() {
        if f.code == JA && f.k == TO_END {
            f.k = len - i as u32 - 1;
        }
    }
    Some(b)
}

/// Checks run before the arch-specific table: x32 system call numbers are
/// refused (they would bypass a table keyed by x86_64 numbers); every
/// number above `KNOWN_MAX` fails with ENOSYS; clone3 fails with ENOSYS,
/// because its flags live in memory a filter cannot read and ENOSYS makes
/// the C library fall back to clone, whose flags it can; openat2 likewise
/// (its mode lives in a struct, and the setuid bits at creation are
/// refused on openat's mode register). memfd_create and memfd_secret fail
/// with ENOSYS, so programs fall back to a file: an anonymous file lives
/// on no mount a noexec flag or a Landlock rule governs, and the ELF
/// loader maps one executable even when it is sealed against execve.
fn prefix_with(known_max: u32) -> BpfProgram {
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    vec![
        ins(LD_W_ABS, 0, 0, 0),
        ins(JGE_K, 0, 1, 0x4000_0000),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ins(JGE_K, 4, 0, known_max + 1),
        ins(JEQ_K, 3, 0, libc::SYS_clone3 as u32),
        ins(JEQ_K, 2, 0, libc::SYS_openat2 as u32),
        ins(JEQ_K, 1, 0, libc::SYS_memfd_create as u32),
        ins(JEQ_K, 0, 1, libc::SYS_memfd_secret as u32),
        ins(RET_K, 0, 0, enosys),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a classic BPF program over (nr, arch) the way the kernel does,
    /// for the instructions these programs use.
    fn eval(p: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u32; 16];
        data[0] = nr;
        data[1] = arch;
        for (i, a) in args.iter().enumerate() {
            data[4 + 2 * i] = *a as u32;
            data[5 + 2 * i] = (*a >> 32) as u32;
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let f = &p[pc];
            pc += 1;
            match f.code {
                0x20 => acc = data[f.k as usize / 4],
                0x05 => pc += f.k as usize,
                0x06 => return f.k,
                0x15 | 0x35 | 0x25 | 0x45 => {
                    let t = match f.code {
                        0x15 => acc == f.k,
                        0x35 => acc >= f.k,
                        0x25 => acc > f.k,
                        _ => acc & f.k != 0,
                    };
                    pc += if t { f.jt } else { f.jf } as usize;
                }
                0x54 => acc &= f.k,
                c => panic!("instruction {c:#x} not modelled"),
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn fast_path_changes_no_verdict() {
        let native = AUDIT_ARCH.unwrap();
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        for v in (0..8).map(|i| Variant {
            network_allowed: i & 1 != 0,
            without_view: i & 2 != 0,
            without_pid_ns: i & 4 != 0,
        }) {
            let net = v.network_allowed;
            let fast = build_with(v, true).unwrap();
            let slow = build_with(v, false).unwrap();
            assert!(fast.len() > slow.len(), "the fast path is in place");
            let arg0s = [
                0,
                1,
                2,
                3,
                libc::AF_UNIX as u64,
                libc::AF_INET as u64,
                libc::AF_NETLINK as u64,
                libc::CLONE_NEWUSER as u64,
                libc::SIGCHLD as u64,
            ];
            for arch in [native, 0x4000_0003] {
                for nr in (0..600u32).chain([0x4000_0000 + 41]) {
                    for a0 in arg0s {
                        for a1 in [0, 1, 7, libc::TIOCSTI, 0x4008_6602] {
                            let args = [a0, a1, 0, 0, 0, 0];
                            assert_eq!(
                                eval(&fast, nr, arch, args),
                                eval(&slow, nr, arch, args),
                                "nr {nr} arch {arch:#x} args {args:?}"
                            );
                        }
                    }
                }
            }
            let sock = |fam: i32| {
                eval(
                    &fast,
                    libc::SYS_socket as u32,
                    native,
                    [fam as u64, 0, 0, 0, 0, 0],
                )
            };
            assert_eq!(sock(libc::AF_UNIX) == eperm, v.without_view);
            let chmod = |mode: u32| {
                eval(
                    &fast,
                    libc::SYS_fchmodat as u32,
                    native,
                    [0, 0, mode as u64, 0, 0, 0],
                )
            };
            assert_eq!(chmod(0o4755), eperm);
            assert_eq!(chmod(0o2755), eperm);
            assert_eq!(chmod(0o755) == eperm, v.without_view);
            let memfd = |flags: u64| {
                eval(
                    &fast,
                    libc::SYS_memfd_create as u32,
                    native,
                    [0, flags, 0, 0, 0, 0],
                )
            };
            let sys = |nr: libc::c_long, args: [u64; 6]| eval(&fast, nr as u32, native, args);
            let (creat, tmpfile, wr) = (
                libc::O_CREAT as u64 | libc::O_WRONLY as u64,
                libc::O_TMPFILE as u64 | libc::O_WRONLY as u64,
                libc::O_WRONLY as u64,
            );
            for (flags, mode, refused) in [
                (creat, 0o6755, true),
                (creat, 0o4700, true),
                (creat, 0o2700, true),
                (tmpfile, 0o4700, true),
                (creat, 0o1755, false),
                (creat, 0o755, false),
                // Without O_CREAT or O_TMPFILE the mode register is noise.
                (wr, 0o6755, false),
            ] {
                let want = if refused {
                    eperm
                } else {
                    libc::SECCOMP_RET_ALLOW
                };
                let ctx = format!("flags {flags:#o} mode {mode:#o}");
                assert_eq!(
                    sys(libc::SYS_openat, [0, 0, flags, mode, 0, 0]),
                    want,
                    "{ctx}"
                );
                assert_eq!(
                    sys(libc::SYS_open, [0, flags, mode, 0, 0, 0]),
                    want,
                    "{ctx}"
                );
            }
            let reg = libc::S_IFREG as u64;
            for (mode, refused) in [(0o4755, true), (0o2755, true), (0o755, false)] {
                let want = if refused {
                    eperm
                } else {
                    libc::SECCOMP_RET_ALLOW
                };
                assert_eq!(sys(libc::SYS_creat, [0, mode, 0, 0, 0, 0]), want);
                assert_eq!(sys(libc::SYS_mknod, [0, reg | mode, 0, 0, 0, 0]), want);
                assert_eq!(sys(libc::SYS_mknodat, [0, 0, reg | mode, 0, 0, 0]), want);
            }
            assert_eq!(
                sys(libc::SYS_openat2, [0; 6]),
                libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
            );
            let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
            assert_eq!(memfd(0), enosys);
            assert_eq!(memfd(0x8 | 0x1), enosys);
            assert_eq!(eval(&fast, KNOWN_MAX + 1, native, [0; 6]), enosys);
            assert_eq!(eval(&fast, 1000, native, [0; 6]), enosys);
            // file_setattr and the inode-flag ioctls are metadata calls.
            assert_eq!(sys(FILE_SETATTR, [0; 6]) == eperm, v.without_view);
            assert_eq!(
                sys(libc::SYS_ioctl, [3, 0x4008_6602, 0, 0, 0, 0]) == eperm,
                v.without_view
            );
            assert_eq!(
                sys(libc::SYS_ioctl, [3, 0x8008_6601, 0, 0, 0, 0]),
                libc::SECCOMP_RET_ALLOW,
                "FS_IOC_GETFLAGS reads"
            );
            // Other processes: the caller itself (0) always; the guardian
            // (pid 1 in the run's PID namespace) never; others only with
            // the namespace, where they are the run's own.
            let own = v.without_pid_ns;
            for nr in [libc::SYS_prlimit64, libc::SYS_sched_setaffinity] {
                assert_eq!(sys(nr, [0; 6]), libc::SECCOMP_RET_ALLOW);
                assert_eq!(sys(nr, [1, 0, 0, 0, 0, 0]), eperm);
                assert_eq!(sys(nr, [7, 0, 0, 0, 0, 0]) == eperm, own);
            }
            assert_eq!(sys(libc::SYS_setpriority, [0; 6]), libc::SECCOMP_RET_ALLOW);
            assert_eq!(sys(libc::SYS_setpriority, [0, 1, 0, 0, 0, 0]), eperm);
            assert_eq!(sys(libc::SYS_setpriority, [2, 0, 0, 0, 0, 0]), eperm);
            assert_eq!(sys(libc::SYS_setpriority, [0, 7, 0, 0, 0, 0]) == eperm, own);
            assert_eq!(
                sys(libc::SYS_ioprio_set, [1, 0, 0, 0, 0, 0]),
                libc::SECCOMP_RET_ALLOW
            );
            assert_eq!(sys(libc::SYS_ioprio_set, [3, 0, 0, 0, 0, 0]), eperm);
            assert_eq!(sys(libc::SYS_shmget, [0; 6]) == eperm, own);
            assert_eq!(sys(libc::SYS_mq_open, [0; 6]) == eperm, own);
            assert_eq!(sys(libc::SYS_process_madvise, [0; 6]), eperm);
            assert_eq!(sock(libc::AF_INET) == eperm, !net);
            assert_eq!(eval(&fast, libc::SYS_ptrace as u32, native, [0; 6]), eperm);
            assert_eq!(
                eval(&fast, libc::SYS_read as u32, native, [0; 6]),
                libc::SECCOMP_RET_ALLOW
            );
        }
    }

    /// The ceiling on a real kernel: a filter that knows the calls up to
    /// 438 refuses faccessat2 (439) with ENOSYS, which the kernel itself
    /// implements, while the shipped filter lets it through. A child
    /// process installs each filter and reports what the call returned.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_call_above_the_ceiling_fails_with_enosys_on_this_kernel() {
        let v = Variant {
            network_allowed: true,
            without_view: false,
            without_pid_ns: false,
        };
        let outcome = |known_max: u32| -> i32 {
            let prog = build_at(v, true, known_max).unwrap();
            // SAFETY: the child makes raw system calls only, then _exits.
            unsafe {
                let pid = libc::fork();
                assert!(pid >= 0);
                if pid == 0 {
                    let fprog = libc::sock_fprog {
                        len: prog.len() as u16,
                        filter: prog.as_ptr() as *mut libc::sock_filter,
                    };
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    if libc::prctl(
                        libc::PR_SET_SECCOMP,
                        libc::SECCOMP_MODE_FILTER,
                        &fprog as *const libc::sock_fprog,
                    ) != 0
                    {
                        libc::_exit(99);
                    }
                    let r = libc::syscall(439, libc::AT_FDCWD, c"/".as_ptr(), libc::F_OK, 0);
                    libc::_exit(if r == 0 { 0 } else { *libc::__errno_location() });
                }
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                libc::WEXITSTATUS(status)
            }
        };
        assert_eq!(outcome(KNOWN_MAX), 0, "faccessat2 works under the filter");
        assert_eq!(outcome(438), libc::ENOSYS, "above the ceiling: ENOSYS");
    }
}
