//! One run cannot take the host, end to end with the real binary, as root
//! and with python3 allowed (so the string layer is not what stops it):
//! memory beyond `limits.memory_bytes` is ended by the OOM killer, a fork
//! bomb is held to `limits.processes` (the run's cgroup for root, RLIMIT_NPROC
//! in the run's user namespace for an account), a daemon that left the tree
//! dies with the run's cgroup, and no cgroup directory of a run is left
//! behind. Without a cgroup of its own, `required` refuses root (whose
//! processes RLIMIT_NPROC does not count) unless an enclosing cgroup bounds
//! them, and best-effort says what it lacks. Needs root; without it each
//! test says it cannot run (and fails under CI).

use crate::common::accounts::User;
use crate::common::{
    BIN, agent, cannot_run, marker, policy, root, sleeps_with, wait_for, wait_until_gone,
};
use agent_rsh::confine::cgroup;
use agent_rsh::confine::probe::SIMULATE_ENV;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const POLICY: &str = r#"
confinement = "required"
[commands]
allow = ["python3", "sleep", "echo"]
[packs]
off = ["python"]
[limits]
memory_bytes = 1073741824
processes = 128
"#;

/// Allocates and touches 4 GiB (bytes multiplication fills every page),
/// four times the policy's bound.
const HOG: &str = r#"
print("allocating", flush=True)
x = b"x" * (4 << 30)
print("survived", len(x), flush=True)
"#;

/// `forks` or `threads` (argv[1]): starts idle ones until the kernel
/// refuses, prints how many it got and the refusal, and leaves.
const COUNT: &str = r#"
import os, sys, threading, time
n, why = 0, None
while n < 100000:
    try:
        if sys.argv[1] == "forks":
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        else:
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    except (OSError, RuntimeError) as e:
        why = getattr(e, "errno", None) or str(e)
        break
    n += 1
print(sys.argv[1], n, why, flush=True)
os._exit(0)
"#;

/// The classic: every process forks for ever, threads where forks fail.
const BOMB: &str = r#"
import os, threading, time
while True:
    try:
        os.fork()
    except OSError:
        try:
            threading.Thread(target=time.sleep, args=(60,)).start()
        except RuntimeError:
            time.sleep(0.01)
"#;

fn skip() -> bool {
    if !root() {
        cannot_run("needs root (a run cgroup as root; a throwaway account)");
        return true;
    }
    if !std::path::Path::new("/usr/bin/python3").exists() {
        cannot_run("needs /usr/bin/python3 (apt-get install python3)");
        return true;
    }
    false
}

/// A policy file any account can read.
struct Shared {
    dir: tempfile::TempDir,
}

impl Shared {
    fn new(body: &str) -> Shared {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        let p = dir.path().join("policy.toml");
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, PermissionsExt::from_mode(0o644)).unwrap();
        Shared { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("policy.toml")
    }
}

/// Runs `python3 - ARGS` with `script` on stdin under `cmd` (agent-rsh,
/// or agent-rsh through setpriv, which execs it: the pid is agent-rsh's).
/// Returns the RunResult (`--verbose`: the full confinement report), the
/// output and agent-rsh's pid.
fn run_py(
    mut cmd: Command,
    policy: &Path,
    timeout_ms: u32,
    script: &str,
    args: &[&str],
) -> (Value, Output, u32) {
    cmd.args(["run", "--json", "--verbose", "--stdin", "--timeout"])
        .arg(timeout_ms.to_string())
        .arg("--policy")
        .arg(policy)
        .args(["--argv", "--", "python3", "-"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    // agent-rsh may refuse and exit before it reads the script (a run that
    // fails closed): its stdin then is a broken pipe, which is no error.
    let written = child.stdin.take().unwrap().write_all(script.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    let out = child.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a RunResult ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out, pid)
}

/// Run cgroups agent-rsh process `pid` left in the parent directories.
fn leftovers(pid: u32) -> Vec<PathBuf> {
    let Ok(layout) = cgroup::layout() else {
        return Vec::new();
    };
    let prefix = format!("{pid}-");
    layout
        .parents
        .iter()
        .filter_map(|p| std::fs::read_dir(p).ok())
        .flat_map(|d| d.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The run had a cgroup of its own, and none of its directories is left.
fn assert_cgroup_gone(r: &Value, pid: u32) {
    let paths = r["confinement"]["resources"]["paths"]
        .as_array()
        .unwrap_or_else(|| panic!("the run had no cgroup: {r}"));
    assert!(!paths.is_empty(), "{r}");
    for p in paths {
        let p = Path::new(p.as_str().unwrap());
        assert!(
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{pid}-")),
            "{} is not named after agent-rsh's pid {pid}",
            p.display()
        );
        assert!(!p.exists(), "{} was left behind", p.display());
    }
    assert_eq!(leftovers(pid), Vec::<PathBuf>::new());
}

/// Processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

/// Waits (a while) for the processes with `needle` to end; returns those
/// still there.
fn wait_processes_gone(needle: &str) -> Vec<String> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = processes_with(needle);
        if left.is_empty() || std::time::Instant::now() > until {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The host still forks and allocates after a run.
fn host_unharmed() {
    let out = Command::new("python3")
        .args([
            "-c",
            "x = bytearray(64 << 20); import os; print(os.fork() and 'ok' or '')",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ok"),
        "the host could not fork or allocate after the run: {out:?}"
    );
}

/// This process's mounts (/proc/self/mountinfo), but those of a container
/// engine another test module may be starting meanwhile.
fn mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| !l.contains("/containers/") && !l.contains("/netns/"))
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_string())
        .collect()
}

/// No mount of the run is left in this mount namespace: as many mounts
/// as before, and none new.
fn assert_no_extra_mount(before: &[String]) {
    let after = mounts();
    let extra: Vec<&String> = after.iter().filter(|m| !before.contains(m)).collect();
    assert!(extra.is_empty(), "mounts left behind: {extra:#?}");
    assert_eq!(
        after.len(),
        before.len(),
        "mountinfo lines before and after"
    );
}

fn warnings(r: &Value) -> String {
    r["warnings"].to_string()
}

#[test]
fn memory_beyond_the_bound_is_ended_by_the_oom_killer() {
    if skip() {
        return;
    }
    let p = policy(POLICY);
    let before = mounts();
    let tag = marker(4);
    let (r, out, pid) = run_py(agent(), &p.path, 60_000, HOG, &[&tag]);
    let res = &r["confinement"]["resources"];
    assert!(
        res["mechanism"].as_str().unwrap().starts_with("cgroup"),
        "{r}"
    );
    assert_eq!(res["memoryBytes"], 1u64 << 30, "{r}");
    // Killed by SIGKILL: 128 + 9, as the exit-code contract says.
    assert_eq!(r["status"], "signaled", "{r}");
    assert_eq!(r["signal"], libc::SIGKILL, "{r}");
    assert_eq!(out.status.code(), Some(137), "{r}");
    assert_eq!(r["stdout"], "allocating\n", "{r}");
    assert!(res["oomKills"].as_u64().unwrap() >= 1, "{r}");
    if let Some(peak) = res["memoryPeakBytes"].as_u64() {
        assert!(peak <= 1 << 30, "peak {peak} above the bound: {r}");
    }
    let w = warnings(&r);
    assert!(
        w.contains("limits.memory_bytes (1073741824 bytes)") && w.contains("OOM killer"),
        "{r}"
    );
    assert!(
        r["confinement"]["guarantees"]["resources"]
            .as_str()
            .unwrap()
            .contains("memory and tasks of the whole run"),
        "{r}"
    );
    assert_cgroup_gone(&r, pid);
    assert_eq!(wait_processes_gone(&tag), Vec::<String>::new(), "{r}");
    assert_no_extra_mount(&before);
    host_unharmed();

    // Under the bound the same kind of run goes through.
    let (r, out, pid) = run_py(
        agent(),
        &p.path,
        60_000,
        "x = b'x' * (512 << 20); print('fine', len(x))",
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["stdout"], format!("fine {}\n", 512u64 << 20), "{r}");
    assert!(!warnings(&r).contains("limits.memory_bytes"), "{r}");
    assert_eq!(r["confinement"]["resources"]["oomKills"], 0, "{r}");
    assert_cgroup_gone(&r, pid);
    // The default (summary) report keeps the mechanism, the bounds and the
    // counters.
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .args(["--", "echo hi"])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let res = &r["confinement"]["resources"];
    assert!(
        res["mechanism"].as_str().unwrap().starts_with("cgroup"),
        "{r}"
    );
    assert_eq!(res["memoryBytes"], 1u64 << 30, "{r}");
    assert_eq!(res["processes"], 128, "{r}");
    assert_eq!(res["oomKills"], 0, "{r}");
    assert_eq!(res["pidsRefused"], 0, "{r}");
}

#[test]
fn a_fork_bomb_as_root_is_held_to_the_task_bound() {
    if skip() {
        return;
    }
    let p = policy(POLICY);
    // Forks, then threads: the guardian and python are two of the 128.
    for kind in ["forks", "threads"] {
        let (r, out, pid) = run_py(agent(), &p.path, 60_000, COUNT, &[kind]);
        assert_eq!(out.status.code(), Some(0), "{r}");
        let res = &r["confinement"]["resources"];
        assert!(
            res["mechanism"].as_str().unwrap().starts_with("cgroup"),
            "{r}"
        );
        let words: Vec<String> = r["stdout"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(words[0], kind, "{r}");
        let n: u64 = words[1].parse().unwrap();
        assert_eq!(n + 2, 128, "{kind}: {r}");
        if kind == "forks" {
            assert_eq!(words[2], libc::EAGAIN.to_string(), "{r}");
        }
        assert!(res["pidsRefused"].as_u64().unwrap() >= 1, "{r}");
        if let Some(peak) = res["tasksPeak"].as_u64() {
            assert_eq!(peak, 128, "{r}");
        }
        assert!(warnings(&r).contains("limits.processes (128)"), "{r}");
        assert_cgroup_gone(&r, pid);
    }

    // The real thing, until the deadline.
    let before = mounts();
    let tag = marker(7);
    let (r, out, pid) = run_py(agent(), &p.path, 3000, BOMB, &[&tag]);
    assert_eq!(r["status"], "timedOut", "{r}");
    assert_eq!(out.status.code(), Some(124), "{r}");
    let res = &r["confinement"]["resources"];
    assert!(res["pidsRefused"].as_u64().unwrap() >= 1, "{r}");
    if let Some(peak) = res["tasksPeak"].as_u64() {
        assert!(peak <= 128, "{peak} tasks at once: {r}");
    }
    assert!(warnings(&r).contains("limits.processes (128)"), "{r}");
    assert_eq!(wait_processes_gone(&tag), Vec::<String>::new(), "{r}");
    assert_cgroup_gone(&r, pid);
    assert_no_extra_mount(&before);
    host_unharmed();
}

#[test]
fn a_fork_bomb_of_an_account_is_held_by_rlimit_nproc() {
    if skip() {
        return;
    }
    let u = User::without_home();
    let p = Shared::new(POLICY);
    for kind in ["forks", "threads"] {
        let (r, out, pid) = run_py(u.agent(), &p.path(), 60_000, COUNT, &[kind]);
        assert_eq!(out.status.code(), Some(0), "{r}");
        let c = &r["confinement"];
        let n: u64 = r["stdout"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        // The guardian, python and what it started.
        assert!(n + 2 <= 128 && n >= 100, "{kind}: {n}: {r}");
        // No delegated cgroup here: rlimits, and the report says so.
        if !c["resources"]["mechanism"]
            .as_str()
            .unwrap()
            .starts_with("cgroup")
        {
            assert_eq!(c["resources"]["mechanism"], "rlimits", "{r}");
            assert!(
                c["resources"]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("cgroup"),
                "{r}"
            );
            let g = c["guarantees"]["resources"].as_str().unwrap();
            assert!(g.contains("RLIMIT_NPROC") && g.contains("RLIMIT_AS"), "{r}");
            if c["userNamespace"] == true {
                assert!(g.contains("user namespace"), "{r}");
            }
        } else {
            assert_cgroup_gone(&r, pid);
        }
        assert_eq!(leftovers(pid), Vec::<PathBuf>::new());
    }
    let tag = marker(7);
    let (r, out, pid) = run_py(u.agent(), &p.path(), 3000, BOMB, &[&tag]);
    assert_eq!(r["status"], "timedOut", "{r}");
    assert_eq!(out.status.code(), Some(124), "{r}");
    assert_eq!(wait_processes_gone(&tag), Vec::<String>::new(), "{r}");
    assert_eq!(leftovers(pid), Vec::<PathBuf>::new());
    host_unharmed();
}

/// Without a PID namespace (the seam takes it away, as a container's
/// profile would), a daemon that left the tree survives its guardian's
/// SIGKILL; the run's cgroup, emptied by agent-rsh at the end, still
/// takes it.
#[test]
fn a_daemon_dies_with_the_run_cgroup_when_its_guardian_is_killed() {
    if skip() {
        return;
    }
    let p = policy(POLICY);
    let tag = marker(300);
    let script = format!(
        r#"
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{tag}"])
    os._exit(0)
os.waitpid(pid, 0)
print("daemonized", flush=True)
time.sleep(300)
"#
    );
    let mut child = Command::new(BIN)
        .env_remove("AGENT_RSH_POLICY")
        .env(SIMULATE_ENV, "pidns")
        .args(["run", "--events", "--verbose", "--stdin", "--policy"])
        .arg(&p.path)
        .args(["--argv", "--", "python3", "-", &tag])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut guardian = 0;
    for line in lines.by_ref() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["type"] == "start" {
            guardian = v["pid"].as_i64().unwrap() as i32;
        }
        if v["type"] == "output" && v["data"] == "daemonized\n" {
            break;
        }
        assert_ne!(v["type"], "exit", "the run ended early: {v}");
    }
    assert!(guardian > 0);
    wait_for("the daemon", || sleeps_with(&tag).len() == 1);
    // SAFETY: kill(2) on the guardian, our grandchild.
    assert_eq!(unsafe { libc::kill(guardian, libc::SIGKILL) }, 0);
    let last: Value = lines
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .last()
        .unwrap();
    child.wait().unwrap();
    assert_eq!(last["type"], "exit", "{last}");
    let c = &last["confinement"];
    assert_eq!(c["pidNamespace"], false, "{last}");
    assert!(
        c["guarantees"]["tree"].as_str().unwrap().contains("cgroup"),
        "{last}"
    );
    // The daemon, and the command that outlived its guardian.
    assert_eq!(wait_until_gone(&tag), Vec::<String>::new(), "{last}");
    assert_eq!(wait_processes_gone(&tag), Vec::<String>::new(), "{last}");
    assert_cgroup_gone(&last, pid);
}

/// `limits.processes = 0` is "not bounded by agent-rsh", as 0 is for the
/// memory: no pids.max, no RLIMIT_NPROC; an account's run forks as root's
/// does (RLIMIT_NPROC = 0 used to refuse an account every fork), and the
/// report says the tasks are not bounded.
#[test]
fn processes_zero_bounds_nothing_for_root_and_accounts_alike() {
    if skip() {
        return;
    }
    let p = Shared::new(&POLICY.replace("processes = 128", "processes = 0"));
    let fork =
        "import os\npid = os.fork()\nif pid == 0: os._exit(0)\nos.waitpid(pid, 0)\nprint('forked')";
    let u = User::without_home();
    for (who, cmd) in [("root", agent()), ("account", u.agent())] {
        let (r, out, _) = run_py(cmd, &p.path(), 60_000, fork, &[]);
        assert_eq!(out.status.code(), Some(0), "{who}: {r}");
        assert_eq!(r["stdout"], "forked\n", "{who}: {r}");
        let c = &r["confinement"];
        assert_eq!(c["limits"]["processes"], 0, "{who}: {r}");
        assert!(c["resources"]["processes"].is_null(), "{who}: {r}");
        assert!(
            c["guarantees"]["resources"]
                .as_str()
                .unwrap()
                .contains("tasks not bounded (limits.processes = 0)"),
            "{who}: {r}"
        );
    }
}

/// An account without a cgroup of the run's own: RLIMIT_NPROC holds its
/// tasks, but nothing holds the run's memory as a whole; the RunResult says
/// so in a warning instead of reporting rlimits silently (and text mode
/// prints it on stderr).
#[test]
fn an_account_without_a_cgroup_is_told_memory_is_bounded_per_process_only() {
    if skip() {
        return;
    }
    let u = User::without_home();
    let p = Shared::new(POLICY);
    let (r, out, _) = run_py(u.agent(), &p.path(), 60_000, "print('ran')", &[]);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["stdout"], "ran\n", "{r}");
    let res = &r["confinement"]["resources"];
    let said = "limits.memory_bytes (1073741824 bytes) is not enforced: memory is bounded per process by RLIMIT_AS (limits.address_space_bytes, 17179869184 bytes), not for the whole run: no writable cgroup (";
    if res["mechanism"].as_str().unwrap().starts_with("cgroup") {
        // A delegated cgroup holds the whole run: nothing to say.
        assert!(!warnings(&r).contains("limits.memory_bytes"), "{r}");
        return;
    }
    assert_eq!(res["mechanism"], "rlimits", "{r}");
    assert!(res["memoryBytes"].is_null(), "{r}");
    assert!(warnings(&r).contains(said), "{r}");
    // limits.processes is held (RLIMIT_NPROC counts the account's tasks).
    assert!(!warnings(&r).contains("limits.processes"), "{r}");
    let out = u
        .agent()
        .args(["run", "--policy"])
        .arg(p.path())
        .args(["--", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("agent-rsh: warning: {said}")),
        "{err}"
    );
    assert!(
        err.contains("`limits.memory_bytes = 0` in the policy silences this"),
        "{err}"
    );
    // Without a memory bound in the policy, nothing is lost.
    let p = Shared::new(&POLICY.replace("memory_bytes = 1073741824", "memory_bytes = 0"));
    let (r, out, _) = run_py(u.agent(), &p.path(), 60_000, "print('ran')", &[]);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert!(!warnings(&r).contains("limits.memory_bytes"), "{r}");
}

/// Without a PID namespace, agent-rsh and its guardian SIGKILLed together
/// leave the tree running inside the run's cgroup, which nobody empties
/// at the end. A later run's sweep of leftovers kills those tasks (the
/// owner is dead) before it removes the directories.
#[test]
fn a_later_run_kills_the_tree_left_when_agent_rsh_and_its_guardian_die_together() {
    if skip() {
        return;
    }
    let p = policy(POLICY);
    let tag = marker(300);
    let script = format!(
        r#"
import os, time
if os.fork() == 0:
    os.setsid()
    os.execvp("sleep", ["sleep", "{tag}"])
print("started", flush=True)
time.sleep(300)
"#
    );
    let mut child = Command::new(BIN)
        .env_remove("AGENT_RSH_POLICY")
        .env(SIMULATE_ENV, "pidns")
        .args(["run", "--events", "--verbose", "--stdin", "--policy"])
        .arg(&p.path)
        .args(["--argv", "--", "python3", "-", &tag])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut guardian = 0;
    for line in lines.by_ref() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["type"] == "start" {
            guardian = v["pid"].as_i64().unwrap() as i32;
        }
        if v["type"] == "output" && v["data"] == "started\n" {
            break;
        }
        assert_ne!(v["type"], "exit", "the run ended early: {v}");
    }
    assert!(guardian > 0);
    wait_for("the sleeper", || sleeps_with(&tag).len() == 1);
    let left = leftovers(pid);
    assert!(!left.is_empty(), "the run has a cgroup");
    // Stopped first, so that neither can react to the other's death.
    for (who, sig) in [
        (pid as i32, libc::SIGSTOP),
        (guardian, libc::SIGSTOP),
        (guardian, libc::SIGKILL),
        (pid as i32, libc::SIGKILL),
    ] {
        // SAFETY: kill(2) on our child and grandchild.
        assert_eq!(unsafe { libc::kill(who, sig) }, 0);
    }
    child.wait().unwrap();
    drop(lines);
    // The gap this test is about: the tree outlived both.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(sleeps_with(&tag).len(), 1, "the sleeper outlived both");
    assert_eq!(leftovers(pid), left, "the cgroup was left");
    // Old enough for the sweep (it spares young ones: a run between its
    // cgroup's creation and its guardian's join looks empty).
    let old = libc::timespec {
        tv_sec: 1_000_000_000,
        tv_nsec: 0,
    };
    for d in &left {
        let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: utimensat with a NUL-terminated path and two timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [old, old].as_ptr(), 0) };
        assert_eq!(r, 0, "utimensat: {}", std::io::Error::last_os_error());
    }
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .args(["--", "echo later"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(wait_until_gone(&tag), Vec::<String>::new(), "no survivor");
    assert_eq!(leftovers(pid), Vec::<PathBuf>::new(), "the cgroup is gone");
}

/// Root without a cgroup of its own (the seam): RLIMIT_NPROC does not
/// count its processes, so "required" runs only when an enclosing
/// cgroup's pids.max bounds them, and refuses in one line otherwise;
/// best-effort runs and says what is not enforced.
#[test]
fn root_without_a_cgroup_fails_closed_unless_something_bounds_it() {
    if skip() {
        return;
    }
    let p = policy(POLICY);
    let run = |body: &str| {
        let p = policy(body);
        let mut c = agent();
        c.env(SIMULATE_ENV, "cgroup");
        let (r, out, pid) = run_py(c, &p.path, 60_000, "print('ran')", &[]);
        assert_eq!(leftovers(pid), Vec::<PathBuf>::new());
        (r, out)
    };
    let (r, out) = run(POLICY);
    match cgroup::enclosing_pids_max() {
        None => {
            assert_eq!(out.status.code(), Some(125), "{r}");
            assert_eq!(r["status"], "failed", "{r}");
            let e = r["error"].as_str().unwrap();
            assert!(!e.contains('\n'), "one line: {e}");
            for said in [
                "the run's cgroup is not available (simulated by",
                "RLIMIT_NPROC",
                "pids.max",
                "confinement = \"best-effort\"",
            ] {
                assert!(e.contains(said), "{said} not in {e}");
            }
            assert_eq!(r["stdout"], "", "nothing ran: {r}");
        }
        Some((max, dir)) => {
            assert_eq!(out.status.code(), Some(0), "{r}");
            let res = &r["confinement"]["resources"];
            assert_eq!(res["mechanism"], "enclosing cgroup", "{r}");
            assert_eq!(res["enclosingPidsMax"], max, "{r}");
            assert_eq!(res["enclosingCgroup"], dir.display().to_string(), "{r}");
            // The policy's own bounds are named as not enforced.
            let w = warnings(&r);
            assert!(
                w.contains("limits.memory_bytes (1073741824 bytes) is not enforced")
                    && w.contains("limits.processes (128) is not enforced")
                    && w.contains(&format!("pids.max ({max}) of {}", dir.display())),
                "{r}"
            );
        }
    }
    // The doctor says the same.
    let out = agent()
        .env(SIMULATE_ENV, "cgroup")
        .args(["doctor", "--json", "--policy"])
        .arg(&p.path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kernel"]["nprocBindsCaller"], false, "{v}");
    if cgroup::enclosing_pids_max().is_none() {
        assert_eq!(out.status.code(), Some(125), "{v}");
        assert!(
            v["problem"].as_str().unwrap().contains("RLIMIT_NPROC"),
            "{v}"
        );
    }

    let (r, out) = run(&POLICY.replace("\"required\"", "\"best-effort\""));
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["stdout"], "ran\n", "{r}");
    let res = &r["confinement"]["resources"];
    if cgroup::enclosing_pids_max().is_none() {
        assert_eq!(res["mechanism"], "address space only", "{r}");
        assert!(
            warnings(&r).contains("limits.processes and limits.memory_bytes are not enforced"),
            "{r}"
        );
        assert!(
            r["confinement"]["guarantees"]["resources"]
                .as_str()
                .unwrap()
                .contains("not bounded"),
            "{r}"
        );
    }
}

#[test]
fn doctor_names_what_bounds_a_run() {
    if skip() {
        return;
    }
    let p = Shared::new(POLICY);
    let out = agent()
        .args(["doctor", "--json", "--policy"])
        .arg(p.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert!(
        v["kernel"]["cgroup"]
            .as_str()
            .unwrap()
            .starts_with("cgroup"),
        "{v}"
    );
    let res = &v["wouldEnforce"]["resources"];
    assert!(
        res["mechanism"].as_str().unwrap().starts_with("cgroup"),
        "{v}"
    );
    assert_eq!(res["processes"], 128, "{v}");
    assert!(res["paths"].is_null(), "stand-in paths hidden: {v}");
    let text = agent()
        .args(["doctor", "--policy"])
        .arg(p.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("  one run cannot take the host:       cgroup"),
        "{text}"
    );
    assert!(
        text.contains("  resources:         the run's own cgroup"),
        "{text}"
    );

    // An account without a delegated cgroup: rlimits, and runs start.
    let u = User::without_home();
    let out = u
        .agent()
        .args(["doctor", "--json", "--policy"])
        .arg(p.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["kernel"]["nprocBindsCaller"], true, "{v}");
    let res = &v["wouldEnforce"]["resources"];
    if !res["mechanism"].as_str().unwrap().starts_with("cgroup") {
        assert_eq!(res["mechanism"], "rlimits", "{v}");
    }
}

/// `jobs --gc` sweeps the run cgroups of agent-rsh processes that died
/// without removing theirs (old enough, their pid gone).
#[test]
fn jobs_gc_sweeps_leftover_run_cgroups() {
    if skip() {
        return;
    }
    let layout = cgroup::layout().expect("layout as root");
    // A pid above pid_max never exists.
    let stale: Vec<PathBuf> = layout
        .parents
        .iter()
        .map(|p| p.join(format!("4194999-{}2", std::process::id())))
        .collect();
    let old = libc::timespec {
        tv_sec: 1_000_000_000,
        tv_nsec: 0,
    };
    for d in &stale {
        std::fs::create_dir(d).unwrap();
        let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: utimensat with a NUL-terminated path and two timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [old, old].as_ptr(), 0) };
        assert_eq!(r, 0, "utimensat: {}", std::io::Error::last_os_error());
    }
    let state = tempfile::tempdir().unwrap();
    let out = agent()
        .env("XDG_STATE_HOME", state.path())
        .args(["jobs", "--gc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for d in &stale {
        // Another run's sweep may have been first.
        let said = v["removedCgroups"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == &Value::from(d.display().to_string())));
        assert!(said || !d.exists(), "{} not swept: {v}", d.display());
        assert!(!d.exists(), "{} left: {v}", d.display());
    }
}
