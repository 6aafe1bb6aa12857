//! agent-rsh inside a container with Docker-like defaults: no CAP_SYS_ADMIN
//! and a seccomp profile refusing unshare, setns, mount and namespace flags
//! on clone (clone3 ENOSYS). Podman runs the host's own root (an overlay of
//! `/`), so no image is pulled. Under `confinement = "required"` a run
//! starts (Landlock and seccomp are there; the namespaces are not), a
//! deadline kills a tree that daemonized, and the escapes fail.

use crate::common::{bin, cannot_run};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// None when podman is missing or cannot run rootful (a failure under
/// CI=true, where .ci/run installs it and runs as root).
fn podman() -> Option<&'static str> {
    // Rootless Podman cannot run the host's root as the container's with
    // the cgroupfs manager, and leaves its pause process (catatonit)
    // running after the test: ask only as root.
    if !crate::common::root() {
        cannot_run("needs root: the container is rootful Podman (the host's / as its root)");
        return None;
    }
    let ok = Command::new("podman")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        cannot_run("podman is missing: .ci/run installs it (apt-get install podman runc)");
        return None;
    }
    Some("podman")
}

/// Podman's default profile with every allowance of the namespace and mount
/// calls removed, clone allowed only without namespace flags, clone3 ENOSYS.
fn docker_like_profile(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string("/usr/share/containers/seccomp.json")
        .expect("podman's default seccomp profile");
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let refused = [
        "clone",
        "clone3",
        "unshare",
        "setns",
        "mount",
        "umount",
        "umount2",
        "pivot_root",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
    ];
    let calls = v["syscalls"].as_array_mut().unwrap();
    for c in calls.iter_mut() {
        if let Some(names) = c["names"].as_array_mut() {
            names.retain(|n| !refused.contains(&n.as_str().unwrap_or("")));
        }
    }
    calls.retain(|c| c["names"].as_array().is_none_or(|n| !n.is_empty()));
    const NS_FLAGS: u64 = 0x7E02_0000;
    calls.push(serde_json::json!({
        "names": ["clone"],
        "action": "SCMP_ACT_ALLOW",
        "args": [{"index": 0, "value": NS_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]
    }));
    calls
        .push(serde_json::json!({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}));
    let p = dir.join("docker-like.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// Runs `sh -c script` in the container, `stdin` fed to it.
fn in_container(profile: &Path, policy: &Path, script: &str, stdin: &str) -> String {
    in_container_with(profile, policy, &[], script, stdin)
}

/// `in_container` with more `podman run` options.
fn in_container_with(
    profile: &Path,
    policy: &Path,
    extra: &[&str],
    script: &str,
    stdin: &str,
) -> String {
    let mut c = Command::new("podman");
    c.args([
        "--runtime",
        "runc",
        "--cgroup-manager=cgroupfs",
        "run",
        "--rm",
        "-i",
        "--network",
        "none",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=4096:4096",
        "--cap-drop",
        "SYS_ADMIN",
        "--security-opt",
    ])
    .arg(format!("seccomp={}", profile.display()))
    .arg("-v")
    .arg(format!("{}:/agent-rsh:ro", bin()))
    .arg("-v")
    .arg(format!("{}:/policy.toml:ro", policy.display()))
    .args(extra)
    .args(["--rootfs", "/:O", "sh", "-c", script])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}\n--stderr--\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn required_runs_in_a_docker_like_container_and_holds() {
    if podman().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let profile = docker_like_profile(dir.path());
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "confinement = \"required\"\n[commands]\nallow = [\"echo\", \"python3\", \"setsid\", \"sleep\", \"chmod\"]\n[packs]\noff = [\"python\"]\n",
    )
    .unwrap();

    // The container really refuses namespaces, and a run still starts.
    let out = in_container(
        &profile,
        &policy,
        "unshare -U true 2>/dev/null && echo UNSHARE-WORKS; /agent-rsh run --policy /policy.toml 'echo hi'; echo \"exit=$?\"",
        "",
    );
    assert!(
        !out.contains("UNSHARE-WORKS"),
        "the profile refuses unshare: {out}"
    );
    assert!(out.contains("hi\nexit=0"), "{out}");

    // No cgroup of its own (the cgroup file system is read-only): root's
    // processes, which RLIMIT_NPROC does not count, are bounded by the
    // container's own pids limit (Podman sets one by default) ...
    let report = "/agent-rsh run --json --policy /policy.toml 'echo hi' > /tmp/res.json; echo \"exit=$?\"; echo \"pids.max=$(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max)\"; cat /tmp/res.json";
    let result = |out: &str| -> (String, serde_json::Value) {
        let max = out.lines().find_map(|l| l.strip_prefix("pids.max="));
        let json = out.lines().find(|l| l.starts_with('{'));
        match (max, json) {
            (Some(m), Some(j)) => (m.to_string(), serde_json::from_str(j).unwrap()),
            _ => panic!("{out}"),
        }
    };
    let out = in_container(&profile, &policy, report, "");
    let (max, r) = result(&out);
    // No mount view here: the exec guarantee names what it does not hold.
    assert_eq!(r["confinement"]["mountView"], false, "{out}");
    assert!(
        r["confinement"]["guarantees"]["exec"]
            .as_str()
            .unwrap()
            .contains("NOT held for files the run writes"),
        "{out}"
    );
    assert!(
        r["warnings"].to_string().contains("not mounted noexec"),
        "{out}"
    );
    if max != "max" {
        assert!(out.contains("exit=0"), "{out}");
        let res = &r["confinement"]["resources"];
        assert_eq!(res["mechanism"], "enclosing cgroup", "{out}");
        assert_eq!(res["enclosingPidsMax"].to_string(), max, "{out}");
        assert!(
            res["reason"]
                .as_str()
                .unwrap()
                .contains("Read-only file system"),
            "{out}"
        );
    }
    // ... without one, "required" refuses root in one line saying what to
    // change ...
    let out = in_container_with(&profile, &policy, &["--pids-limit=-1"], report, "");
    let (max, r) = result(&out);
    assert_eq!(max, "max", "{out}");
    assert!(out.contains("exit=125"), "{out}");
    let e = r["error"].as_str().unwrap();
    for said in [
        "the run's cgroup is not available (cannot create a cgroup in ",
        "Read-only file system",
        "RLIMIT_NPROC",
        "--pids-limit",
        "confinement = \"best-effort\"",
    ] {
        assert!(e.contains(said), "{said} not in {e}");
    }
    assert!(!e.contains('\n'), "{e}");
    // ... and an account RLIMIT_NPROC counts runs with rlimits.
    let out = in_container_with(
        &profile,
        &policy,
        &["--pids-limit=-1", "--user", "65534"],
        report,
        "",
    );
    let (_, r) = result(&out);
    assert!(out.contains("exit=0"), "{out}");
    assert_eq!(
        r["confinement"]["resources"]["mechanism"], "rlimits",
        "{out}"
    );

    // A deadline kills a tree that daemonized.
    let out = in_container(
        &profile,
        &policy,
        "/agent-rsh run --json --timeout 1000 --policy /policy.toml 'setsid -f sleep 300' >/dev/null; /agent-rsh run --json --timeout 1000 --policy /policy.toml -- python3 -c 'import os,time; os.setsid() if os.fork()==0 else None; time.sleep(300)' > /tmp/r.json; sleep 0.5; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -E 'sleep 300|time.sleep' | grep -v grep && echo SURVIVOR; grep -o '\"tree\":\"[^\"]*\"' /tmp/r.json; echo done",
        "",
    );
    assert!(!out.contains("SURVIVOR"), "{out}");

    // The escapes fail.
    let attack = r#"
import os, errno, socket
def t(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
open("/tmp/victim", "w").close() if False else None
t("chmod-setuid-outside", lambda: os.chmod("/usr/bin/id", 0o4755))
t("chmod-outside", lambda: os.chmod("/etc/passwd", 0o666))
t("utime-outside", lambda: os.utime("/etc/passwd", (0, 0)))
t("setxattr-outside", lambda: os.setxattr("/etc/passwd", "user.x", b"1"))
def memfd():
    fd = os.memfd_create("x", 0)
t("memfd", memfd)
def memfd_exec(flags):
    fd = os.memfd_create("x", flags)
    os.write(fd, open("/usr/bin/true", "rb").read())
    os.execve(fd, ["x"], {})
# A sealed non-executable memfd is allowed; executing it is not.
t("memfd-exec-sealed", lambda: memfd_exec(0x8))
t("memfd-exec-mfd-exec", lambda: memfd_exec(0x10))
def sock():
    s = socket.socket(socket.AF_UNIX); s.connect("/tmp/listener")
t("socket-outside", sock)
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
def call(v):
    if v < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
# The container's SysV segment (made before the run, key 0x777).
t("shm-outside", lambda: call(libc.shmget(0x777, 0, 0)))
t("syscall-above-ceiling", lambda: call(libc.syscall(470, 0, 0, 0, 0, 0)))
attr = ctypes.create_string_buffer(struct.pack("=QIIIIQ", 0x40, 0, 0, 0, 0, 0))
t("file-setattr-outside", lambda: call(libc.syscall(469, -100, b"/etc/passwd", attr, 32, 0)))
fd = os.open("/etc/passwd", os.O_RDONLY)
flags = ctypes.c_long(0x40)
t("setflags-outside", lambda: call(libc.ioctl(fd, 0x40086602, ctypes.byref(flags))))
class RL(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
one = RL(1, 1)
t("prlimit-container-init", lambda: call(libc.prlimit(1, 0, ctypes.byref(one), None)))
t("prlimit-parent", lambda: call(libc.prlimit(os.getppid(), 7, ctypes.byref(RL(0, 0)), None)))
t("setpriority-user", lambda: call(libc.setpriority(2, 0, 19)))
"#;
    let out = in_container(
        &profile,
        &policy,
        "python3 -c 'import ctypes; ctypes.CDLL(None).shmget(0x777, 4096, 0o1600)'; python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind(\"/tmp/listener\"); s.listen(); import time; time.sleep(20)' & sleep 0.3; m1=$(stat -c %a%Y /usr/bin/id /etc/passwd); /agent-rsh run --stdin --policy /policy.toml -- python3 -; m2=$(stat -c %a%Y /usr/bin/id /etc/passwd); [ \"$m1\" = \"$m2\" ] && echo UNCHANGED",
        attack,
    );
    for name in [
        "chmod-setuid-outside",
        "chmod-outside",
        "utime-outside",
        "setxattr-outside",
        "memfd",
        "memfd-exec-sealed",
        "memfd-exec-mfd-exec",
        "socket-outside",
        "shm-outside",
        "syscall-above-ceiling",
        "file-setattr-outside",
        "setflags-outside",
        "prlimit-container-init",
        "prlimit-parent",
        "setpriority-user",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing: {out}"));
        assert!(!line.ends_with(" ok"), "{line}: {out}");
    }
    assert!(out.contains("UNCHANGED"), "{out}");
}
