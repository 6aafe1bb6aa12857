//! The kernel layer against what lies beside the run rather than under it:
//! the host's SysV IPC objects, system calls newer than the filter, other
//! processes (agent-rsh and the guardian included), code the loader could
//! map from a memfd or a read scope, the host's socket tables, and each
//! process's own /proc/self. As in `kernel_escapes`, python3 is allowed so
//! that every system call is reachable and the string layer decides
//! nothing; each attack runs as root and as nobody, with and without the
//! mount view and the PID namespace (the simulation seam takes them away,
//! as a container's seccomp profile does).

use crate::kernel_escapes::{NOBODY, Setup, agent_as, attack, ready, verdicts};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

/// The layers each attack is tried without: none, the mount view, the PID
/// namespace (and with it the IPC namespace and, here, the mount view).
const SIMULATIONS: [&str; 3] = ["", "mountns", "pidns"];

fn ctx(uid: u32, sim: &str, r: &Value) -> String {
    format!("uid {uid}, simulate {sim:?}: {r}")
}

fn get<'a>(v: &'a std::collections::BTreeMap<String, String>, k: &str) -> &'a str {
    v.get(k).map(String::as_str).unwrap_or("missing")
}

/// A SysV segment and a message queue of the host, owned by `uid` with
/// mode 0600 so that the attacker's own ids would pass the kernel's
/// permission check: only the run's IPC namespace (or the filter) keeps
/// it away. Removed on drop.
struct HostIpc {
    shm: i32,
    msq: i32,
    key: i32,
}

impl HostIpc {
    fn new(uid: u32) -> HostIpc {
        // A key of our own: the pid keeps concurrent tests apart.
        let key = 0x5a00_0000 | (std::process::id() as i32 & 0xffff) << 4 | uid as i32 & 0xf;
        // SAFETY: plain SysV calls; the segment is attached, written and
        // detached here, the queue gets one message.
        unsafe {
            let shm = libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(shm >= 0, "shmget: {}", std::io::Error::last_os_error());
            let p = libc::shmat(shm, std::ptr::null(), 0);
            std::ptr::copy_nonoverlapping(c"host-secret".as_ptr().cast::<u8>(), p.cast::<u8>(), 12);
            libc::shmdt(p);
            let msq = libc::msgget(key, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(msq >= 0, "msgget: {}", std::io::Error::last_os_error());
            let mut msg = [0u8; 16];
            msg[0] = 1;
            msg[8..13].copy_from_slice(b"hello");
            libc::msgsnd(msq, msg.as_ptr().cast(), 5, 0);
            let mut ds: libc::shmid_ds = std::mem::zeroed();
            libc::shmctl(shm, libc::IPC_STAT, &mut ds);
            ds.shm_perm.uid = uid;
            libc::shmctl(shm, libc::IPC_SET, &mut ds);
            let mut qs: libc::msqid_ds = std::mem::zeroed();
            libc::msgctl(msq, libc::IPC_STAT, &mut qs);
            qs.msg_perm.uid = uid;
            libc::msgctl(msq, libc::IPC_SET, &mut qs);
            HostIpc { shm, msq, key }
        }
    }

    /// The segment's first bytes and the number of messages queued.
    fn state(&self) -> (Vec<u8>, u64) {
        // SAFETY: as above.
        unsafe {
            let p = libc::shmat(self.shm, std::ptr::null(), libc::SHM_RDONLY);
            let mut b = vec![0u8; 12];
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), b.as_mut_ptr(), 12);
            libc::shmdt(p);
            let mut qs: libc::msqid_ds = std::mem::zeroed();
            libc::msgctl(self.msq, libc::IPC_STAT, &mut qs);
            (b, qs.msg_qnum)
        }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        // SAFETY: removing our own objects.
        unsafe {
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.msq, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

/// Sizes of the host's SysV segments (`/proc/sysvipc/shm`).
fn host_segment_sizes() -> Vec<u64> {
    std::fs::read_to_string("/proc/sysvipc/shm")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(3)?.parse().ok())
        .collect()
}

fn ipc_attack(uid: u32, sim: &str) {
    let s = Setup::new(uid);
    let host = HostIpc::new(uid);
    let before = host.state();
    // A size no other segment has: whether the run's segment outlived it
    // is read from the host's list.
    let size = 3 * 1024 * 1024 + 4096 * (1 + (std::process::id() as usize % 200)) + uid as usize;
    let script = format!(
        r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def r(name, v):
    print(name, "ok" if v not in (-1, None) and v != ctypes.c_void_p(-1).value else errno.errorcode.get(ctypes.get_errno(), "?"))
KEY = {key}
shm = libc.shmget(KEY, 0, 0)
r("shmget-host", shm)
if shm >= 0:
    p = libc.shmat(shm, None, 0)
    r("shmat-host", p)
    if p not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(p, b"overwritten!", 12)
msq = libc.msgget(KEY, 0)
r("msgget-host", msq)
if msq >= 0:
    buf = ctypes.create_string_buffer(64)
    r("msgrcv-host", libc.msgrcv(msq, buf, 56, 0, 0o4000))
mine = libc.shmget(0, {size}, 0o1600)
r("shmget-own", mine)
if mine >= 0:
    p = libc.shmat(mine, None, 0)
    if p not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(p, 1, {size})
        print("own-touched ok")
"#,
        key = host.key,
    );
    let policy = s.policy("");
    let r = attack(&policy, uid, sim, &script);
    let v = verdicts(&r);
    let c = ctx(uid, sim, &r);
    assert_eq!(r["exitCode"], 0, "{c}");
    let pid_ns = sim != "pidns";
    assert_eq!(r["confinement"]["pidNamespace"], pid_ns, "{c}");
    // The host's objects are not there (ENOENT) in the run's own IPC
    // namespace, and refused (EPERM) without one.
    let want = if pid_ns { "ENOENT" } else { "EPERM" };
    assert_eq!(get(&v, "shmget-host"), want, "{c}");
    assert_eq!(get(&v, "msgget-host"), want, "{c}");
    assert!(!v.contains_key("shmat-host"), "{c}");
    assert!(!v.contains_key("msgrcv-host"), "{c}");
    // The run's own segment works where it has its namespace, and is gone
    // with it; without one it is refused.
    assert_eq!(
        get(&v, "shmget-own"),
        if pid_ns { "ok" } else { "EPERM" },
        "{c}"
    );
    assert_eq!(host.state(), before, "the host's segment and queue: {c}");
    assert_eq!(before.0, b"host-secret\0".to_vec());
    assert!(
        !host_segment_sizes().contains(&(size as u64)),
        "the run's segment outlived it: {c}"
    );
    let g = r["confinement"]["guarantees"]["ipc"].as_str().unwrap_or("");
    let want = if pid_ns {
        "ipc namespace of the run"
    } else {
        "seccomp (SysV IPC and POSIX message queues refused)"
    };
    assert!(g.starts_with(want), "{c}");
}

#[test]
fn the_hosts_ipc_objects_are_out_of_reach() {
    if !ready() {
        return;
    }
    for uid in [0, NOBODY] {
        for sim in SIMULATIONS {
            ipc_attack(uid, sim);
        }
    }
}

/// Inode flags of `p` (FS_IOC_GETFLAGS), or None where the file system
/// has none.
fn inode_flags(p: &Path) -> Option<i64> {
    let f = std::fs::File::open(p).ok()?;
    let mut flags: libc::c_long = 0;
    use std::os::fd::AsRawFd;
    // SAFETY: FS_IOC_GETFLAGS writes one long.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), 0x8008_6601, &mut flags) };
    (r == 0).then_some(flags)
}

fn new_syscalls_attack(uid: u32, sim: &str) {
    let s = Setup::new(uid);
    let victim = s.victims().join("victim");
    let flags = inode_flags(&victim);
    let ctime = || {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&victim).unwrap();
        (m.ctime(), m.ctime_nsec())
    };
    let ctime_before = ctime();
    let extra = format!(
        "[scopes]\nread = [\"/usr\", \"/lib\", \"/lib64\", \"/etc\", {:?}]",
        s.victims().display().to_string()
    );
    let policy = s.policy(&extra);
    let script = format!(
        r#"
import ctypes, errno, os, fcntl, struct
libc = ctypes.CDLL(None, use_errno=True)
def r(name, v):
    print(name, "ok" if v >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
V = "{victim}"
r("above-ceiling", libc.syscall(470, 0, 0, 0, 0, 0))
r("far-above", libc.syscall(1000, 0, 0, 0, 0, 0))
# file_setattr(dirfd, path, attr, size, at_flags): No_Dump | Sync.
attr = struct.pack("=QIIIIQ", 0x40 | 0x8, 0, 0, 0, 0, 0)
buf = ctypes.create_string_buffer(attr)
r("file_setattr", libc.syscall(469, -100, V.encode(), buf, len(attr), 0))
fd = os.open(V, os.O_RDONLY)
flags = ctypes.c_long(0x40 | 0x8)
r("ioc-setflags", libc.ioctl(fd, 0x40086602, ctypes.byref(flags)))
fsx = ctypes.create_string_buffer(28)
libc.ioctl(fd, 0x801c581f, fsx)
r("ioc-fssetxattr", libc.ioctl(fd, 0x401c5820, fsx))
gen = ctypes.c_long(12345)
r("ioc-setversion", libc.ioctl(fd, 0x40087602, ctypes.byref(gen)))
r("ext4-setversion", libc.ioctl(fd, 0x40086604, ctypes.byref(gen)))
"#,
        victim = victim.display()
    );
    let r = attack(&policy, uid, sim, &script);
    let v = verdicts(&r);
    let c = ctx(uid, sim, &r);
    assert_eq!(r["exitCode"], 0, "{c}");
    assert_eq!(get(&v, "above-ceiling"), "ENOSYS", "{c}");
    assert_eq!(get(&v, "far-above"), "ENOSYS", "{c}");
    for k in [
        "file_setattr",
        "ioc-setflags",
        "ioc-fssetxattr",
        "ioc-setversion",
        "ext4-setversion",
    ] {
        let got = get(&v, k);
        assert!(
            ["EPERM", "EROFS"].contains(&got) || flags.is_none() && got == "ENOTTY",
            "{k}: {got}; {c}"
        );
    }
    assert_eq!(inode_flags(&victim), flags, "the victim's flags: {c}");
    assert_eq!(
        ctime(),
        ctime_before,
        "the victim's inode is untouched: {c}"
    );
    assert_eq!(
        r["confinement"]["seccomp"]["knownSyscallMax"], 469,
        "the report names the ceiling: {c}"
    );
}

#[test]
fn newer_syscalls_and_inode_flags_are_refused() {
    if !ready() {
        return;
    }
    for uid in [0, NOBODY] {
        for sim in SIMULATIONS {
            new_syscalls_attack(uid, sim);
        }
    }
}

/// RLIMIT_CPU and the nice value of a process, from /proc.
fn limits_of(pid: u32) -> (String, String) {
    let l = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let cpu = l
        .lines()
        .find(|l| l.starts_with("Max cpu time"))
        .unwrap_or("")
        .to_string();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let nice = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().nth(16))
        .unwrap_or("")
        .to_string();
    (cpu, nice)
}

fn other_processes_attack(uid: u32, sim: &str) {
    let s = Setup::new(uid);
    // A process outside the run, of the attacker's own uid.
    let mut outside = Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
            "sleep".into(),
            "600".into(),
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let victim = outside.id();
    let before = limits_of(victim);
    let script = format!(
        r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def r(name, v):
    print(name, "ok" if v >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
class RL(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
zero = RL(0, 0)
one = RL(1, 1)
mask = ctypes.c_uint64(1)
V = {victim}
P = os.getppid()
for name, pid in [("outside", V), ("guardian", 1), ("parent", P)]:
    r("prlimit-nofile-" + name, libc.prlimit(pid, 7, ctypes.byref(zero), None))
    r("prlimit-cpu-" + name, libc.prlimit(pid, 0, ctypes.byref(one), None))
    r("setpriority-" + name, libc.setpriority(0, pid, 19))
    r("affinity-" + name, libc.sched_setaffinity(pid, 8, ctypes.byref(mask)))
    r("ioprio-" + name, libc.syscall(251, 1, pid, (3 << 13) | 7))
r("setpriority-user", libc.setpriority(2, 0, 19))
r("ioprio-user", libc.syscall(251, 3, 0, (3 << 13) | 7))
r("self-prlimit", libc.prlimit(0, 7, None, ctypes.byref(RL())))
r("self-nice", libc.setpriority(0, 0, 1))
print("alive ok")
"#
    );
    let r = attack(&s.policy(""), uid, sim, &script);
    let after = limits_of(victim);
    let alive = outside.try_wait().unwrap().is_none();
    let _ = outside.kill();
    let _ = outside.wait();
    let v = verdicts(&r);
    let c = ctx(uid, sim, &r);
    assert_eq!(r["exitCode"], 0, "agent-rsh and the run survived: {c}");
    assert_eq!(get(&v, "alive"), "ok", "{c}");
    assert_eq!(get(&v, "self-prlimit"), "ok", "{c}");
    assert_eq!(get(&v, "self-nice"), "ok", "{c}");
    for (k, got) in &v {
        if k.ends_with("-outside")
            || k.ends_with("-guardian")
            || k.ends_with("-parent")
            || k.ends_with("-user")
        {
            assert!(
                ["EPERM", "ESRCH"].contains(&got.as_str()),
                "{k} must be refused, got {got}; {c}"
            );
        }
    }
    assert!(alive, "the outside process lives: {c}");
    assert_eq!(before, after, "its CPU limit and nice value: {c}");
}

#[test]
fn no_process_outside_the_run_is_touched() {
    if !ready() {
        return;
    }
    for uid in [0, NOBODY] {
        for sim in SIMULATIONS {
            other_processes_attack(uid, sim);
        }
    }
}

/// The loader through a memfd, and through a program in a default read
/// scope that the policy does not allow.
fn loader_attack(uid: u32, sim: &str) {
    let s = Setup::new(uid);
    // The default read scopes: the policy names none.
    let policy = s.policy("");
    let script = r#"
import os, subprocess, errno, sys
LD = "/lib64/ld-linux-x86-64.so.2"
def t(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def memfd(flags):
    fd = os.memfd_create("x", flags)
    os.write(fd, open(os.path.realpath(sys.executable), "rb").read())
    p = subprocess.run([LD, "/proc/self/fd/%d" % fd, "-c", "print('memfd-' + 'ran')"], pass_fds=[fd], capture_output=True, text=True)
    print("memfd-loader", p.returncode, p.stdout.strip() or "-")
t("memfd-sealed", lambda: memfd(0x8))
t("memfd-plain", lambda: memfd(0))
for prog in ["/usr/lib/git-core/git", "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"]:
    if os.path.exists(prog):
        p = subprocess.run([LD, prog, "--version"], capture_output=True, text=True)
        print("readscope-" + prog.split("/")[-1], p.returncode, "ran" if p.returncode == 0 else "-")
"#;
    let r = attack(&policy, uid, sim, script);
    let v = verdicts(&r);
    let c = ctx(uid, sim, &r);
    assert_eq!(r["exitCode"], 0, "{c}");
    let out = r["stdout"].as_str().unwrap_or("");
    assert!(!out.contains("memfd-ran"), "{c}");
    assert_eq!(get(&v, "memfd-sealed"), "ENOSYS", "{c}");
    assert_eq!(get(&v, "memfd-plain"), "ENOSYS", "{c}");
    for (k, got) in &v {
        if k.starts_with("readscope-") {
            assert!(!got.ends_with("ran"), "{k}: {got}; {c}");
        }
    }
    let exec = r["confinement"]["guarantees"]["exec"]
        .as_str()
        .unwrap_or("");
    assert!(exec.contains("seccomp (no memfd)"), "{c}");
    assert!(
        exec.contains("the ELF loader can still run an ELF program that scopes.read holds"),
        "what is left is stated: {c}"
    );
}

#[test]
fn the_loader_runs_no_memfd_and_no_program_of_the_read_scopes() {
    if !ready() {
        return;
    }
    for uid in [0, NOBODY] {
        for sim in SIMULATIONS {
            loader_attack(uid, sim);
        }
    }
}

/// With network = "none" (the default) the run has its own network
/// namespace: its socket tables list no socket of the host.
#[test]
fn the_hosts_sockets_are_not_listed() {
    if !ready() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("agent-rsh-hostsock-")
        .tempdir()
        .unwrap();
    let name = format!("host-socket-{}", std::process::id());
    let _l = std::os::unix::net::UnixListener::bind(dir.path().join(&name)).unwrap();
    // The test's own table has it: the control.
    assert!(
        std::fs::read_to_string("/proc/self/net/unix")
            .unwrap()
            .contains(&name)
    );
    for uid in [0, NOBODY] {
        for sim in ["", "mountns"] {
            let s = Setup::new(uid);
            let r = attack(
                &s.policy(""),
                uid,
                sim,
                "print(open('/proc/self/net/unix').read()); print(open('/proc/self/net/tcp').read())",
            );
            let c = ctx(uid, sim, &r);
            assert_eq!(r["exitCode"], 0, "{c}");
            assert_eq!(r["confinement"]["networkNamespace"], true, "{c}");
            let out = r["stdout"].as_str().unwrap_or("");
            assert!(out.contains("Inode"), "the table was read: {c}");
            assert!(!out.contains(&name), "{c}");
            assert!(
                r["confinement"]["guarantees"]["network"]
                    .as_str()
                    .unwrap_or("")
                    .contains("network namespace"),
                "{c}"
            );
        }
    }
}

/// Every process of the run reads its own /proc/self, not only the first;
/// the guardian's environment stays out of reach.
#[test]
fn every_process_reads_its_own_proc_self() {
    if !ready() {
        return;
    }
    for uid in [0, NOBODY] {
        let s = Setup::new(uid);
        let policy = s.dir.path().join("proc.toml");
        std::fs::write(
            &policy,
            "confinement = \"required\"\n[commands]\nallow = [\"python3\", \"grep\", \"ls\", \"head\", \"true\"]\n[packs]\noff = [\"python\"]\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&policy, PermissionsExt::from_mode(0o644)).unwrap();
        let script = r#"
import subprocess, errno, os
for cmd in (["grep", "-c", "Pid", "/proc/self/status"], ["ls", "/proc/self/fd"], ["grep", "-c", ".", "/proc/thread-self/status"]):
    p = subprocess.run(cmd, capture_output=True, text=True)
    print("child-" + cmd[0] + "-" + cmd[-1].split("/")[-1], "ok" if p.returncode == 0 else "EACCES")
try:
    open("/proc/1/environ", "rb").read(); print("guardian-environ ok")
except OSError as e:
    print("guardian-environ", errno.errorcode[e.errno])
for what in ["fd/0", "cwd", "root", "exe"]:
    try:
        os.readlink("/proc/1/" + what); print("guardian-" + what.replace("/", ""), "ok")
    except OSError as e:
        print("guardian-" + what.replace("/", ""), errno.errorcode[e.errno])
"#;
        let r = attack(&policy, uid, "", script);
        let v = verdicts(&r);
        let c = ctx(uid, "", &r);
        assert_eq!(r["exitCode"], 0, "{c}");
        for k in ["child-grep-status", "child-ls-fd", "child-grep-status"] {
            assert_eq!(get(&v, k), "ok", "{k}: {c}");
        }
        assert_eq!(get(&v, "guardian-environ"), "EACCES", "{c}");
        for k in [
            "guardian-fd0",
            "guardian-cwd",
            "guardian-root",
            "guardian-exe",
        ] {
            assert_eq!(get(&v, k), "EACCES", "{k}: {c}");
        }
        // The same through the interpreter: a pipeline's stages are each a
        // process of their own.
        let mut cmd = agent_as(uid);
        let out = cmd
            .args(["run", "--json", "--policy"])
            .arg(&policy)
            .arg("true | grep -c . /proc/self/status && ls /proc/self/fd | head -1")
            .env_remove("AGENT_RSH_POLICY")
            .env_remove("AGENT_RSH_SIMULATE_MISSING")
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["exitCode"], 0, "uid {uid}: {r}");
        assert!(
            r["confinement"]["guarantees"]["procSelf"]
                .as_str()
                .unwrap_or("")
                .contains("run's own pid namespace"),
            "{r}"
        );
    }
}

/// A persistent workspace's repository: nothing a run does plants a hook
/// or a config that a later git outside the sandbox would run, and `.git`
/// cannot be moved away and replaced; git itself still works.
#[test]
fn a_persistent_workspaces_hooks_and_config_are_read_only() {
    if !ready() {
        return;
    }
    let Ok(out) = Command::new("git").arg("--exec-path").output() else {
        crate::common::cannot_run("needs git (apt-get install git)");
        return;
    };
    let exec_path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    for uid in [0, NOBODY] {
        let s = Setup::new(uid);
        let ws = s.dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let git = |args: &[&str]| {
            let st = Command::new("git")
                .args(args)
                .current_dir(&ws)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(st.status.success(), "{args:?}: {st:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("f"), "one\n").unwrap();
        git(&["add", "f"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ]);
        std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
        Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(&ws)
            .status()
            .unwrap();
        let config_before = std::fs::read(ws.join(".git/config")).unwrap();
        let policy = s.dir.path().join("git.toml");
        std::fs::write(
            &policy,
            format!(
                "confinement = \"required\"\n[commands]\nallow = [\"python3\", \"git\"]\n[packs]\noff = [\"python\", \"git\", \"guard.git\", \"guard.fs\"]\n[scopes]\nexec = [{exec_path:?}]\n"
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&policy, PermissionsExt::from_mode(0o644)).unwrap();
        let script = r##"
import os, errno, subprocess, shutil
def t(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
t("plant-hook", lambda: open(".git/hooks/pre-commit", "w").write("#!/bin/sh\nid\n"))
t("append-config", lambda: open(".git/config", "a").write("[alias]\n\tx = !id\n"))
t("replace-config", lambda: os.rename(".git/HEAD", ".git/config"))
t("move-git", lambda: os.rename(".git", "moved"))
t("remove-hooks", lambda: shutil.rmtree(".git/hooks"))
env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@b")
def g(name, *a):
    p = subprocess.run(["git", *a], capture_output=True, text=True, env=env)
    print(name, "ok" if p.returncode == 0 else "failed:" + p.stderr.strip().replace(" ", "_")[:80])
open("f", "a").write("two\n")
g("git-add", "add", "f")
g("git-commit", "commit", "-qm", "two")
open("f", "a").write("three\n")
g("git-stash", "stash", "-q")
g("git-stash-pop", "stash", "pop", "-q")
g("git-commit-2", "commit", "-qam", "three")
g("git-checkout", "checkout", "-q", "-b", "side", "HEAD~1")
open("g", "w").write("side\n")
g("git-add-2", "add", "g")
g("git-commit-3", "commit", "-qm", "side")
g("git-switch", "switch", "-q", "main")
g("git-rebase", "rebase", "-q", "side")
"##;
        let mut c = agent_as(uid);
        let mut child = c
            .args(["run", "--json", "--stdin", "--policy"])
            .arg(&policy)
            .arg("--workspace")
            .arg(&ws)
            .args(["--", "python3", "-"])
            .env_remove("AGENT_RSH_POLICY")
            .env_remove("AGENT_RSH_SIMULATE_MISSING")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let v = verdicts(&r);
        let c = format!("uid {uid}: {r}");
        assert_eq!(r["exitCode"], 0, "{c}");
        assert_eq!(r["confinement"]["mountView"], true, "{c}");
        for k in ["plant-hook", "append-config"] {
            assert_eq!(get(&v, k), "EROFS", "{k}: {c}");
        }
        for k in ["replace-config", "move-git", "remove-hooks"] {
            assert_eq!(get(&v, k), "EBUSY", "{k}: {c}");
        }
        for k in [
            "git-add",
            "git-commit",
            "git-stash",
            "git-stash-pop",
            "git-commit-2",
            "git-checkout",
            "git-add-2",
            "git-commit-3",
            "git-switch",
            "git-rebase",
        ] {
            assert_eq!(get(&v, k), "ok", "{k}: {c}");
        }
        assert_eq!(
            std::fs::read(ws.join(".git/config")).unwrap(),
            config_before
        );
        assert_eq!(
            std::fs::read_dir(ws.join(".git/hooks")).unwrap().count(),
            0,
            "the hooks directory was made, empty, and stays so: {c}"
        );
        let log = Command::new("git")
            .args(["-c", "safe.directory=*", "log", "--oneline", "main"])
            .current_dir(&ws)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&log.stdout).lines().count(),
            4,
            "init, side, two and three on main: {c}"
        );
    }
}
