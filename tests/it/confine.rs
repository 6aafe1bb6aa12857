//! Kernel confinement, end to end: the real binary, real processes, files,
//! sockets and signals. Each escape is paired with a control that shows the
//! same command does work when the policy allows it, so a refusal is the
//! kernel's doing and not a broken test.

use crate::common::accounts::chmod;
use crate::common::{self, TestPolicy, bin};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// No shell on the list: where /bin/sh is bash, allowing bash would allow
/// the very shell the escapes reach for. Tests that need bash say so.
/// The argument packs of find, awk and git are off: these tests run
/// `find -exec sh`, `awk system()` and `git -c core.fsmonitor` on purpose,
/// to show the kernel refuses what the string layer would have stopped
/// (`args` shows the string layer stopping them).
const ALLOW: &str = r#"
[commands]
allow = ["find", "awk", "cat", "tee", "touch", "xargs", "git"]
[packs]
off = ["find", "awk", "git"]
"#;
const ALLOW_BASH: &str = r#"
[commands]
allow = ["bash"]
"#;

/// A policy file in its own world-readable directory (the fork-bomb test
/// reads it as another user).
type Policy = TestPolicy;

/// `top`: top-level keys; `tables`: extra tables after [commands].
fn policy(top: &str, tables: &str) -> Policy {
    policy_allowing(ALLOW, top, tables)
}

fn bash_policy(top: &str, tables: &str) -> Policy {
    policy_allowing(ALLOW_BASH, top, tables)
}

fn policy_allowing(allow: &str, top: &str, tables: &str) -> Policy {
    let p = common::policy(&format!("{top}\n{allow}\n{tables}\n"));
    chmod(p.dir.path(), 0o755);
    chmod(&p.path, 0o644);
    p
}

fn run_in(p: &Policy, ws: Option<&Path>, cmd: &str) -> Value {
    run_with(p, ws, cmd, &[])
}

/// Without the mount view the shells are the real ones, which the kernel
/// refuses to execute unless the policy allows them (with the view they
/// are agent-rsh's interpreter: tests/it/scripts.rs).
fn run_real_shells(p: &Policy, ws: Option<&Path>, cmd: &str) -> Value {
    run_with(p, ws, cmd, &[("AGENT_RSH_SIMULATE_MISSING", "mountns")])
}

fn run_with(p: &Policy, ws: Option<&Path>, cmd: &str, env: &[(&str, &str)]) -> Value {
    let mut c = Command::new(bin());
    c.envs(env.iter().copied());
    c.args(["run", "--json", "--verbose", "--policy"])
        .arg(&p.path);
    if let Some(ws) = ws {
        c.arg("--workspace").arg(ws);
    }
    let out = c.args(["--", cmd]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a RunResult ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn s<'a>(r: &'a Value, key: &str) -> &'a str {
    r[key].as_str().unwrap_or("")
}

/// Landlock's ABI here, from the doctor; tests that need it say they
/// cannot run on kernels without it (a failure under CI).
fn landlock_abi() -> u64 {
    let out = Command::new(bin())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).expect("doctor prints JSON");
    v["kernel"]["landlockAbi"].as_u64().unwrap()
}

macro_rules! need_landlock {
    () => {
        if landlock_abi() == 0 {
            common::cannot_run("this kernel has no Landlock (see `agent-rsh doctor`)");
            return;
        }
    };
}

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Lets the shell run, for the controls.
const ALLOW_SH: &str = "[scopes]\nexec = [\"/bin/sh\"]";

#[test]
fn find_exec_shell_is_refused_by_the_kernel() {
    need_landlock!();
    let ws = workspace();
    let target = ws.path().join("pwned");
    let cmd = format!(
        "find . -maxdepth 0 -exec /bin/sh -c 'touch {}' \\;",
        target.display()
    );
    let r = run_real_shells(&policy("", ""), Some(ws.path()), &cmd);
    assert_eq!(s(&r, "status"), "exited", "{r}");
    assert!(s(&r, "stderr").contains("/bin/sh"), "{r}");
    assert!(s(&r, "stderr").contains("Permission denied"), "{r}");
    assert!(!target.exists(), "the shell ran: {r}");

    // find -exec itself works: the allowed program may run again.
    let r = run_real_shells(
        &policy("", ""),
        Some(ws.path()),
        "find . -maxdepth 0 -exec find --version \\;",
    );
    assert!(s(&r, "stdout").contains("findutils"), "{r}");

    // Control: with sh and touch in scopes.exec the same command creates it.
    let r = run_real_shells(&policy("", ALLOW_SH), Some(ws.path()), &cmd);
    assert!(target.exists(), "control did not run: {r}");
}

#[test]
fn awk_system_is_refused_by_the_kernel() {
    need_landlock!();
    let ws = workspace();
    let target = ws.path().join("pwned");
    let cmd = format!("awk 'BEGIN{{system(\"touch {}\")}}'", target.display());
    let r = run_real_shells(&policy("", ""), Some(ws.path()), &cmd);
    assert_eq!(s(&r, "status"), "exited", "{r}");
    assert!(!target.exists(), "awk's shell ran: {r}");
    let r = run_real_shells(&policy("", ALLOW_SH), Some(ws.path()), &cmd);
    assert!(target.exists(), "control did not run: {r}");
}

#[test]
fn git_fsmonitor_is_refused_by_the_kernel() {
    need_landlock!();
    if Command::new("git").arg("--version").output().is_err() {
        common::cannot_run("git is not installed");
        return;
    }
    let ws = workspace();
    let p = policy("", "");
    // Made in the mount view: without it seccomp refuses chmod, which git
    // init needs.
    let r = run_with(&p, Some(ws.path()), "git init -q", &[]);
    assert_eq!(r["exitCode"], 0, "{r}");
    let target = ws.path().join("pwned");
    // `&&` makes git hand the hook to /bin/sh -c.
    let cmd = format!(
        "git -c core.fsmonitor='touch {} && true' status",
        target.display()
    );
    let r = run_real_shells(&p, Some(ws.path()), &cmd);
    assert!(s(&r, "stderr").contains("Permission denied"), "{r}");
    assert!(!target.exists(), "git's hook ran: {r}");
}

fn loader() -> Option<&'static str> {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

#[test]
fn the_loader_cannot_map_a_shell() {
    need_landlock!();
    let Some(ld) = loader() else {
        common::cannot_run("no known ELF loader path on this architecture");
        return;
    };
    let ws = workspace();
    let target = ws.path().join("pwned");
    let cmd = format!(
        "find . -maxdepth 0 -exec {ld} /bin/sh -c 'touch {}' \\;",
        target.display()
    );
    let r = run_real_shells(&policy("", ""), Some(ws.path()), &cmd);
    assert!(s(&r, "stderr").contains("Permission denied"), "{r}");
    assert!(!target.exists(), "the loader ran a shell: {r}");
    // The loader itself runs (it must, for every dynamic program); it can
    // only map what is readable, such as the allowed program.
    let find = std::fs::canonicalize("/usr/bin/find").unwrap();
    let r = run_real_shells(
        &policy("", ""),
        Some(ws.path()),
        &format!(
            "find . -maxdepth 0 -exec {ld} {} --version \\;",
            find.display()
        ),
    );
    assert!(s(&r, "stdout").contains("findutils"), "{r}");
}

#[test]
fn files_outside_the_scopes_stay_out_of_reach() {
    need_landlock!();
    let outside = tempfile::tempdir().unwrap();
    let canary = outside.path().join("canary");
    std::fs::write(&canary, "CANARY-7f3a\n").unwrap();
    let ws = workspace();
    std::fs::write(ws.path().join("inside"), "INSIDE-OK\n").unwrap();
    let p = policy("", "");

    let r = run_in(&p, Some(ws.path()), &format!("cat {}", canary.display()));
    assert_ne!(r["exitCode"], 0, "{r}");
    assert!(!s(&r, "stdout").contains("CANARY"), "{r}");
    assert!(
        r["warnings"].to_string().contains("Landlock"),
        "no hint: {r}"
    );
    let r = run_in(&p, Some(ws.path()), "cat inside");
    assert_eq!(s(&r, "stdout"), "INSIDE-OK\n", "{r}");

    // No new file outside, no change to an existing one.
    let new = outside.path().join("new");
    let r = run_in(&p, Some(ws.path()), &format!("touch {}", new.display()));
    assert_ne!(r["exitCode"], 0, "{r}");
    assert!(!new.exists());
    let r = run_in(&p, Some(ws.path()), &format!("tee {}", canary.display()));
    assert_ne!(r["exitCode"], 0, "{r}");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "CANARY-7f3a\n");
    let r = run_in(&p, Some(ws.path()), "touch made-inside");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert!(ws.path().join("made-inside").exists());
}

/// Runs `xargs cat` with `--stdin`, feeding it a path that is only known
/// once agent-rsh has a pid; returns the RunResult.
fn cat_path_via_stdin(p: &Policy, ws: &Path, path_of: impl Fn(u32) -> String) -> Value {
    let mut child = Command::new(bin())
        .args(["run", "--json", "--stdin", "--policy"])
        .arg(&p.path)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "xargs cat"])
        .env("CONFINE_TEST_MARKER", "environ-secret-51d2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = path_of(child.id()) + "\n";
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(line.as_bytes()).unwrap();
    drop(stdin);
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.wait().unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn agent_rsh_environ_is_unreadable() {
    need_landlock!();
    let p = policy("", "");
    let ws = workspace();
    let r = cat_path_via_stdin(&p, ws.path(), |pid| format!("/proc/{pid}/environ"));
    assert!(!s(&r, "stdout").contains("environ-secret"), "{r}");
    // Landlock refuses it; in the run's own /proc (the mount view)
    // agent-rsh's pid does not even exist.
    assert!(
        s(&r, "stderr").contains("Permission denied")
            || s(&r, "stderr").contains("No such file or directory"),
        "{r}"
    );
    // Control: the same pipeline reads a workspace file.
    let f = ws.path().join("f");
    std::fs::write(&f, "via-xargs\n").unwrap();
    let r = cat_path_via_stdin(&p, ws.path(), |_| f.display().to_string());
    assert_eq!(s(&r, "stdout"), "via-xargs\n", "{r}");
}

#[test]
fn child_has_no_new_privs_and_a_seccomp_filter() {
    let r = run_in(&policy("", ""), None, "cat /proc/self/status");
    assert_eq!(r["exitCode"], 0, "{r}");
    let out = s(&r, "stdout");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("CapPrm:\t0000000000000000"), "{out}");
    assert_eq!(r["confinement"]["seccomp"]["enforced"], true, "{r}");
}

fn bash_to(p: &Policy, proto: &str, port: u16) -> Value {
    run_in(
        p,
        None,
        &format!("bash -c 'echo hi > /dev/{proto}/127.0.0.1/{port}'"),
    )
}

fn tcp_received(l: &std::net::TcpListener) -> Option<String> {
    l.set_nonblocking(true).unwrap();
    let (mut c, _) = l.accept().ok()?;
    c.set_nonblocking(false).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    Some(s)
}

fn udp_received(u: &std::net::UdpSocket) -> bool {
    u.set_nonblocking(true).unwrap();
    let mut b = [0u8; 16];
    u.recv(&mut b).is_ok()
}

#[test]
fn network_none_refuses_tcp_and_udp_and_allow_permits_tcp() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let tport = tcp.local_addr().unwrap().port();
    let uport = udp.local_addr().unwrap().port();
    for top in [
        "network = \"none\"",
        "network = \"none\"\nnetwork_namespace = true",
    ] {
        let p = bash_policy(top, "");
        let r = bash_to(&p, "tcp", tport);
        assert_ne!(r["exitCode"], 0, "{top}: {r}");
        let r = bash_to(&p, "udp", uport);
        assert_ne!(r["exitCode"], 0, "{top}: {r}");
        assert!(
            tcp_received(&tcp).is_none(),
            "{top}: a TCP connection got through"
        );
        assert!(!udp_received(&udp), "{top}: a UDP datagram got through");
    }
    let r = bash_to(&bash_policy("network = \"allow\"", ""), "tcp", tport);
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(tcp_received(&tcp).as_deref(), Some("hi\n"));
}

#[test]
fn network_namespace_is_on_by_default_and_reported() {
    let r = run_in(&policy("", ""), None, "cat /proc/self/status");
    let netns = r["confinement"]["userNamespace"] == true
        || agent_rsh::confine::probe::try_namespaces(
            (libc::CLONE_NEWPID | libc::CLONE_NEWNET) as libc::c_ulong,
        )
        .0;
    assert_eq!(r["confinement"]["networkNamespace"], netns, "{r}");
    let r = run_in(
        &policy("network_namespace = false", ""),
        None,
        "cat /proc/self/status",
    );
    assert_eq!(r["confinement"]["networkNamespace"], false, "{r}");
}

#[test]
fn fork_bomb_ends_at_the_deadline_with_nothing_left() {
    // RLIMIT_NPROC does not bind root, so as root the bomb runs as nobody,
    // the kind of user the process limit is for.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && Command::new("setpriv").arg("--version").output().is_err() {
        common::cannot_run("running as root without setpriv to drop to nobody");
        return;
    }
    let p = bash_policy(
        "confinement = \"best-effort\"",
        "[limits]\ntimeout_ms = 3000\nkill_grace_ms = 500",
    );
    let marker = format!("bomb{}", std::process::id());
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()]);
        c
    } else {
        Command::new(bin())
    };
    let t = Instant::now();
    let out = c
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .args(["--", &format!("bash -c ': {marker}; f(){{ f | f; }}; f'")])
        .output()
        .unwrap();
    let took = t.elapsed();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(s(&r, "status"), "timedOut", "{r}");
    assert_eq!(out.status.code(), Some(124));
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // Nothing of the bomb survives the run (a /proc scan: procps may be
    // missing).
    let mut left = Vec::new();
    for _ in 0..20 {
        left = common::processes_with(&marker);
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(left.is_empty(), "left behind: {left:?}");
    // And the machine still starts processes.
    let r = run_in(&policy("", ""), None, "cat /proc/self/status");
    assert_eq!(r["exitCode"], 0, "{r}");
}

fn simulated(args: &[&str], p: &Policy, ws: &Path) -> std::process::Output {
    Command::new(bin())
        .arg("run")
        .args(args)
        .arg("--policy")
        .arg(&p.path)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "touch ran"])
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "landlock")
        .output()
        .unwrap()
}

#[test]
fn required_fails_closed_without_landlock() {
    let ws = workspace();
    let out = simulated(
        &["--json"],
        &policy("confinement = \"required\"", ""),
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(125));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s(&r, "status"), "failed", "{r}");
    assert!(s(&r, "error").contains("Landlock"), "{r}");
    assert!(!ws.path().join("ran").exists(), "the command ran");

    // The default mode is required; text mode says why on stderr.
    let out = simulated(&[], &policy("", ""), ws.path());
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Landlock"));
    assert!(!ws.path().join("ran").exists(), "the command ran");

    // best-effort runs, and says what it could not enforce.
    let out = simulated(
        &["--json"],
        &policy("confinement = \"best-effort\"", ""),
        ws.path(),
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["confinement"]["landlock"]["enforced"], false, "{r}");
    assert!(
        r["warnings"]
            .to_string()
            .contains("Landlock is not enforced"),
        "{r}"
    );
}

#[test]
fn doctor_reports_kernel_and_verdict() {
    let out = Command::new(bin())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "agent-rsh.doctor/1");
    assert!(v["kernel"]["landlockAbi"].is_u64());
    assert_eq!(v["ok"], out.status.success(), "{v}");

    let out = Command::new(bin())
        .arg("doctor")
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "landlock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fail closed"), "{text}");
    assert!(text.contains("Landlock"), "{text}");
}

/// The doctor takes the PID namespace away when the seam does, as a run
/// does: it then says what such a run enforces (no PID namespace, hence
/// no mount view; the subreaper holds the tree), not what this kernel
/// could do.
#[test]
fn doctor_honours_a_simulated_missing_pid_namespace() {
    let p = policy("confinement = \"required\"", "");
    let sim = agent_rsh::confine::probe::SIMULATE_ENV;
    let doctor = Command::new(bin())
        .args(["doctor", "--json", "--policy"])
        .arg(&p.path)
        .env(sim, "pidns")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(doctor.status.code(), Some(0), "{v}");
    assert_eq!(v["kernel"]["pidNamespace"], false, "{v}");
    let would = &v["wouldEnforce"];
    assert_eq!(would["pidNamespace"], false, "{v}");
    assert_eq!(would["mountView"], false, "{v}");
    assert!(
        would["guarantees"]["tree"]
            .as_str()
            .unwrap()
            .starts_with("subreaper"),
        "{v}"
    );
    assert!(
        v["warnings"]
            .to_string()
            .contains("no PID namespace (simulated by AGENT_RSH_SIMULATE_MISSING)"),
        "{v}"
    );
    // What a run under the same seam reports.
    let ws = workspace();
    let out = Command::new(bin())
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "cat /proc/self/status"])
        .env(sim, "pidns")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["exitCode"], 0, "{r}");
    let c = &r["confinement"];
    for key in ["pidNamespace", "mountView", "userNamespace"] {
        assert_eq!(c[key], would[key], "{key}: run {r}\ndoctor {v}");
    }
    for g in ["exec", "files", "metadata", "sockets", "tree"] {
        assert_eq!(
            c["guarantees"][g], would["guarantees"][g],
            "{g}: run {r}\ndoctor {v}"
        );
    }
    let text = Command::new(bin())
        .args(["doctor", "--policy"])
        .arg(&p.path)
        .env(sim, "pidns")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("  pid namespace:     no"), "{text}");
    assert!(text.contains("verdict: runs can start"), "{text}");
}

#[test]
fn report_names_what_was_enforced() {
    need_landlock!();
    let r = run_in(&policy("", ""), None, "cat /proc/self/status");
    let l = &r["confinement"]["landlock"];
    assert_eq!(l["enforced"], true, "{r}");
    let exec: Vec<&str> = l["execute"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let cat = std::fs::canonicalize("/bin/cat").unwrap();
    assert!(exec.contains(&cat.to_str().unwrap()), "{r}");
    assert!(
        !exec.iter().any(|e| *e == "/bin" || *e == "/usr/bin"),
        "{r}"
    );
    assert_eq!(r["confinement"]["capabilitiesDropped"], true, "{r}");
}

/// A server and a client in one run, on 127.0.0.1 (and ::1 where the host
/// has it); then connections to the host's own loopback and to an address
/// outside, which must fail. argv: the host's loopback port, then
/// HOST:PORT addresses outside the run.
const LOOPBACK_PY: &str = r#"
import socket, sys, threading
def pair(family, addr):
    s = socket.socket(family); s.bind((addr, 0)); s.listen(1)
    def serve():
        c, _ = s.accept(); c.sendall(b"pong"); c.close()
    threading.Thread(target=serve).start()
    c = socket.create_connection((addr, s.getsockname()[1]), timeout=5)
    return c.recv(4).decode()
print("v4", pair(socket.AF_INET, "127.0.0.1"))
if sys.argv[1] == "v6":
    print("v6", pair(socket.AF_INET6, "::1"))
for addr in sys.argv[2:]:
    h, p = addr.rsplit(":", 1)
    try:
        socket.create_connection((h, int(p)), timeout=3)
        print(addr, "reached")
    except OSError as e:
        print(addr, "failed")
"#;

#[test]
fn network_loopback_reaches_127_0_0_1_inside_the_run_and_nothing_else() {
    if !common::system_python3() {
        common::unavailable(
            "network_loopback_reaches_127_0_0_1_inside_the_run_and_nothing_else",
            "needs python3 in /usr/bin",
        );
        return;
    }
    let p = policy_allowing(
        "[commands]\nallow = [\"python3\"]",
        "network = \"loopback\"",
        "",
    );
    // The host's own loopback and an address outside: a listener on each
    // that the run must not reach.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    let v6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let outside = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| u.connect("192.0.2.1:9").map(|()| u))
        .and_then(|u| u.local_addr())
        .ok()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    let out_listener = outside.and_then(|ip| std::net::TcpListener::bind((ip, 0)).ok());
    let mut addrs = vec![format!("127.0.0.1:{host_port}"), "192.0.2.1:80".to_string()];
    if let Some(l) = &out_listener {
        addrs.push(l.local_addr().unwrap().to_string());
    }
    let ws = workspace();
    std::fs::write(ws.path().join("loop.py"), LOOPBACK_PY).unwrap();
    let cmd = format!(
        "python3 loop.py {} {}",
        if v6 { "v6" } else { "no-v6" },
        addrs.join(" ")
    );
    let r = run_in(&p, Some(ws.path()), &cmd);
    let mut want = String::from("v4 pong\n");
    if v6 {
        want.push_str("v6 pong\n");
    }
    for a in &addrs {
        want.push_str(&format!("{a} failed\n"));
    }
    assert_eq!(s(&r, "stdout"), want, "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert!(
        tcp_received(&host).is_none(),
        "the host's loopback was reached"
    );
    let c = &r["confinement"];
    assert_eq!(c["network"], "loopback", "{r}");
    assert_eq!(c["networkNamespace"], true, "{r}");
    assert!(
        s(&c["guarantees"], "network").starts_with("network namespace: loopback only"),
        "{r}"
    );

    // Without a network namespace loopback cannot be told from the host's
    // network: "required" refuses, naming it, and nothing runs.
    let out = Command::new(bin())
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "python3 -c 'open(\"ran\", \"w\")'"])
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "netns")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s(&r, "status"), "failed", "{r}");
    assert!(
        s(&r, "error").contains("a network namespace (network = \"loopback\") is not available"),
        "{r}"
    );
    assert!(!ws.path().join("ran").exists(), "the command ran");
    // "best-effort" runs with no network, and says so.
    let p = policy_allowing(
        "[commands]\nallow = [\"python3\"]",
        "network = \"loopback\"\nconfinement = \"best-effort\"",
        "",
    );
    let out = Command::new(bin())
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "python3 loop.py no-v6"])
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "netns")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(r["exitCode"], 0, "{r}");
    assert_eq!(r["confinement"]["network"], "none", "{r}");
    assert!(
        r["warnings"]
            .to_string()
            .contains("network = \\\"loopback\\\" is not enforced"),
        "{r}"
    );
}

#[test]
fn a_scope_file_replaced_while_the_view_is_built_keeps_the_view() {
    // useradd replaces /etc/passwd by a rename; a run whose view was being
    // built at that moment found the file it had opened unlinked and lost
    // its whole mount view. Here a read-scope file is replaced without
    // pause while runs start.
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let file = dir.join("f");
    std::fs::write(&file, "hi\n").unwrap();
    chmod(&dir, 0o755);
    let p = policy_allowing(
        "[commands]\nallow = [\"cat\"]",
        "",
        &format!("[scopes]\nread = [{:?}]", file.display().to_string()),
    );
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let tmp = dir.join("f.new");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(&tmp, "hi\n").unwrap();
                std::fs::rename(&tmp, &file).unwrap();
            }
        });
        let mut lost = Vec::new();
        for _ in 0..150 {
            let r = run_in(&p, None, &format!("cat {}", file.display()));
            if r["confinement"]["mountView"] != true {
                lost.push(r["warnings"].to_string());
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            lost.is_empty(),
            "{} of 150 runs lost the view: {:?}",
            lost.len(),
            lost.first()
        );
    });
}

#[test]
fn python_starts_quietly_with_and_without_the_mount_view() {
    if !common::system_python3() {
        common::unavailable(
            "confine::python_starts_quietly_with_and_without_the_mount_view",
            "needs python3 in /usr/bin",
        );
        return;
    }
    // Debian's sitecustomize.py is a link into /etc/python3.X: the default
    // read scopes hold it, so Landlock does not turn Python's start into
    // an error message where no mount view hides the link.
    let p = policy_allowing("[commands]\nallow = [\"python3\"]", "", "");
    for env in [&[][..], &[("AGENT_RSH_SIMULATE_MISSING", "mountns")][..]] {
        let r = run_with(&p, None, "python3 -c 'print(6*7)'", env);
        assert_eq!(r["stdout"], "42\n", "{env:?}: {r}");
        assert_eq!(r["stderr"], "", "{env:?}: {r}");
    }
}

/// A program an allowed program starts by name is found as it is outside
/// the run, through every symlink on the way: Debian's `awk` and `cc` are
/// `/usr/bin/awk -> /etc/alternatives/awk -> /usr/bin/mawk`, and the mount
/// view holds the middle link although no scope names /etc/alternatives.
#[test]
fn programs_started_by_allowed_programs_are_found_through_alternatives() {
    let chained = |name: &str| {
        std::fs::read_link(format!("/usr/bin/{name}"))
            .is_ok_and(|t| t.starts_with("/etc/alternatives"))
    };
    if !chained("awk") {
        common::unavailable(
            "confine::programs_started_by_allowed_programs_are_found_through_alternatives",
            "/usr/bin/awk is not a link through /etc/alternatives here",
        );
        return;
    }
    let p = policy_allowing(
        "[commands]\nallow = [\"find\", \"xargs\", \"awk\", \"env\", \"printf\"]",
        "",
        "",
    );
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "one two\n").unwrap();
    let r = run_in(
        &p,
        Some(ws.path()),
        "find . -name '*.txt' -print0 | xargs -0 awk '{print $2}'; env awk 'BEGIN{print 42}'",
    );
    assert_eq!(r["stdout"], "two\n42\n", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
}
