//! The run's private /tmp, end to end: inside the mount view `/tmp` is the
//! workspace's own (`tmp` in its state directory, kept between its runs;
//! a tmpfs of the run's own for a fresh workspace), never the host's nor
//! another workspace's. A redirection and `cd` reach it; without the view
//! they stay refused, saying why. The attacks run python3 so that every
//! system call is reachable and the string layer decides nothing.

use crate::common::{self, TestPolicy, bin};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const POLICY: &str = r#"
confinement = "required"
[commands]
allow = ["cat", "ls", "pwd", "mktemp", "python3"]
[packs]
off = ["python"]
"#;

/// A workspace (under the host's /tmp, as tempfile makes it: the view binds
/// it beneath the private /tmp at its own path) and a state home of the
/// test's own, so no state directory lands in the account's home.
struct Fixture {
    policy: TestPolicy,
    state: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            policy: common::policy(POLICY),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn run_env(&self, ws: Option<&Path>, cmd: &str, env: &[(&str, &str)]) -> Value {
        let mut c = Command::new(bin());
        c.env_remove("AGENT_RSH_POLICY")
            .env_remove("AGENT_RSH_SIMULATE_MISSING")
            .env("XDG_STATE_HOME", self.state.path())
            .args(["run", "--json", "--timeout", "60000", "--policy"])
            .arg(&self.policy.path);
        for (k, v) in env {
            c.env(k, v);
        }
        if let Some(ws) = ws {
            c.arg("--workspace").arg(ws);
        }
        let out = c.arg("--").arg(cmd).output().unwrap();
        common::json(&out.stdout)
    }

    fn run(&self, ws: Option<&Path>, cmd: &str) -> Value {
        self.run_env(ws, cmd, &[])
    }

    /// The private /tmp of `ws` on the host.
    fn tmp_of(&self, ws: &Path) -> PathBuf {
        let dirs: Vec<PathBuf> = std::fs::read_dir(self.state.path().join("agent-rsh/workspaces"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let name = ws.file_name().unwrap().to_str().unwrap();
        let mine: Vec<&PathBuf> = dirs
            .iter()
            .filter(|d| {
                d.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with(&format!("{name}-"))
            })
            .collect();
        assert_eq!(mine.len(), 1, "{dirs:?}");
        mine[0].join("tmp")
    }
}

fn out(v: &Value) -> &str {
    v["stdout"].as_str().unwrap_or("")
}

fn ok(v: &Value) {
    assert_eq!(v["exitCode"], 0, "{v:#}");
}

/// Whether the run had its mount view (a container may refuse it: the
/// tests that need it then stop, saying so).
fn has_view(v: &Value) -> bool {
    if v["confinement"]["mountView"] == true {
        return true;
    }
    common::cannot_run("the kernel refuses the run a mount namespace here");
    false
}

fn workspace(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join(name);
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    (dir, ws)
}

/// A file in the host's /tmp, removed on drop.
struct HostFile(PathBuf);

impl HostFile {
    fn name(prefix: &str) -> HostFile {
        HostFile(Path::new("/tmp").join(common::unique(prefix)))
    }
    fn file_name(&self) -> &str {
        self.0.file_name().unwrap().to_str().unwrap()
    }
}

impl Drop for HostFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn tmp_is_the_workspaces_own_and_kept_between_its_runs() {
    let f = Fixture::new();
    let (_d1, ws) = workspace("alpha");
    let (_d2, other) = workspace("beta");
    std::fs::write(ws.join("in-workspace.txt"), "ws\n").unwrap();
    let scratch = HostFile::name("agent-rsh-private-tmp-");
    let name = scratch.file_name().to_string();
    let host = HostFile::name("agent-rsh-host-tmp-");
    std::fs::write(&host.0, "host\n").unwrap();

    // One run writes /tmp (>, >>, 2>), reads it back, and does not see
    // the host's /tmp.
    let v = f.run(
        Some(&ws),
        &format!(
            "echo one > /tmp/{name} && echo two >> /tmp/{name} && cat /tmp/{name} && \
             ls /tmp/nothing-here 2> /tmp/{name}.err; cat /tmp/{name}.err; \
             cat /tmp/{} || echo host-hidden",
            host.file_name()
        ),
    );
    if !has_view(&v) {
        return;
    }
    ok(&v);
    let s = out(&v);
    assert!(s.starts_with("one\ntwo\n"), "{v:#}");
    assert!(s.contains("nothing-here"), "2> /tmp: {v:#}");
    assert!(s.ends_with("host-hidden\n"), "{v:#}");
    assert!(
        v["confinement"]["guarantees"]["tmp"]
            .as_str()
            .unwrap()
            .contains("private to the workspace"),
        "{v:#}"
    );
    // Nothing reached the host's /tmp; the file is in the workspace's
    // state directory.
    assert!(!scratch.0.exists(), "the host's /tmp got {name}");
    assert_eq!(
        std::fs::read_to_string(f.tmp_of(&ws).join(&name)).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(std::fs::read_to_string(&host.0).unwrap(), "host\n");

    // A later run of the same workspace reads it.
    let v = f.run(Some(&ws), &format!("cat /tmp/{name}"));
    ok(&v);
    assert_eq!(out(&v), "one\ntwo\n");

    // `cd /tmp` works; the workspace stays visible at its real path.
    let v = f.run(
        Some(&ws),
        &format!(
            "cd /tmp && pwd && ls && cd {} && cat in-workspace.txt",
            ws.display()
        ),
    );
    ok(&v);
    let s = out(&v);
    assert!(s.starts_with("/tmp\n"), "{v:#}");
    assert!(s.lines().any(|l| l == name), "{v:#}");
    assert!(s.ends_with("ws\n"), "{v:#}");

    // Another workspace has a /tmp of its own.
    let v = f.run(Some(&other), &format!("cat /tmp/{name} || echo absent"));
    assert_eq!(out(&v), "absent\n", "{v:#}");
    assert!(!f.tmp_of(&other).join(&name).exists());

    // $TMPDIR and mktemp work as before, in the state directory.
    let v = f.run(
        Some(&ws),
        "t=$(mktemp) && echo m > \"$t\" && cat \"$t\" && echo d > \"$TMPDIR/d.txt\" && cat \"$TMPDIR/d.txt\" && echo \"$TMPDIR\"",
    );
    ok(&v);
    let s = out(&v);
    assert!(s.starts_with("m\nd\n"), "{v:#}");
    let tmpdir = s.lines().nth(2).unwrap();
    assert!(
        Path::new(tmpdir).starts_with(f.state.path().canonicalize().unwrap()),
        "{v:#}"
    );
}

#[test]
fn a_fresh_workspace_has_a_tmp_of_the_runs_own() {
    let f = Fixture::new();
    let scratch = HostFile::name("agent-rsh-fresh-tmp-");
    let name = scratch.file_name().to_string();
    let v = f.run(
        None,
        &format!("echo a > /tmp/{name} && cat /tmp/{name} && ls /tmp"),
    );
    if !has_view(&v) {
        return;
    }
    ok(&v);
    assert!(out(&v).starts_with("a\n"), "{v:#}");
    // Only the fresh workspace's own mount point and the file.
    assert!(out(&v).lines().count() <= 3, "{v:#}");
    assert!(!scratch.0.exists());
    let v = f.run(None, &format!("cat /tmp/{name} || echo gone"));
    assert_eq!(out(&v), "gone\n", "{v:#}");
}

#[test]
fn without_the_mount_view_tmp_is_refused_with_the_reason() {
    let f = Fixture::new();
    let (_d, ws) = workspace("noview");
    let scratch = HostFile::name("agent-rsh-noview-tmp-");
    let name = scratch.file_name().to_string();
    let no_view = [("AGENT_RSH_SIMULATE_MISSING", "mountns")];
    for (cmd, rule) in [
        (format!("echo a > /tmp/{name}"), "redirect.outside"),
        (format!("ls 2> /tmp/{name}"), "redirect.outside"),
        ("cd /tmp && ls".to_string(), "cd.outside"),
    ] {
        let v = f.run_env(Some(&ws), &cmd, &no_view);
        assert_eq!(v["status"], "denied", "{cmd}: {v:#}");
        assert_eq!(v["exitCode"], 126, "{v:#}");
        assert_eq!(v["denial"]["rule"], rule, "{v:#}");
        let hint = v["denial"]["hint"].as_str().unwrap();
        assert!(hint.contains("mount view"), "{hint}");
        assert!(hint.contains("$TMPDIR"), "{hint}");
        assert!(!scratch.0.exists());
        assert!(
            v["confinement"]["guarantees"]["tmp"]
                .as_str()
                .unwrap()
                .contains("needs the mount view"),
            "{v:#}"
        );
    }
    // $TMPDIR is still there for it.
    let v = f.run_env(
        Some(&ws),
        "echo a > \"$TMPDIR/x\" && cat \"$TMPDIR/x\"",
        &no_view,
    );
    ok(&v);
    assert_eq!(out(&v), "a\n");
    // The kernel holds it too: python3 writing the host's /tmp is refused.
    std::fs::write(
        ws.join("w.py"),
        format!(
            "try:\n    open('/tmp/{name}', 'w').write('x')\n    print('wrote')\nexcept OSError as e:\n    print('refused', e.errno)\n"
        ),
    )
    .unwrap();
    let v = f.run_env(Some(&ws), "python3 w.py", &no_view);
    assert!(out(&v).starts_with("refused"), "{v:#}");
    assert!(!scratch.0.exists());
}

/// Every way python3 can name the host's /tmp from inside the view: the
/// view's own root through /proc, the guardian's root, `..` from the
/// workspace, a symlink to `/`, the state directory's path. Then an attack
/// on the next run's view: the mount point of the workspace, beneath the
/// private /tmp, replaced by a symlink into a host directory.
#[test]
fn the_hosts_tmp_is_out_of_reach_of_every_system_call() {
    let f = Fixture::new();
    let (_d, ws) = workspace("attack");
    let host = HostFile::name("agent-rsh-attack-host-");
    std::fs::write(&host.0, "host\n").unwrap();
    let target = HostFile::name("agent-rsh-attack-target-");
    let victim = tempfile::tempdir().unwrap();
    let tname = target.file_name().to_string();
    let attack = format!(
        r#"import os
ws = {ws:?}
paths = ['/proc/self/root/tmp/{tname}', '/proc/1/root/tmp/{tname}',
         ws + '/../' * 12 + 'tmp/{tname}', '/tmp/../tmp/./{tname}',
         '/proc/self/cwd/' + '../' * 12 + 'tmp/{tname}']
try:
    os.symlink('/', '/tmp/up')
    paths.append('/tmp/up/tmp/{tname}')
except OSError as e:
    print('symlink', e.errno)
for p in paths:
    try:
        with open(p, 'w') as fh:
            fh.write('escaped')
        print('wrote', p)
    except OSError as e:
        print('refused', p, e.errno)
for p in ['/tmp/{host}', '/proc/self/root/tmp/{host}', '/proc/1/root/tmp/{host}']:
    try:
        print('READ', p, open(p).read())
    except OSError as e:
        print('hidden', p, e.errno)
print('listing', sorted(os.listdir('/tmp')))
"#,
        host = host.file_name()
    );
    std::fs::write(ws.join("attack.py"), attack).unwrap();
    let v = f.run(Some(&ws), "python3 attack.py");
    if !has_view(&v) {
        return;
    }
    ok(&v);
    let s = out(&v);
    assert!(!s.contains("READ"), "{v:#}");
    let listing = s.lines().find(|l| l.starts_with("listing")).unwrap();
    assert!(!listing.contains(host.file_name()), "{v:#}");
    assert!(listing.contains(&tname), "{v:#}");
    assert!(!target.0.exists(), "the host's /tmp was written: {v:#}");
    assert_eq!(std::fs::read_to_string(&host.0).unwrap(), "host\n");

    // The run replaces its workspace's mount point beneath /tmp (the
    // first directory on the way) by a symlink to a host directory; the
    // next run's view follows nothing, makes the directory again, and
    // the host directory stays empty.
    let first = ws
        .strip_prefix("/tmp")
        .unwrap()
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap()
        .to_string();
    let plant = format!(
        r#"import os
try:
    os.rename('/tmp/{first}', '/tmp/{first}.moved')
    os.symlink({victim:?}, '/tmp/{first}')
    print('planted')
except OSError as e:
    print('refused', e.errno)
"#,
        victim = victim.path()
    );
    std::fs::write(ws.join("plant.py"), plant).unwrap();
    let v = f.run(Some(&ws), "python3 plant.py");
    ok(&v);
    assert_eq!(out(&v), "planted\n", "{v:#}");
    let v = f.run(Some(&ws), "ls /tmp && cat attack.py > /dev/null && pwd");
    ok(&v);
    assert_eq!(v["confinement"]["mountView"], true, "{v:#}");
    assert!(out(&v).ends_with(&format!("{}\n", ws.display())), "{v:#}");
    assert_eq!(
        std::fs::read_dir(victim.path()).unwrap().count(),
        0,
        "the view was built through the planted symlink"
    );
}

/// `doctor` says what /tmp is, with the view and without it.
#[test]
fn doctor_says_what_tmp_is() {
    let f = Fixture::new();
    let line = |env: &[(&str, &str)]| {
        let mut c = Command::new(bin());
        c.env_remove("AGENT_RSH_POLICY")
            .env_remove("AGENT_RSH_SIMULATE_MISSING")
            .args(["doctor", "--policy"])
            .arg(&f.policy.path);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find(|l| l.trim_start().starts_with("/tmp:"))
            .unwrap_or_else(|| panic!("no /tmp line: {text}"))
            .to_string()
    };
    let with_view = line(&[]);
    let mount_view = Command::new(bin())
        .env_remove("AGENT_RSH_POLICY")
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v = common::json(&mount_view.stdout);
    if v["wouldEnforce"]["mountView"] == true {
        assert!(
            with_view.contains("private to the workspace"),
            "{with_view}"
        );
    }
    let without = line(&[("AGENT_RSH_SIMULATE_MISSING", "mountns")]);
    assert!(without.contains("needs the mount view"), "{without}");
}

/// An account without CAP_SYS_ADMIN (its view built in a user namespace)
/// gets the same private /tmp, kept between its runs.
#[test]
fn an_unprivileged_account_has_its_own_tmp_too() {
    use crate::kernel_escapes::{NOBODY, agent_as};
    use std::os::unix::fs::PermissionsExt;
    if !common::root() {
        common::cannot_run("needs root to run agent-rsh as nobody");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let (ws, state) = (base.path().join("ws"), base.path().join("state"));
    for d in [&ws, &state] {
        std::fs::create_dir(d).unwrap();
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let policy = base.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    std::fs::set_permissions(&policy, PermissionsExt::from_mode(0o644)).unwrap();
    let scratch = HostFile::name("agent-rsh-nobody-tmp-");
    let name = scratch.file_name().to_string();
    let run = |cmd: &str| {
        let out = agent_as(NOBODY)
            .env_remove("AGENT_RSH_POLICY")
            .env_remove("AGENT_RSH_SIMULATE_MISSING")
            .env("XDG_STATE_HOME", &state)
            .env("HOME", &state)
            .args(["run", "--json", "--timeout", "60000", "--policy"])
            .arg(&policy)
            .arg("--workspace")
            .arg(&ws)
            .arg("--")
            .arg(cmd)
            .output()
            .unwrap();
        common::json(&out.stdout)
    };
    let v = run(&format!("echo a > /tmp/{name} && cd /tmp && pwd"));
    if !has_view(&v) {
        return;
    }
    ok(&v);
    assert_eq!(out(&v), "/tmp\n");
    let v = run(&format!("cat /tmp/{name}"));
    ok(&v);
    assert_eq!(out(&v), "a\n");
    assert!(!scratch.0.exists());
}
