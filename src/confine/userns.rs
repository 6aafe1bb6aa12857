//! The user namespace that lets an unprivileged caller have a PID namespace.
//!
//! Creating a PID namespace takes CAP_SYS_ADMIN. A caller without it (a
//! login account whose shell is agent-rsh, any non-root user) gets one by
//! creating a user namespace in the same `clone`
//! (`CLONE_NEWUSER | CLONE_NEWPID`): the new PID namespace is then owned by
//! the new user namespace, which the caller may create on kernels that allow
//! unprivileged user namespaces.
//!
//! Security consequences, and what holds them in place:
//!
//! - The guardian starts with every capability *in the new user namespace*
//!   (none in the caller's). It uses them only to write its own id maps and
//!   securebits, then empties its capability sets before it forks the
//!   command, so no process of the run holds a capability in any namespace.
//!   The command drops again (a no-op then) and runs with no_new_privs, so
//!   an exec cannot grant any back (the kernel intersects the new permitted
//!   set with the old, empty one); the securebits `NOROOT` and
//!   `NO_CAP_AMBIENT_RAISE`, locked, say the same once more for id 0.
//! - The maps are 1:1 for the caller's own uid and gid only (`U U 1`), so
//!   inside the namespace the command is the same uid and gid as outside:
//!   files it creates belong to the real account, files of other accounts
//!   stay other accounts' (unmapped ids show as the overflow id, and the
//!   kernel checks access with the real ids). `setgroups` is denied, as the
//!   kernel requires before an unprivileged gid map; supplementary groups
//!   are kept (they can only be dropped, never added, and that is refused
//!   too), so group-based access is unchanged.
//! - RLIMIT_NPROC is charged per real uid at every user-namespace level:
//!   inside, the policy's `limits.processes` bounds the processes of that
//!   uid in the run's namespace, which is the run's own tree; the level
//!   above is bounded by agent-rsh's own limit. A fork bomb stops at
//!   `limits.processes` either way; unlike a run without a user namespace,
//!   the account's processes outside the run no longer use up the run's
//!   allowance.
//! - Nested namespaces stay refused: the seccomp filter refuses `unshare`,
//!   `setns`, `clone` with any namespace flag and `clone3`, as it does
//!   without a user namespace; and the guardian sets the namespace's own
//!   `user.max_user_namespaces` to 0, so even a run whose seccomp layer is
//!   missing (best-effort) cannot create a user namespace below.
//! - Landlock, seccomp, no_new_privs and the rlimits are applied by the
//!   command exactly as without a user namespace; the tree kill and the
//!   parent-death signal are those of the PID namespace's init, unchanged.

use std::ffi::CString;

/// CAP_SYS_ADMIN's bit in the capability sets.
const CAP_SYS_ADMIN: u32 = 21;

/// Whether this process holds CAP_SYS_ADMIN in its effective set, i.e. can
/// create a PID namespace without a user namespace.
pub fn has_cap_sys_admin() -> bool {
    super::sys::has_effective_capability(CAP_SYS_ADMIN)
}

/// What the guardian writes into its own /proc/self files, built before
/// clone so the guardian only makes system calls.
pub struct Maps {
    uid_map: CString,
    gid_map: CString,
}

impl Maps {
    /// 1:1 maps of the caller's effective uid and gid.
    pub fn of_caller() -> Maps {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Maps {
            uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("no NUL in digits"),
            gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("no NUL in digits"),
        }
    }

    /// In the guardian, right after `clone(CLONE_NEWUSER | ...)`: maps the
    /// ids and forbids nested user namespaces. Raw system calls only.
    pub fn map_ids(&self) -> Result<(), i32> {
        write_proc(c"/proc/self/setgroups", c"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        // Defence in depth behind seccomp; a kernel without the per-namespace
        // limit still has the seccomp layer, so a failure is not fatal.
        let _ = write_proc(c"/proc/sys/user/max_user_namespaces", c"0");
        Ok(())
    }

    /// After the guardian used its capabilities in the new namespace (the
    /// mount view): locks the securebits and empties the capability sets.
    pub fn lock(&self) -> Result<(), i32> {
        const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
        const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
        const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
        const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
        const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
        const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
        const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
        let bits = SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) } != 0 {
            return Err(super::errno());
        }
        super::sys::drop_capabilities()
    }
}

fn write_proc(path: &std::ffi::CStr, data: &std::ffi::CStr) -> Result<(), i32> {
    let bytes = data.to_bytes();
    // SAFETY: raw system calls on NUL-terminated strings and their bytes.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(super::errno());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let e = super::errno();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(if n < 0 { e } else { libc::EIO });
        }
    }
    Ok(())
}

/// Why this machine refuses an unprivileged user namespace, for the
/// fail-closed message: the setting that forbids it when one is found.
pub fn blocker(simulated: bool) -> String {
    if simulated {
        return format!(
            "user namespaces are simulated missing by {}",
            super::probe::SIMULATE_ENV
        );
    }
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut found = Vec::new();
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        found.push("kernel.unprivileged_userns_clone = 0");
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        found.push("user.max_user_namespaces = 0");
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        found.push("kernel.apparmor_restrict_unprivileged_userns = 1");
    }
    if found.is_empty() {
        "the kernel refuses unprivileged user namespaces".to_string()
    } else {
        format!(
            "the kernel refuses unprivileged user namespaces ({})",
            found.join(", ")
        )
    }
}
