//! `agent-rsh policy init --profile NAME`: each profile is a valid policy,
//! and the coding and ci profiles run real projects' tests end to end
//! (pytest, `npm test`, `make test`) in a repository workspace, leaving
//! nothing in its `git status`.

use crate::common;
use assert_cmd::Command;
use std::path::{Path, PathBuf};

use crate::common::BIN;

fn agent() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("AGENT_RSH_POLICY");
    c
}

fn init(profile: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("{profile}.toml"));
    agent()
        .args(["policy", "init", "--profile", profile])
        .arg(&path)
        .assert()
        .success();
    agent()
        .args(["policy", "check"])
        .arg(&path)
        .assert()
        .success();
    path
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A committed repository with these files.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q"]);
    for (name, body) in files {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    git(d.path(), &["add", "-A"]);
    git(d.path(), &["commit", "-qm", "sample"]);
    d
}

/// Runs `cmd` in `repo` under `policy`; asserts it passed and left the
/// repository as it was.
fn passes(policy: &Path, repo: &Path, cmd: &str, expect: &str) {
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(policy)
        .arg("--workspace")
        .arg(repo)
        .arg(cmd)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["exitCode"], 0, "{cmd}: {r}");
    let all = format!("{}{}", r["stdout"], r["stderr"]);
    assert!(all.contains(expect), "{cmd}: {r}");
    assert_eq!(
        git(repo, &["status", "--porcelain", "--ignored"]),
        "",
        "{cmd} left files in the repository"
    );
}

const MAKEFILE: &str = "test:\n\t@echo compiling\n\tmkdir -p $(TMPDIR)/build\n\tcp calc.txt $(TMPDIR)/build/\n\t@grep -q 'two' $(TMPDIR)/build/calc.txt && echo 'make: 1 passed'\n";

fn node_project() -> tempfile::TempDir {
    repo(&[
        (
            "package.json",
            r#"{"name": "sample", "version": "1.0.0", "private": true, "scripts": {"test": "node --test"}}"#,
        ),
        (
            "test/add.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\n\
             test('adds', () => assert.strictEqual(1 + 1, 2));\n",
        ),
    ])
}

#[test]
fn every_profile_is_written_and_valid_and_inspect_reads_only() {
    let dir = tempfile::tempdir().unwrap();
    for p in ["inspect", "coding", "ci"] {
        init(p, dir.path());
    }
    // An unknown profile is a usage error naming the profiles.
    agent()
        .args(["policy", "init", "--profile", "admin"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("inspect, coding, ci"));
    let inspect = dir.path().join("inspect.toml");
    let r = repo(&[("a.txt", "hello\n")]);
    passes(&inspect, r.path(), "cat a.txt", "hello");
    agent()
        .args(["run", "--policy"])
        .arg(&inspect)
        .arg("--workspace")
        .arg(r.path())
        .arg("rm a.txt")
        .assert()
        .code(126);
}

#[test]
fn the_coding_profile_runs_make_npm_and_pytest_and_leaves_the_repository_clean() {
    if !common::ready("coding profile", false, &["git", "make", "node", "npm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());

    let r = repo(&[("Makefile", MAKEFILE), ("calc.txt", "one two\n")]);
    passes(&coding, r.path(), "make test", "make: 1 passed");

    let r = node_project();
    passes(&coding, r.path(), "npm test", "# pass 1");

    // The system pip scans its own directory (/usr/bin), which the run may
    // list though not read.
    if Path::new("/usr/bin/pip").exists() {
        passes(&coding, r.path(), "pip list", "Package");
    }

    // pytest from a venv outside the repository: the profile with the
    // venv's bin first on the search path and the venv readable.
    let venv = match common::pytest_venv() {
        Ok(v) => v.canonicalize().unwrap(),
        Err(why) => {
            common::unavailable("coding profile: pytest", &why);
            return;
        }
    };
    let shown = agent()
        .args(["policy", "show", "--policy"])
        .arg(&coding)
        .output()
        .unwrap();
    let v = venv.display();
    let text = String::from_utf8(shown.stdout)
        .unwrap()
        .replacen(
            "search_path = [",
            &format!("search_path = [\n    \"{v}/bin\","),
            1,
        )
        .replacen("read = [", &format!("read = [\n    \"{v}\","), 1);
    let with_venv = dir.path().join("coding-venv.toml");
    std::fs::write(&with_venv, text).unwrap();
    let r = repo(&[
        ("calc.py", "def add(a, b):\n    return a + b\n"),
        (
            "tests/test_calc.py",
            "import calc\n\ndef test_add(tmp_path):\n    (tmp_path / 'x').write_text('x')\n    assert calc.add(1, 2) == 3\n",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\npythonpath = [\".\"]\naddopts = \"--strict-config\"\n",
        ),
    ]);
    // Nothing is added to pytest's options: a --strict-config project run
    // without the cache plugin passes, and leaves nothing behind.
    passes(
        &with_venv,
        r.path(),
        "pytest -q -p no:cacheprovider",
        "1 passed",
    );
    // With the cache, pytest writes .pytest_cache where it always does;
    // it holds its own .gitignore, so `git status` stays clean.
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&with_venv)
        .arg("--workspace")
        .arg(r.path())
        .arg("pytest -q")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(git(r.path(), &["status", "--porcelain"]), "");
}

#[test]
fn the_ci_profile_runs_a_makefile_with_the_network_allowed() {
    if !common::ready("ci profile", false, &["git", "make", "env"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ci = init("ci", dir.path());
    let r = repo(&[("Makefile", MAKEFILE), ("calc.txt", "one two\n")]);
    passes(&ci, r.path(), "make test", "make: 1 passed");
    // No offline switches: the network is the policy's to give.
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&ci)
        .arg("env")
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!r["stdout"].as_str().unwrap().contains("npm_config_offline"));
}

/// The coding profile commits with a default identity a call can replace,
/// gives a test suite ten minutes, and has the small tools builds use.
#[test]
fn the_coding_profile_commits_with_its_identity_and_has_the_build_tools() {
    if !common::ready("coding profile: git identity", false, &["git"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let text = std::fs::read_to_string(&coding).unwrap();
    assert!(text.contains("timeout_ms = 600000"), "{text}");
    let r = repo(&[("a.txt", "a\n")]);
    std::fs::write(r.path().join("a.txt"), "b\n").unwrap();
    passes(
        &coding,
        r.path(),
        "git commit -qam mine && GIT_AUTHOR_NAME=Alice git commit -q --allow-empty -m hers \
         && git log -2 --format='%an <%ae>' && sleep 0 && timeout 5 nproc >/dev/null \
         && uname -s && expr 2 + 3 && cmp a.txt a.txt && chmod 644 a.txt && echo tools-ok",
        // As the JSON text shows it.
        r"Alice <agent-rsh@localhost>\nagent-rsh <agent-rsh@localhost>\nLinux\n5\ntools-ok\n",
    );
}
