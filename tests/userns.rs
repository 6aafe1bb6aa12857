//! `confinement = "required"` for a caller without CAP_SYS_ADMIN, end to
//! end: a throwaway account (`useradd`, removed on drop) runs the real
//! binary through `setpriv`, so the PID namespace has to come from a user
//! namespace. Each test tries to break a guarantee that root's runs have:
//! capabilities, seccomp, nested namespaces, file ownership, the process
//! limit, the tree kill. Needs root (to create the account); skips with a
//! printed reason otherwise.

use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agent-rsh")
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Names and markers unique to this test process (other test runs share
/// the machine).
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs an account tool, retrying while another one holds /etc's locks.
fn admin(tool: &str, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new(tool).args(args).output().unwrap();
        if out.status.success() {
            return;
        }
        let busy = String::from_utf8_lossy(&out.stderr).contains("lock");
        if !busy || Instant::now() > deadline {
            panic!(
                "{tool} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An account without a home or privileges, removed with its group on drop.
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

impl User {
    fn new() -> User {
        let name = unique("arshu");
        admin("useradd", &["-M", "-s", "/usr/sbin/nologin", &name]);
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        User { name, uid, gid }
    }

    /// agent-rsh as this account: real, effective and saved ids changed, no
    /// supplementary groups, no capabilities.
    fn agent(&self) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .args(["--clear-groups", "--", bin()]);
        c.env_remove("AGENT_RSH_POLICY")
            .env_remove(agent_rsh::confine::probe::SIMULATE_ENV);
        c
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// A world-readable policy and a workspace the account owns.
struct Setup {
    dir: tempfile::TempDir,
    policy: PathBuf,
}

impl Setup {
    fn new(user: &User, policy: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, policy).unwrap();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o644)).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::chown(&ws, Some(user.uid), Some(user.gid)).unwrap();
        Setup { dir, policy: path }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn run(&self, user: &User, cmd: &str) -> (Value, Output) {
        self.run_env(user, cmd, None)
    }

    fn run_env(&self, user: &User, cmd: &str, simulate: Option<&str>) -> (Value, Output) {
        let mut c = user.agent();
        c.args(["run", "--json", "--policy"])
            .arg(&self.policy)
            .arg("--workspace")
            .arg(self.ws())
            .args(["--", cmd]);
        if let Some(s) = simulate {
            c.env(agent_rsh::confine::probe::SIMULATE_ENV, s);
        }
        let out = c.output().unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a RunResult ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (v, out)
    }
}

const POLICY: &str = r#"
[commands]
allow = ["bash", "cat", "unshare", "id", "touch", "sleep", "echo"]
"#;

fn skip() -> bool {
    if !root() {
        eprintln!("skipped: needs root to create a throwaway account");
        return true;
    }
    false
}

fn status_field<'a>(status: &'a str, key: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("no {key} in {status}"))
}

#[test]
fn required_runs_for_an_unprivileged_account_inside_a_user_namespace() {
    if skip() {
        return;
    }
    let u = User::new();
    // The default policy, as a login account gets it: required.
    let mut c = u.agent();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o1777)).unwrap();
    let out = c
        .args(["run", "--json", "--", "echo hi"])
        .env("TMPDIR", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["stdout"], "hi\n", "{r}");
    let conf = &r["confinement"];
    assert_eq!(conf["mode"], "required", "{r}");
    assert_eq!(conf["pidNamespace"], true, "{r}");
    assert_eq!(conf["userNamespace"], true, "{r}");
    assert_eq!(conf["seccomp"]["enforced"], true, "{r}");
    assert_eq!(conf["landlock"]["enforced"], true, "{r}");
    assert_eq!(conf["capabilitiesDropped"], true, "{r}");

    // Root, which has CAP_SYS_ADMIN, needs no user namespace.
    let out = Command::new(bin())
        .args(["run", "--json", "--", "echo hi"])
        .env_remove("AGENT_RSH_POLICY")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["confinement"]["pidNamespace"], true, "{r}");
    assert_eq!(r["confinement"]["userNamespace"], false, "{r}");
}

#[test]
fn the_command_holds_no_capabilities_and_is_filtered() {
    if skip() {
        return;
    }
    let u = User::new();
    let s = Setup::new(&u, POLICY);
    let (r, _) = s.run(&u, "cat /proc/self/status");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["confinement"]["userNamespace"], true, "{r}");
    let st = r["stdout"].as_str().unwrap();
    for key in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        assert_eq!(status_field(st, key), "0000000000000000", "{key} in {st}");
    }
    assert_eq!(status_field(st, "Seccomp:"), "2", "{st}");
    assert_eq!(status_field(st, "NoNewPrivs:"), "1", "{st}");
    // Real ids, not a namespace's root.
    let uid = u.uid.to_string();
    assert!(
        status_field(st, "Uid:")
            .split_whitespace()
            .all(|v| v == uid),
        "{st}"
    );
    // Inside a PID namespace, whose own /proc the run sees (the mount
    // view): the guardian is PID 1, the command PID 2.
    assert_eq!(status_field(st, "Pid:"), "2", "{st}");
    // The namespace's own view of the ids is the 1:1 map.
    let (r, _) = s.run(&u, "cat /proc/self/uid_map /proc/self/gid_map");
    let maps: Vec<Vec<String>> = r["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    let gid = u.gid.to_string();
    assert_eq!(
        maps,
        vec![
            vec![uid.clone(), uid.clone(), "1".into()],
            vec![gid.clone(), gid.clone(), "1".into()]
        ],
        "{r}"
    );
}

#[test]
fn files_keep_the_real_accounts_ownership() {
    if skip() {
        return;
    }
    let u = User::new();
    let s = Setup::new(&u, POLICY);
    let (r, _) = s.run(&u, "touch made-inside");
    assert_eq!(r["exitCode"], 0, "{r}");
    let m = std::fs::metadata(s.ws().join("made-inside")).unwrap();
    assert_eq!((m.uid(), m.gid()), (u.uid, u.gid));
    // A root-owned file is still root's (shown as the overflow id, not as
    // the command's own): writing to it is refused.
    let theirs = s.ws().join("roots");
    std::fs::write(&theirs, "x").unwrap();
    std::fs::set_permissions(&theirs, PermissionsExt::from_mode(0o644)).unwrap();
    let (r, _) = s.run(&u, "bash -c 'stat -c %u roots; echo y > roots'");
    assert_ne!(r["exitCode"], 0, "{r}");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "x");
}

#[test]
fn nested_user_namespaces_are_refused() {
    if skip() {
        return;
    }
    let u = User::new();
    // Control: the account itself may create one outside agent-rsh, so the
    // refusal below is agent-rsh's doing.
    let out = Command::new("setpriv")
        .arg(format!("--reuid={}", u.uid))
        .arg(format!("--regid={}", u.gid))
        .args(["--clear-groups", "--", "unshare", "-U", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "control: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = Setup::new(&u, POLICY);
    let (r, _) = s.run(&u, "unshare -U true");
    assert_eq!(r["confinement"]["userNamespace"], true, "{r}");
    assert_ne!(r["exitCode"], 0, "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("Operation not permitted"),
        "seccomp refuses it: {r}"
    );
    // Second layer: with seccomp taken away (best-effort), the namespace's
    // own limit of zero user namespaces still refuses.
    let s = Setup::new(
        &u,
        &format!(
            "confinement = \"best-effort\"\n{POLICY}\n[scopes]\nread = [\"/usr\", \"/lib\", \"/lib64\", \"/etc\", \"/proc/sys/user\"]\n"
        ),
    );
    let (r, _) = s.run_env(
        &u,
        "cat /proc/sys/user/max_user_namespaces",
        Some("seccomp"),
    );
    assert_eq!(r["confinement"]["seccomp"]["enforced"], false, "{r}");
    assert_eq!(r["stdout"], "0\n", "{r}");
    let (r, _) = s.run_env(&u, "unshare -U true", Some("seccomp"));
    assert_ne!(r["exitCode"], 0, "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{r}"
    );
}

fn sleeps_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.starts_with("sleep ") && cmd.contains(marker) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

#[test]
fn the_deadline_kills_a_daemonized_tree_of_an_unprivileged_caller() {
    if skip() {
        return;
    }
    let u = User::new();
    let s = Setup::new(
        &u,
        &format!("{POLICY}\n[limits]\ntimeout_ms = 1500\nkill_grace_ms = 200\n"),
    );
    let marker = format!("{}.{}", 4747, std::process::id());
    let (r, out) = s.run(
        &u,
        &format!(
            "bash -c '(setsid sleep {marker} </dev/null >/dev/null 2>&1 &); (sleep {marker} &); echo started; sleep {marker}'"
        ),
    );
    assert_eq!(r["status"], "timedOut", "{r}");
    assert_eq!(out.status.code(), Some(124), "{r}");
    assert_eq!(r["stdout"], "started\n", "{r}");
    assert_eq!(r["confinement"]["userNamespace"], true, "{r}");
    let until = Instant::now() + Duration::from_secs(5);
    let mut left = sleeps_with(&marker);
    while !left.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        left = sleeps_with(&marker);
    }
    assert_eq!(left, Vec::<String>::new(), "left behind");
}

#[test]
fn the_process_limit_binds_inside_the_user_namespace() {
    if skip() {
        return;
    }
    let u = User::new();
    let s = Setup::new(
        &u,
        &format!("{POLICY}\n[limits]\nprocesses = 20\ntimeout_ms = 4000\nkill_grace_ms = 200\n"),
    );
    let marker = format!("{}.{}", 4848, std::process::id());
    // 40 background sleeps against a limit of 20 processes of this uid in
    // the run's namespace (guardian and bash included): the test watches
    // how many are alive at once while the run waits for its deadline.
    let cmd = format!("bash -c 'for i in {{1..40}}; do sleep {marker} & done 2>/dev/null; wait'");
    let run = std::thread::scope(|sc| {
        let h = sc.spawn(|| s.run(&u, &cmd));
        let mut most = 0;
        while !h.is_finished() {
            most = most.max(sleeps_with(&marker).len());
            std::thread::sleep(Duration::from_millis(20));
        }
        (h.join().unwrap(), most)
    });
    let ((r, _), most) = run;
    assert_eq!(r["confinement"]["userNamespace"], true, "{r}");
    assert_eq!(r["confinement"]["limits"]["processes"], 20, "{r}");
    assert!(most > 0, "some sleeps started: {r}");
    assert!(most <= 18, "{most} sleeps alive at once, limit 20: {r}");
}

/// Without user namespaces (the seam, or a real refusal such as a
/// container's), an unprivileged caller has no PID or mount namespace; the
/// run still goes ahead under "required" because every guarantee has
/// another mechanism: the guardian, a child subreaper, kills the tree, and
/// seccomp refuses metadata changes and UNIX sockets everywhere. What is
/// missing is said in the warnings and the confinement report.
#[test]
fn required_runs_without_user_namespaces_and_says_what_holds_instead() {
    if skip() {
        return;
    }
    let u = User::new();
    let s = Setup::new(&u, POLICY);
    // The seam takes user namespaces away.
    // (`id`, not `touch`: without the mount view seccomp refuses the
    // utimensat that touch makes.)
    let (r, out) = s.run_env(&u, "id -u", Some("userns"));
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["stdout"], format!("{}\n", u.uid), "it ran");
    let c = &r["confinement"];
    assert_eq!(c["pidNamespace"], false, "{r}");
    assert_eq!(c["mountView"], false, "{r}");
    assert!(
        c["guarantees"]["tree"]
            .as_str()
            .unwrap()
            .contains("subreaper"),
        "{r}"
    );
    assert!(
        c["guarantees"]["metadata"]
            .as_str()
            .unwrap()
            .contains("seccomp"),
        "{r}"
    );
    let w = r["warnings"].to_string();
    assert!(
        w.contains("user namespace") && w.contains("CAP_SYS_ADMIN"),
        "{r}"
    );

    // A real refusal: a user namespace whose own user.max_user_namespaces
    // is 0, with agent-rsh started in it without capabilities.
    let ws = s.ws();
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set=-all --inh-caps=-all -- {} run --json --policy {} --workspace {} -- 'id -u'",
        bin(),
        s.policy.display(),
        ws.display()
    );
    let out = Command::new("unshare")
        .args(["-U", "-r", "sh", "-c", &script])
        .env_remove("AGENT_RSH_POLICY")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert!(
        r["warnings"]
            .to_string()
            .contains("user.max_user_namespaces = 0"),
        "{r}"
    );
    assert_eq!(r["confinement"]["pidNamespace"], false, "{r}");
    assert_eq!(r["exitCode"], 0, "it ran: {r}");
}

#[test]
fn doctor_reports_the_user_namespace() {
    if skip() {
        return;
    }
    let u = User::new();
    let out = u.agent().args(["doctor", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["kernel"]["capSysAdmin"], false, "{v}");
    assert_eq!(v["kernel"]["userNamespace"], true, "{v}");
    assert_eq!(v["wouldEnforce"]["pidNamespace"], true, "{v}");
    assert_eq!(v["wouldEnforce"]["userNamespace"], true, "{v}");
    let out = u.agent().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("user namespace:    yes (caller's uid and gid mapped 1:1"),
        "{text}"
    );
    let out = u
        .agent()
        .args(["doctor", "--json"])
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "userns")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // A run still starts (the guarantees hold by other mechanisms), and the
    // doctor names what is missing.
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["warnings"].to_string().contains("user namespace"), "{v}");
    assert_eq!(v["wouldEnforce"]["pidNamespace"], false, "{v}");
    // Root needs none.
    let out = Command::new(bin())
        .args(["doctor", "--json"])
        .env_remove("AGENT_RSH_POLICY")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kernel"]["capSysAdmin"], true, "{v}");
    assert_eq!(v["wouldEnforce"]["userNamespace"], false, "{v}");
}
