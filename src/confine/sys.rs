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

/// In the guardian, inside the run's network namespace with `lo` up: a TCP
/// socket listening at 127.0.0.1:`port`, sent over `chan` (a UNIX socket
/// to agent-rsh) and closed here. A socket belongs to the namespace it was
/// made in whoever holds it, so agent-rsh, outside, accepts the run's
/// connections on it and is the run's only way out. Raw calls only.
pub(crate) fn send_listener(chan: i32, port: u16) -> Result<(), i32> {
    // SAFETY: raw calls on stack values; the socket is closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(super::errno());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let mut r = Ok(());
        if libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) < 0
            || libc::listen(fd, 128) < 0
        {
            r = Err(super::errno());
        }
        if r.is_ok() {
            let mut byte = [b'L'];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            // Room for one fd, aligned as cmsghdr wants.
            let mut cbuf = [0u64; 4];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
            if libc::sendmsg(chan, &msg, libc::MSG_NOSIGNAL) < 0 {
                r = Err(super::errno());
            }
        }
        libc::close(fd);
        r
    }
}

/// In agent-rsh: the listener `send_listener` sent over `chan`, or None
/// when the guardian ended without sending one.
pub fn receive_listener(chan: i32) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    use std::os::fd::FromRawFd;
    // SAFETY: recvmsg into stack buffers; a received fd is owned at once.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cbuf = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf);
        let n = loop {
            let n = libc::recvmsg(chan, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && super::errno() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Ok(None);
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<i32>());
        Ok(Some(std::os::fd::OwnedFd::from_raw_fd(fd)))
    }
}
