//! Argument rules, wrappers and guard packs end to end: the real binary,
//! real processes and files. The corpus (`args_corpus`) covers the
//! rules one by one; these show the whole path: exit codes, the denial in
//! text and JSON, trust, the policy's own rules and pack switches.

use crate::common::{TestPolicy, bin, policy};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn agent(args: &[&str]) -> Output {
    Command::new(bin())
        .env_remove("AGENT_RSH_POLICY")
        .args(args)
        .output()
        .unwrap()
}

fn run_json(p: Option<&TestPolicy>, ws: Option<&Path>, cmd: &str) -> (Value, Option<i32>) {
    let mut c = Command::new(bin());
    c.env_remove("AGENT_RSH_POLICY").args(["run", "--json"]);
    if let Some(p) = p {
        c.arg("--policy").arg(&p.path);
    }
    if let Some(ws) = ws {
        c.arg("--workspace").arg(ws);
    }
    let out = c.args(["--", cmd]).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code())
}

#[test]
fn default_policy_judges_the_command_find_exec_would_run() {
    let ws = tempfile::tempdir().unwrap();
    // If find ran, -exec touch would leave a file (touch is not allowed by
    // the default policy, so the kernel would stop it too: the string layer
    // must answer first, naming the inner command).
    let (r, code) = run_json(
        None,
        Some(ws.path()),
        "find . -maxdepth 0 -exec touch made \\;",
    );
    assert_eq!(code, Some(126), "{r}");
    assert_eq!(r["status"], "denied");
    assert_eq!(r["denial"]["rule"], "command.not-allowed");
    assert_eq!(r["denial"]["argIndex"], 5);
    assert_eq!(r["denial"]["offset"], 25, "the byte where `touch` starts");
    assert!(
        r["denial"]["reason"]
            .as_str()
            .unwrap()
            .contains("started by `find`"),
        "{r}"
    );
    assert!(!ws.path().join("made").exists());

    // Text mode: the same on stderr, with the argument index and the hint.
    let out = agent(&["run", "find . -exec id \\;"]);
    assert_eq!(out.status.code(), Some(126));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("denied: command.not-allowed"), "{err}");
    assert!(err.contains("(argument 3, at byte 13)"), "{err}");
    assert!(
        err.contains("hint: run one of the allowed programs"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    // An allowed inner command runs: cat is in the default policy.
    std::fs::write(ws.path().join("note.txt"), "NOTE-42\n").unwrap();
    let (r, code) = run_json(
        None,
        Some(ws.path()),
        "find . -name note.txt -exec cat {} +",
    );
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["stdout"], "NOTE-42\n", "{r}");
}

#[test]
fn abbreviated_and_bundled_forms_are_read_as_the_program_reads_them() {
    for (cmd, rule, index, seen) in [
        (
            "sort --compress-prog=sh f",
            "args.sort.compress-program",
            1,
            "--compress-program=sh",
        ),
        (
            "sort -nro/etc/passwd f",
            "args.sort.output",
            1,
            "-o /etc/passwd",
        ),
        (
            "sort -n f --out ../x",
            "args.sort.output",
            3,
            "--output=../x",
        ),
    ] {
        let out = agent(&["check", "--json", cmd]);
        assert_eq!(out.status.code(), Some(126), "{cmd}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["denial"]["rule"], rule, "{v}");
        assert_eq!(v["denial"]["argIndex"], index, "{v}");
        assert_eq!(v["findings"][0]["seen"], seen, "{v}");
    }
    // `--` ends the options: the same word after it is a file name.
    let out = agent(&["check", "--json", "sort -n -- --compress-program=sh"]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["normalized"][0]["normalized"],
        serde_json::json!(["-n", "--", "--compress-program=sh"])
    );
}

#[test]
fn check_json_reports_every_rule_and_the_normalized_argv() {
    let p = policy("[commands]\nallow = [\"tar\", \"timeout\"]\n");
    let out = agent(&[
        "check",
        "--json",
        "--policy",
        p.path.to_str().unwrap(),
        "timeout 5 tar --checkpoint-act=exec=sh -xIsh -f a.tar",
    ]);
    assert_eq!(out.status.code(), Some(126));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        ["args.tar.checkpoint-action", "args.tar.program"],
        "{v}"
    );
    assert_eq!(v["denial"]["rule"], "args.tar.checkpoint-action");
    assert_eq!(v["denial"]["argIndex"], 3);
    assert_eq!(v["normalized"][0]["command"], "timeout");
    assert_eq!(v["normalized"][1]["command"], "tar");
    assert_eq!(v["normalized"][1]["depth"], 1);
    assert_eq!(
        v["normalized"][1]["normalized"],
        serde_json::json!(["--checkpoint-action=exec=sh", "-x", "-I sh", "-f a.tar"])
    );
}

#[test]
fn wrappers_are_checked_inside_out() {
    let p = policy("[commands]\nallow = [\"timeout\", \"rm\", \"env\", \"nice\", \"true\"]\n");
    let pol = p.path.to_str().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("keep"), "x").unwrap();

    let (r, code) = run_json(Some(&p), Some(ws.path()), "timeout 5 rm -rf /");
    assert_eq!(code, Some(126), "{r}");
    assert_eq!(r["denial"]["rule"], "guard.fs.rm-root");
    assert_eq!(r["denial"]["argIndex"], 4);
    assert_eq!(r["denial"]["offset"], 17, "the byte where `/` starts");

    // The workspace root is guarded too, and nothing ran.
    let (r, code) = run_json(Some(&p), Some(ws.path()), "env nice rm -rf .");
    assert_eq!(
        (code, &r["denial"]["rule"]),
        (Some(126), &Value::from("guard.fs.rm-root")),
        "{r}"
    );
    assert!(ws.path().join("keep").exists());

    // env -S splits its string and the inner command is judged: sh is the
    // checked interpreter, and the `id` it would start is not allowed.
    let (r, code) = run_json(Some(&p), None, "env -S 'sh -c id'");
    assert_eq!(code, Some(126), "{r}");
    assert_eq!(r["denial"]["rule"], "command.not-allowed");
    assert!(
        r["denial"]["reason"]
            .as_str()
            .unwrap()
            .contains("`id` is not on the policy's allowlist (it would be started by `sh`)"),
        "{r}"
    );

    // A program that is not allowed is refused when a wrapper starts it.
    let out = agent(&["run", "--policy", pol, "timeout 5 cat /etc/hostname"]);
    assert_eq!(out.status.code(), Some(126));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`cat` is not on the policy's allowlist")
    );

    // Five wrappers run; a sixth is refused.
    let five = "nice timeout 5 env nice nice true";
    let (r, code) = run_json(Some(&p), None, five);
    assert_eq!(
        (code, &r["status"]),
        (Some(0), &Value::from("exited")),
        "{r}"
    );
    let six = "nice timeout 5 env nice nice nice true";
    let (r, code) = run_json(Some(&p), None, six);
    assert_eq!(code, Some(126), "{r}");
    assert_eq!(r["denial"]["rule"], "wrapper.depth");
    assert_eq!(r["denial"]["argIndex"], 7);
}

#[test]
fn trust_maps_severity_to_deny_or_warn() {
    // find -delete is a medium guard: a warning at medium trust (and the
    // command runs), a denial at low trust (and nothing is removed).
    for (trust, code, removed) in [("medium", Some(0), true), ("low", Some(126), false)] {
        let p = policy(&format!(
            "trust = \"{trust}\"\n[commands]\nallow = [\"find\"]\n"
        ));
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("junk"), "x").unwrap();
        let (r, got) = run_json(Some(&p), Some(ws.path()), "find junk -delete");
        assert_eq!(got, code, "{trust}: {r}");
        assert_eq!(!ws.path().join("junk").exists(), removed, "{trust}: {r}");
        if trust == "medium" {
            let w = r["warnings"].to_string();
            assert!(
                w.contains("guard.fs.find-delete") && w.contains("argument 2"),
                "{r}"
            );
        } else {
            assert_eq!(r["denial"]["rule"], "guard.fs.find-delete");
        }
    }
    // Text mode prints the warning on stderr.
    let p = policy("[commands]\nallow = [\"find\"]\n");
    let ws = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["run", "--policy", p.path.to_str().unwrap(), "--workspace"])
        .arg(ws.path())
        .args(["--", "find . -name nothing -delete"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: guard.fs.find-delete"));
}

#[test]
fn policy_rules_and_pack_switches() {
    let p = policy(
        r#"
[commands]
allow = ["find", "echo"]
[packs]
off = ["find"]
[[rules]]
id = "local.echo.secret"
commands = ["echo"]
option = ["--secret-mode"]
reason = "this team forbids it"
hint = "echo without --secret-mode"
"#,
    );
    let pol = p.path.to_str().unwrap();
    let out = agent(&["run", "--json", "--policy", pol, "echo --secret hi"]);
    assert_eq!(out.status.code(), Some(126));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["denial"]["rule"], "local.echo.secret", "{v}");
    assert_eq!(v["denial"]["hint"], "echo without --secret-mode");

    // With the find pack off, find -exec runs (find may start find).
    let out = agent(&[
        "run",
        "--json",
        "--policy",
        pol,
        "find . -maxdepth 0 -exec find --version \\;",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "exited", "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("findutils"), "{v}");
    // ... but the guard pack still judges find.
    let out = agent(&["check", "--policy", pol, "find / -delete"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("guard.fs.find-delete"));

    // policy show states what is on and off; --rules lists the rules.
    let out = agent(&["policy", "show", "--policy", pol]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# switched off: find"), "{text}");
    let out = agent(&["policy", "show", "--rules", "--policy", pol]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("local.echo.secret"), "{text}");
    assert!(
        text.contains("args.sort.output") && !text.contains("args.find.write"),
        "{text}"
    );
    let out = agent(&["policy", "show", "--rules"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("args.find.write"));
}

#[test]
fn bad_rules_and_switches_fail_closed() {
    for (body, needle) in [
        (
            "[[rules]]\nid = \"x\"\ncommands = [\"ls\"]\npositional = \"(\"\nreason = \"r\"\nhint = \"h\"\n",
            "invalid regex",
        ),
        (
            "[[rules]]\nid = \"x\"\ncommands = [\"ls\"]\nreason = \"r\"\n",
            "hint",
        ),
        ("[packs]\noff = [\"fnd\"]\n", "no built-in pack \"fnd\""),
        (
            "[packs]\nrules_off = [\"args.find.nope\"]\n",
            "args.find.nope",
        ),
        (
            "[[rules]]\nid = \"x\"\ncommands = [\"ls\"]\nreason = \"r\"\nhint = \"h\"\nbogus = 1\n",
            "bogus",
        ),
    ] {
        let p = policy(body);
        let out = agent(&["run", "--policy", p.path.to_str().unwrap(), "ls"]);
        assert_eq!(out.status.code(), Some(125), "{body}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{body}: {err}");
    }
}

#[test]
fn policy_inside_the_workspace_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("policy.toml");
    std::fs::write(&path, "[commands]\nallow = [\"ls\"]\n").unwrap();
    let out = Command::new(bin())
        .args(["run", "--json", "--policy"])
        .arg(&path)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // A workspace holding the policy is refused as a workspace.
    assert_eq!(v["denial"]["rule"], "workspace.system", "{v}");
    // A background job in that workspace is refused before it detaches.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["spawn", "--policy"])
        .arg(&path)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "ls"])
        .env("XDG_STATE_HOME", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("workspace.system"), "{said}");
    // The same policy outside the workspace runs.
    let p = policy("[commands]\nallow = [\"ls\"]\n");
    let (r, code) = run_json(Some(&p), Some(ws.path()), "ls");
    assert_eq!(code, Some(0), "{r}");
    // A write scope that holds the policy is refused as well.
    let dir = p.path.parent().unwrap().display().to_string();
    std::fs::write(
        &p.path,
        format!("[commands]\nallow = [\"ls\"]\n[scopes]\nwrite = [\"{dir}\"]\n"),
    )
    .unwrap();
    let (r, code) = run_json(Some(&p), None, "ls");
    assert_eq!(
        (code, &r["denial"]["rule"]),
        (Some(126), &Value::from("policy.reachable")),
        "{r}"
    );
}

#[test]
fn the_workspace_and_its_git_are_not_removed_under_another_spelling() {
    // Each of these removed .git or emptied the workspace under
    // `confinement = "required"` (the kernel lets a run write its own
    // workspace): env's `\_`, a path relative to another directory, the
    // workspace named by an absolute path, `$PWD`, a tilde after brace
    // expansion. A variable handing options to tar is refused like one
    // loading a library.
    let p = policy(
        "syntax = \"compound\"\n[commands]\nallow = [\"rm\", \"env\", \"touch\", \"ls\", \"tar\", \"true\"]\n",
    );
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git/objects")).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("keep"), "x").unwrap();
    let abs = root.display().to_string();
    let cases = [
        (
            "env -S 'rm -rf\\_.git'".to_string(),
            "wrapper.env.split-string",
        ),
        ("cd sub && rm -rf ../.git".to_string(), "guard.fs.rm-git"),
        ("rm -rf sub/../.git".to_string(), "guard.fs.rm-git"),
        ("rm -rf \"$PWD\"".to_string(), "guard.fs.rm-root"),
        ("rm -rf \"$PWD/.git\"".to_string(), "guard.fs.rm-git"),
        (
            "cd sub && rm -rf \"$PWD/..\"".to_string(),
            "guard.fs.rm-root",
        ),
        (format!("rm -rf {abs}"), "guard.fs.rm-root"),
        (format!("cd sub; rm -rf {abs}"), "guard.fs.rm-root"),
        (format!("cd sub; rm -rf {abs}/.git"), "guard.fs.rm-git"),
        (
            "TAR_OPTIONS=--to-command=id tar xf a.tar".to_string(),
            "env.dangerous",
        ),
        (
            "env TAR_OPTIONS=--to-command=id tar xf a.tar".to_string(),
            "wrapper.env.dangerous-variable",
        ),
    ];
    for (cmd, rule) in &cases {
        let (r, code) = run_json(Some(&p), Some(&root), cmd);
        assert_eq!(code, Some(126), "{cmd}: {r}");
        assert_eq!(r["denial"]["rule"], *rule, "{cmd}: {r}");
        assert!(root.join(".git/objects").is_dir(), "{cmd} removed .git");
        assert!(root.join("keep").is_file(), "{cmd} removed a file");
    }
    // A fresh workspace is the run's HOME: `{~,}` is `~ ` after brace
    // expansion, then the tilde is the workspace.
    let (r, code) = run_json(Some(&p), None, "touch keep; rm -rf {~,}; ls");
    assert_eq!(code, Some(126), "{r}");
    assert_eq!(r["denial"]["rule"], "guard.fs.rm-root", "{r}");
    // Controls: what is meant is still allowed.
    let (r, code) = run_json(Some(&p), Some(&root), "cd sub && rm -rf ../sub");
    assert_eq!(code, Some(0), "{r}");
    assert!(!root.join("sub").exists());
    assert!(root.join(".git/objects").is_dir());
}

/// Removing, emptying or moving away the workspace's `.git`, in the
/// spellings whose paths are known only when the command starts: the
/// paths find would give `{}`, tar --remove-files, a glob inside .git, a
/// `cd` into it. With confinement off, so the string layer alone decides;
/// the repository is intact afterwards and each refusal names the rule.
#[test]
fn the_repository_cannot_be_removed_in_any_spelling() {
    if Command::new("git").arg("--version").output().is_err() {
        crate::common::cannot_run("needs git (apt-get install git)");
        return;
    }
    let p = policy(
        "confinement = \"off\"\n[commands]\nallow = [\"rm\", \"find\", \"tar\", \"mv\", \"ls\", \"cat\"]\n",
    );
    let ws = tempfile::tempdir().unwrap();
    let st = Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.path())
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/a.pyc"), "x").unwrap();
    let entries = || std::fs::read_dir(ws.path().join(".git")).unwrap().count();
    let before = entries();
    for (cmd, rule) in [
        ("find . -name .git -exec rm -rf {} +", "guard.fs.rm-git"),
        ("find . -name '.g*' -exec rm -rf {} ';'", "guard.fs.rm-git"),
        ("find . -iname .GIT -execdir rm -r {} +", "guard.fs.rm-git"),
        ("find . -path '*/.git' -exec rm -rf {} +", "guard.fs.rm-git"),
        ("find . -exec rm -rf {} +", "guard.fs.rm-root"),
        ("tar --remove-files -cf /dev/null .git", "guard.fs.rm-git"),
        (
            "tar -c --remove-files -f /dev/null ./.git/objects",
            "guard.fs.rm-git",
        ),
        ("rm -rf .git/*", "guard.fs.rm-git"),
        ("cd .git && rm -rf *", "guard.fs.rm-root"),
        ("cd .git/refs && rm -rf ../objects", "guard.fs.rm-git"),
        ("cd .git && rm -rf .", "guard.fs.rm-root"),
        ("mv .git old", "guard.fs.mv-git"),
        ("mv ./.git/ /tmp/elsewhere", "guard.fs.mv-git"),
    ] {
        let (r, code) = run_json(Some(&p), Some(ws.path()), cmd);
        assert_eq!(code, Some(126), "{cmd}: {r}");
        assert_eq!(r["denial"]["rule"], rule, "{cmd}: {r}");
        assert!(
            !r["denial"]["hint"].as_str().unwrap_or("").is_empty(),
            "{cmd}: {r}"
        );
        assert_eq!(entries(), before, "{cmd} left .git as it was");
    }
    // What find, tar and rm do to working files still runs.
    for cmd in [
        "find src -type f -exec cat {} +",
        "find . -name '*.pyc' -exec rm -rf {} +",
        "tar --remove-files -cf out.tar src",
        "cd .git && ls",
    ] {
        let (r, code) = run_json(Some(&p), Some(ws.path()), cmd);
        assert_eq!(code, Some(0), "{cmd}: {r}");
    }
    assert!(!ws.path().join("src").exists(), "tar removed src");
    assert_eq!(entries(), before);
}
