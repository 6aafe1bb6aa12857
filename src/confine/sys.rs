//! The raw system calls confinement shares between the parent, the
//! guardian and the command: Landlock rules and the capability sets.
//!
//! These run in forked children of a process that may have other threads,
//! so they only make system calls on stack values: no allocation, no lock.

use std::os::fd::RawFd;

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Adds a path-beneath rule granting `access` beneath the file `fd` is
/// open on to the Landlock rule set `ruleset`; the errno on failure.
pub(crate) fn landlock_add_path_rule(ruleset: RawFd, fd: RawFd, access: u64) -> Result<(), i32> {
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_ulong = 1;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: the kernel reads the packed attribute from a live stack value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 { Err(super::errno()) } else { Ok(()) }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`; version 3 takes two (64 bits).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn cap_header() -> CapHeader {
    CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    }
}

/// Whether the calling thread holds capability `cap` in its effective set
/// (false when the sets cannot be read).
pub(crate) fn has_effective_capability(cap: u32) -> bool {
    let mut h = cap_header();
    let mut d = [CapData::default(); 2];
    // SAFETY: capget writes two CapData structs into a live stack array.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut CapHeader, d.as_mut_ptr()) };
    let (word, bit) = ((cap / 32) as usize, cap % 32);
    r == 0 && word < d.len() && d[word].effective & (1 << bit) != 0
}

/// Empties the thread's capability sets, so a run started by root cannot
/// use root's privileges. The bounding set is left alone: with no_new_privs
/// an exec can never gain capabilities the process does not hold, so
/// emptying the permitted set is final (and saves some 40 calls per run).
pub(crate) fn drop_capabilities() -> Result<(), i32> {
    let mut h = cap_header();
    let d = [CapData::default(); 2];
    // SAFETY: prctl with integer arguments; capset reads stack values.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        if libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, d.as_ptr()) != 0 {
            return Err(super::errno());
        }
    }
    Ok(())
}

/// Brings the loopback interface of the calling process's network
/// namespace up (SIOCSIFFLAGS with IFF_UP), which needs CAP_NET_ADMIN in
/// the user namespace owning it; the errno on failure.
pub(crate) fn loopback_up() -> Result<(), i32> {
    // SAFETY: raw calls on a stack `ifreq`; the socket is closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(super::errno());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        let mut r = Ok(());
        if libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) < 0 {
            r = Err(super::errno());
        } else {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) < 0 {
                r = Err(super::errno());
            }
        }
        libc::close(fd);
        r
    }
}
