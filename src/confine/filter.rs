//! The seccomp filter: compiled once per process and network mode, installed
//! last in the child, right before exec. Refused calls fail with EPERM.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Groups of refused system calls, for reports and hints.
pub const DENIED_GROUPS: [&str; 10] = [
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
];

/// The filter for a network mode; `Err` names why it cannot be built.
pub fn program(network_allowed: bool) -> Result<&'static [sock_filter], String> {
    static P: OnceLock<[Result<BpfProgram, String>; 2]> = OnceLock::new();
    let both = P.get_or_init(|| [build(false), build(true)]);
    both[network_allowed as usize]
        .as_ref()
        .map(|p| p.as_slice())
        .map_err(Clone::clone)
}

fn cond(arg: u8, op: SeccompCmpOp, v: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).expect("valid seccomp condition")
}

fn build(network_allowed: bool) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp: unsupported architecture: {e}"))?;
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
        .map_err(|e| e.to_string())?;
    rules.insert(libc::SYS_clone, clone_rules);
    let ioctl_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .map(|&r| SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, r)]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    let families: &[i32] = if network_allowed {
        &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6]
    } else {
        &[libc::AF_UNIX]
    };
    let socket_rule = SeccompRule::new(
        families
            .iter()
            .map(|&f| cond(0, SeccompCmpOp::Ne, f as u64))
            .collect(),
    )
    .map_err(|e| e.to_string())?;
    rules.insert(libc::SYS_socket, vec![socket_rule]);

    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let body: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let mut prog = prefix();
    prog.extend(body);
    Ok(prog)
}

/// Checks run before the arch-specific table: x32 system call numbers are
/// refused (they would bypass a table keyed by x86_64 numbers), and clone3
/// fails with ENOSYS, because its flags live in memory a filter cannot read
/// and ENOSYS makes the C library fall back to clone, whose flags it can.
fn prefix() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let s = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        s(LD_W_ABS, 0, 0, 0),
        s(JGE_K, 0, 1, 0x4000_0000),
        s(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        s(JEQ_K, 0, 1, libc::SYS_clone3 as u32),
        s(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ]
}
