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

/// Writes to `out` the policy `base` as `policy show` prints it (every key
/// with its value), each `(anchor, text)` replacing the first `anchor`.
fn edited(base: &Path, out: &Path, edits: &[(&str, String)]) {
    let shown = agent()
        .args(["policy", "show", "--policy"])
        .arg(base)
        .output()
        .unwrap();
    let mut text = String::from_utf8(shown.stdout).unwrap();
    for (anchor, with) in edits {
        assert!(text.contains(anchor), "{anchor} in {text}");
        text = text.replacen(anchor, with, 1);
    }
    std::fs::write(out, text).unwrap();
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
    let v = venv.display();
    let with_venv = dir.path().join("coding-venv.toml");
    edited(
        &coding,
        &with_venv,
        &[
            (
                "search_path = [",
                format!("search_path = [\n    \"{v}/bin\","),
            ),
            ("read = [", format!("read = [\n    \"{v}\",")),
        ],
    );
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

/// `git status` of a repository after a run: the files it does not ignore
/// and those it does, each list sorted.
fn status(repo: &Path) -> (Vec<String>, Vec<String>) {
    let text = git(repo, &["status", "--porcelain", "--ignored"]);
    let (mut plain, mut ignored) = (Vec::new(), Vec::new());
    for line in text.lines() {
        match line.strip_prefix("!! ") {
            Some(p) => ignored.push(p.to_string()),
            None => plain.push(line.to_string()),
        }
    }
    plain.sort();
    ignored.sort();
    (plain, ignored)
}

/// Runs `cmd` with the repository as the workspace; asserts it passed and
/// printed `expect`, and returns what it printed.
/// The RunResult of `cmd` in `repo` under `policy`.
fn run_json(policy: &Path, repo: &Path, cmd: &str) -> serde_json::Value {
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(policy)
        .arg("--workspace")
        .arg(repo)
        .arg(cmd)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{cmd}: {e}: {out:?}"))
}

fn builds(policy: &Path, repo: &Path, cmd: &str, expect: &str) -> String {
    let r = run_json(policy, repo, cmd);
    let all = format!(
        "{}{}",
        r["stdout"].as_str().unwrap_or(""),
        r["stderr"].as_str().unwrap_or("")
    );
    assert_eq!(r["exitCode"], 0, "{cmd}: {r}");
    assert!(all.contains(expect), "{cmd}: want {expect:?} in {r}");
    all
}

fn executable(p: &Path) {
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

const CONFIGURE: &str = r##"#!/bin/sh
# A small configure: find a working C compiler, write config.mk and config.h.
CC=${CC:-cc}
printf 'checking for a C compiler... '
cat > conftest.c <<'END'
int main(void) { return 0; }
END
if $CC -o conftest conftest.c 2>/dev/null && ./conftest; then
  echo "$CC"
else
  echo no; rm -f conftest conftest.c; exit 1
fi
rm -f conftest conftest.c
echo "CC = $CC" > config.mk
echo '#define GREETING "hello"' > config.h
echo "configure: done"
"##;

const C_MAKEFILE: &str = "include config.mk\nCFLAGS = -O2 -Wall\nall: hello\n\
hello: hello.o util.o\n\t$(CC) $(CFLAGS) -o $@ hello.o util.o\n\
%.o: %.c config.h\n\t$(CC) $(CFLAGS) -c $<\n\
test: hello\n\t./hello > out.txt\n\tgrep -q 'hello 42' out.txt && echo 'make test: ok'\n\
.PHONY: all test\n";

/// A C project as autoconf users know it: `./configure` (a /bin/sh script
/// that compiles and runs a test program), make with the compiler found on
/// this machine when the profile was written, a test that runs the built
/// program. Everything it leaves is ignored.
#[test]
fn the_coding_profile_configures_builds_and_tests_a_c_project() {
    if !common::ready("coding profile: C project", false, &["git", "cc", "make"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[
        ("configure", CONFIGURE),
        ("Makefile", C_MAKEFILE),
        (
            "hello.c",
            "#include <stdio.h>\n#include <string.h>\n#include \"config.h\"\nint twice(int);\n\
             int main(void) { printf(\"%s %d\\n\", GREETING, twice(21)); return strlen(GREETING) == 5 ? 0 : 1; }\n",
        ),
        ("util.c", "int twice(int x) { return 2 * x; }\n"),
        (".gitignore", "hello\n*.o\nout.txt\nconfig.mk\nconfig.h\n"),
    ]);
    executable(&r.path().join("configure"));
    git(r.path(), &["add", "configure"]);
    git(r.path(), &["commit", "-qm", "executable"]);
    builds(
        &coding,
        r.path(),
        "./configure && make && make test",
        "make test: ok",
    );
    let (plain, ignored) = status(r.path());
    assert!(plain.is_empty(), "{plain:?}");
    assert_eq!(
        ignored,
        [
            "config.h",
            "config.mk",
            "hello",
            "hello.o",
            "out.txt",
            "util.o"
        ]
    );
}

/// A crate with a build script and a proc-macro dependency vendored in the
/// repository: `cargo test --offline` builds and runs both (programs and a
/// shared object cargo makes in target/), with the Rust toolchain found
/// when the profile was written.
#[test]
fn the_coding_profile_tests_a_cargo_crate_with_a_build_script_and_a_proc_macro() {
    if !common::ready("coding profile: cargo crate", false, &["git", "cc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let text = std::fs::read_to_string(&coding).unwrap();
    if !text.contains("\"cargo\"") {
        common::unavailable(
            "coding profile: cargo crate",
            "policy init found no Rust toolchain (rustc on the search path or in ~/.cargo/bin)",
        );
        return;
    }
    let r = repo(&[
        (
            "Cargo.toml",
            "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nshout = { path = \"vendor/shout\" }\n",
        ),
        (
            "build.rs",
            "fn main() {\n    let out = std::env::var(\"OUT_DIR\").unwrap();\n    \
             std::fs::write(format!(\"{out}/answer.rs\"), \"pub const ANSWER: u32 = 42;\\n\").unwrap();\n    \
             println!(\"cargo:rerun-if-changed=build.rs\");\n}\n",
        ),
        (
            "src/lib.rs",
            "include!(concat!(env!(\"OUT_DIR\"), \"/answer.rs\"));\nshout::shout!(hello);\n\
             pub fn add(a: u32, b: u32) -> u32 { a + b }\n\
             #[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(40, 2), super::ANSWER); }\n    \
             #[test]\n    fn shouts() { assert_eq!(super::hello(), \"HELLO\"); }\n}\n",
        ),
        (
            "vendor/shout/Cargo.toml",
            "[package]\nname = \"shout\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
        ),
        (
            "vendor/shout/src/lib.rs",
            "use proc_macro::TokenStream;\n#[proc_macro]\npub fn shout(input: TokenStream) -> TokenStream {\n    \
             let name = input.to_string();\n    \
             format!(\"pub fn {name}() -> &'static str {{ \\\"{}\\\" }}\", name.to_uppercase()).parse().unwrap()\n}\n",
        ),
        (".gitignore", "/target\nCargo.lock\n"),
    ]);
    builds(
        &coding,
        r.path(),
        "cargo test --offline",
        "test result: ok. 2 passed",
    );
    let (plain, ignored) = status(r.path());
    assert!(plain.is_empty(), "{plain:?}");
    assert_eq!(ignored, ["Cargo.lock", "target/"]);
}

const MINI_LINT: &str = r##"#!/usr/bin/env node
const fs = require('fs'), path = require('path');
let bad = 0;
function walk(d) {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith('.js')) fs.readFileSync(p, 'utf8').split('\n').forEach((l, i) => {
      if (/\s+$/.test(l)) { console.log(`${p}:${i + 1}: trailing whitespace`); bad++; }
    });
  }
}
walk(process.argv[2] || '.');
console.log(`mini-lint: ${bad} problems`);
process.exit(bad ? 1 : 0);
"##;

const MINI_TAPE: &str = r##"#!/bin/sh
n=0; fail=0
for f in "$@"; do
  n=$((n + 1))
  if node "$f"; then echo "ok $n $f"; else echo "not ok $n $f"; fail=$((fail + 1)); fi
done
echo "1..$n"
[ "$fail" -eq 0 ] && echo "# pass $n"
exit "$fail"
"##;

const NPM_PACKAGE: &str = r##"{
  "name": "calc", "version": "1.0.0", "private": true,
  "scripts": {
    "postinstall": "node -e \"require('fs').writeFileSync('src/version.js', 'module.exports = 1;\\n')\"",
    "test": "mini-lint src && mini-tape test/*.js"
  },
  "devDependencies": {
    "mini-lint": "file:vendor/mini-lint-1.0.0.tgz",
    "mini-tape": "file:vendor/mini-tape-1.0.0.tgz"
  }
}
"##;

/// An npm package whose test script runs a linter (a node script) and a
/// test runner (a /bin/sh script, so the interpreter runs it) from
/// node_modules/.bin, installed from tarballs in the repository, with a
/// postinstall lifecycle script.
#[test]
fn the_coding_profile_installs_and_tests_an_npm_package_with_its_own_bins() {
    if !common::ready(
        "coding profile: npm package",
        false,
        &["git", "node", "npm"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[
        ("package.json", NPM_PACKAGE),
        ("src/add.js", "module.exports = (a, b) => a + b;\n"),
        (
            "test/add.js",
            "const assert = require('assert');\nassert.strictEqual(require('../src/add')(2, 3), 5);\n\
             assert.strictEqual(require('../src/version'), 1);\n",
        ),
        (
            ".gitignore",
            "node_modules/\nsrc/version.js\npackage-lock.json\n",
        ),
    ]);
    // The two tools, packed as a registry would serve them.
    let tools = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(r.path().join("vendor")).unwrap();
    for (name, file, body) in [
        ("mini-lint", "lint.js", MINI_LINT),
        ("mini-tape", "tape.sh", MINI_TAPE),
    ] {
        let d = tools.path().join(name);
        std::fs::create_dir_all(d.join("bin")).unwrap();
        std::fs::write(
            d.join("package.json"),
            format!(
                r#"{{"name": "{name}", "version": "1.0.0", "bin": {{"{name}": "bin/{file}"}}}}"#
            ),
        )
        .unwrap();
        std::fs::write(d.join("bin").join(file), body).unwrap();
        executable(&d.join("bin").join(file));
        let out = std::process::Command::new("npm")
            .args(["pack", "-q", "--pack-destination"])
            .arg(r.path().join("vendor"))
            .current_dir(&d)
            .output()
            .unwrap();
        assert!(out.status.success(), "npm pack {name}: {out:?}");
    }
    git(r.path(), &["add", "-A"]);
    git(r.path(), &["commit", "-qm", "vendor"]);
    let all = builds(
        &coding,
        r.path(),
        "npm install --no-audit --no-fund && npm test",
        "# pass 1",
    );
    assert!(all.contains("mini-lint: 0 problems"), "{all}");
    let (plain, ignored) = status(r.path());
    assert!(plain.is_empty(), "{plain:?}");
    assert_eq!(
        ignored,
        ["node_modules/", "package-lock.json", "src/version.js"]
    );
}

const SPEED_C: &str = r##"#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&module); }
"##;

/// A Python package with a C extension: a venv made in the repository and
/// activated, pytest and the package installed into it from local wheels
/// (the extension compiled by the toolchain the profile found, then loaded
/// from the venv), and pytest run by name from the venv.
#[test]
fn the_coding_profile_builds_a_python_c_extension_into_a_venv_and_tests_it() {
    let test = "coding profile: Python C extension";
    if !common::ready(test, false, &["git", "cc"]) {
        return;
    }
    let headers = std::fs::read_dir("/usr/include")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("Python.h").is_file());
    if !headers {
        common::unavailable(test, "needs Python's headers (Debian: python3-dev)");
        return;
    }
    let wheels = match common::pytest_wheels() {
        Ok(w) => w,
        Err(why) => {
            common::unavailable(test, &why);
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[
        (
            "setup.py",
            "from setuptools import Extension, setup\n\nsetup(\n    name=\"fastcalc\",\n    version=\"0.1\",\n    \
             package_dir={\"\": \"src\"},\n    packages=[\"fastcalc\"],\n    \
             ext_modules=[Extension(\"fastcalc._speed\", [\"src/fastcalc/_speed.c\"])],\n)\n",
        ),
        (
            "src/fastcalc/__init__.py",
            "from ._speed import add\n\ndef double(x):\n    return add(x, x)\n",
        ),
        ("src/fastcalc/_speed.c", SPEED_C),
        (
            "tests/test_speed.py",
            "import fastcalc\n\ndef test_add():\n    assert fastcalc.add(2, 3) == 5\n\n\
             def test_double():\n    assert fastcalc.double(21) == 42\n",
        ),
        (
            ".gitignore",
            ".venv/\nbuild/\n*.egg-info/\n__pycache__/\n.pytest_cache/\nwheels/\n",
        ),
    ]);
    let local = r.path().join("wheels");
    std::fs::create_dir_all(&local).unwrap();
    for e in std::fs::read_dir(&wheels).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "whl") {
            std::fs::copy(e.path(), local.join(e.file_name())).unwrap();
        }
    }
    builds(
        &coding,
        r.path(),
        "python3 -m venv .venv && . .venv/bin/activate \
         && pip install -q --no-index --find-links wheels pytest wheel \
         && pip install -q --no-index --find-links wheels . && pytest -q tests",
        "2 passed",
    );
    let (plain, ignored) = status(r.path());
    assert!(plain.is_empty(), "{plain:?}");
    for want in [".venv/", "build/", "wheels/"] {
        assert!(ignored.iter().any(|i| i == want), "{want} in {ignored:?}");
    }
}

const ATTACK_C: &str = r##"#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t p = fork();
    if (p == 0) {
        execl("/usr/bin/id", "id", (char *)0);
        printf("exec errno %d\n", errno);
        fflush(stdout);
        _exit(0);
    }
    waitpid(p, 0, 0);
    int fd = open(OUTSIDE, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) printf("write errno %d\n", errno); else printf("write ok\n");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(PORT);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) printf("net errno %d\n", errno);
    else printf("net ok\n");
    struct stat sb;
    if (chmod(argv[0], 04755) < 0) printf("setuid errno %d\n", errno);
    else if (stat(argv[0], &sb) == 0 && (sb.st_mode & 04000)) printf("setuid set\n");
    else printf("setuid dropped\n");
    fflush(stdout);
    if (fork() == 0) {
        setsid();
        if (fork() == 0) { close(1); close(2); for (;;) pause(); }
        _exit(0);
    }
    printf("daemon started\n");
    return 0;
}
"##;

/// Processes on the host whose command line holds `marker`.
fn holding(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}

/// The workspace grant under the coding profile as `policy init` writes it:
/// a program the run compiles itself runs, and still cannot execute a
/// system program the policy does not allow, write outside the scopes,
/// reach the host's loopback under `network = "none"`, keep a setuid bit,
/// or outlive the run. As root and as an unprivileged account; the
/// program's targets are in its source, so no argument rule is involved.
#[test]
fn a_workspace_program_stays_confined_under_the_coding_profile() {
    if !common::ready("coding profile: workspace program", false, &["cc"]) {
        return;
    }
    if !common::root() {
        common::cannot_run("runs the program as root and as nobody");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let coding = init("coding", dir.path());
    std::fs::set_permissions(&coding, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        outside.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    for uid in [0u32, 65534] {
        let target = outside.path().join(format!("written-by-{uid}"));
        let marker = format!("mark{}x{uid}", std::process::id());
        let source = format!(
            "#define OUTSIDE \"{}\"\n#define PORT {port}\n{ATTACK_C}",
            target.display()
        );
        let cmd = format!("cat > a.c <<'END'\n{source}END\ncc -o a.out a.c && ./a.out {marker}");
        let out = crate::kernel_escapes::agent_as(uid)
            .env_remove("AGENT_RSH_POLICY")
            .args(["run", "--json", "--policy"])
            .arg(&coding)
            .args(["--", &cmd])
            .output()
            .unwrap();
        let r: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("uid {uid}: {e}: {out:?}"));
        let text = r["stdout"].as_str().unwrap_or("");
        assert_eq!(r["exitCode"], 0, "uid {uid}: {r}");
        for want in [
            "exec errno 13",
            "write errno",
            "net errno",
            "setuid errno",
            "daemon started",
        ] {
            assert!(text.contains(want), "uid {uid}: {want} in {r}");
        }
        assert!(!text.contains("uid="), "uid {uid}: id ran: {r}");
        assert!(!target.exists(), "uid {uid}: wrote {}", target.display());
        assert!(listener.accept().is_err(), "uid {uid}: reached the host");
        // The tree is ended with the run; its reaping may trail the result.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !holding(&marker).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(
            holding(&marker).is_empty(),
            "uid {uid}: {:?} outlived the run",
            holding(&marker)
        );
    }
}

/// Text mode (the output streamed, not captured) gives the warnings that
/// explain a refusal, as JSON does: a write the read-only mount view
/// refused, a header the run cannot read, a compiler helper it cannot
/// start, each naming the policy key that would change it.
#[test]
fn text_mode_explains_what_the_run_refused() {
    if !common::ready("diagnostics in text mode", false, &["python3", "cc"]) {
        return;
    }
    let cc1 = std::process::Command::new("cc")
        .arg("-print-prog-name=cc1")
        .output()
        .unwrap();
    let cc1 = PathBuf::from(String::from_utf8_lossy(&cc1.stdout).trim());
    let Some(helpers) = cc1
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    else {
        common::unavailable("diagnostics in text mode", "cc does not name its cc1 (gcc)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.toml");
    let with_helpers = dir.path().join("helpers.toml");
    std::fs::write(&bare, "[commands]\nallow = [\"cc\", \"python3\"]\n").unwrap();
    // The default scopes, the helpers' directory and the links through
    // which gcc finds its own prefix, without /usr/include.
    let h = helpers.display();
    edited(
        &bare,
        &with_helpers,
        &[
            (
                "read = [",
                format!("read = [\n    \"{h}\",\n    \"/etc/alternatives\","),
            ),
            ("exec = []", format!("exec = [\"{h}\"]")),
        ],
    );
    let source = "printf '#include <stdio.h>\\nint main(void) { return 0; }\\n' > a.c; cc -c a.c";
    for (policy, cmd, want) in [
        (
            &bare,
            "python3 -c 'open(\"/usr/agent-rsh-x\", \"w\")'",
            "agent-rsh: warning: \"Read-only file system\" for /usr/agent-rsh-x inside the run is the mount view",
        ),
        (&bare, source, "the compiler starts its helpers"),
        (
            &with_helpers,
            source,
            "the compiler found no header stdio.h",
        ),
    ] {
        let out = agent()
            .args(["run", "--policy"])
            .arg(policy)
            .arg(cmd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(err.contains(want), "{cmd}: want {want:?} in {err}");
    }
}

/// A persistent workspace's runs keep HOME and TMPDIR in agent-rsh's state
/// directory (under ~/.local/state/agent-rsh or /tmp/agent-rsh-UID-state):
/// a script's own temporary directory there is removed as in bash, not
/// taken for agent-rsh's state or a home directory.
#[test]
fn a_script_removes_its_own_temporary_directory() {
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[("a.txt", "a\n")]);
    builds(
        &coding,
        r.path(),
        "t=$(mktemp -d); trap 'rm -rf \"$t\"' EXIT; f=$(mktemp); touch \"$t/x\"; rm -f \"$f\"; \
         rm -rf \"$t\" && echo cleaned",
        "cleaned",
    );
}

/// `timeout 5 ./hello`, `env ./run.sh`: a wrapper that starts one of the
/// project's own programs runs it under commands.workspace, as the first
/// word of a command may, whether the command takes the simple path or
/// the interpreter's. The file is found in the workspace when it runs:
/// a missing one, or one outside the workspace, is still refused, and
/// without the grant nothing of the project's runs.
#[test]
fn a_wrapper_starts_the_projects_own_program_only_under_the_grant() {
    if !common::ready("coding profile: wrapped program", false, &["git", "cc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[
        (
            "hello.c",
            "#include <stdio.h>\nint main(void) { puts(\"hello from the project\"); return 0; }\n",
        ),
        ("run.sh", "#!/bin/sh\necho \"script ran: $#\"\n"),
    ]);
    executable(&r.path().join("run.sh"));
    let outside = dir.path().join("outside.sh");
    std::fs::write(&outside, "#!/bin/sh\necho outside\n").unwrap();
    executable(&outside);
    builds(&coding, r.path(), "cc -o hello hello.c", "");
    builds(
        &coding,
        r.path(),
        "timeout 5 ./hello",
        "hello from the project",
    );
    builds(&coding, r.path(), "env ./run.sh a b", "script ran: 2");
    builds(
        &coding,
        r.path(),
        "cc -o again hello.c && timeout 5 ./again",
        "hello from the project",
    );
    let refused = |policy: &Path, cmd: &str| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(policy)
            .arg("--workspace")
            .arg(r.path())
            .arg(cmd)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // Refused before it runs (status denied) or by the interpreter
        // when it finds no such file in the workspace (126).
        assert!(
            v["status"] == "denied" || v["exitCode"] == 126,
            "{cmd}: {v}"
        );
        assert_eq!(v["denial"]["rule"], "command.path", "{cmd}: {v}");
        assert!(!v.to_string().contains("outside\\n"), "{cmd}: {v}");
    };
    refused(&coding, "timeout 5 ./missing");
    refused(&coding, "timeout 5 ../outside.sh");
    refused(&coding, &format!("timeout 5 {}", outside.display()));
    let strict = dir.path().join("strict.toml");
    edited(
        &coding,
        &strict,
        &[("\nworkspace = true\n", "\nworkspace = false\n".to_string())],
    );
    refused(&strict, "timeout 5 ./hello");
    refused(&strict, "env ./run.sh");
}

/// Build flags and module search paths, which a coding loop sets every
/// day, are read by value: `CFLAGS='-O2 -DANSWER=42' make` and
/// `PYTHONPATH=src python3` work under the coding profile, while a flag
/// that makes the compiler run a program of the workspace (`-B`) or a
/// search path outside the workspace is refused before the program starts.
#[test]
fn build_flags_and_search_paths_are_read_by_value() {
    if !common::ready("coding profile: build flags", false, &["git", "cc", "make"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[
        (
            "Makefile",
            "answer: answer.c\n\t$(CC) $(CFLAGS) -o answer answer.c\n",
        ),
        (
            "answer.c",
            "#include <stdio.h>\nint main(void) { printf(\"answer %d\\n\", ANSWER); return 0; }\n",
        ),
        ("src/calc/__init__.py", "def add(a, b):\n    return a + b\n"),
        ("t.py", "import calc\nprint('calc', calc.add(40, 2))\n"),
        // What `-B./tools` would make the compiler run instead of its own.
        ("tools/cc1", "#!/bin/sh\ntouch hijacked\n"),
        (".gitignore", "answer\n"),
    ]);
    executable(&r.path().join("tools/cc1"));
    builds(
        &coding,
        r.path(),
        "export CFLAGS='-O2 -Wall -DANSWER=42' && make && ./answer",
        "answer 42",
    );
    builds(&coding, r.path(), "PYTHONPATH=src python3 t.py", "calc 42");
    builds(
        &coding,
        r.path(),
        "export PYTHONPATH=\"$PWD/src\"; python3 t.py",
        "calc 42",
    );
    std::fs::remove_file(r.path().join("answer")).unwrap();
    for cmd in [
        "CFLAGS='-O2 -B./tools -DANSWER=1' make",
        "export CFLAGS=-B./tools; make",
        "env CFLAGS=-B./tools make",
        "PYTHONPATH=/etc python3 t.py",
        "PYTHONPATH=src:../.. python3 t.py",
    ] {
        let v = run_json(&coding, r.path(), cmd);
        assert_eq!(v["status"], "denied", "{cmd}: {v}");
        let rule = v["denial"]["rule"].as_str().unwrap_or("");
        assert!(rule.contains("env.dangerous"), "{cmd}: {v}");
        assert!(!r.path().join("hijacked").exists(), "{cmd}");
        assert!(!r.path().join("answer").exists(), "{cmd}");
    }
}

/// Under the coding profile a path to a program of the project that does
/// not exist (yet) is what bash says it is: not found, status 127, so
/// `./build/app || make` and `set -e` behave as the agent expects.
#[test]
fn a_missing_program_of_the_project_is_not_found_as_in_bash() {
    let dir = tempfile::tempdir().unwrap();
    let coding = init("coding", dir.path());
    let r = repo(&[("README", "x\n")]);
    let script = "./nothere; echo \"st $?\"; bin/app || echo fallback";
    let v = run_json(&coding, r.path(), script);
    let bash = crate::scripts::bash_in(r.path(), script);
    assert_eq!(
        v["stdout"],
        String::from_utf8_lossy(&bash.stdout).as_ref(),
        "{v}"
    );
    assert_eq!(v["stdout"], "st 127\nfallback\n", "{v}");
    assert_eq!(v["exitCode"], 0, "{v}");
    let err = v["stderr"].as_str().unwrap();
    assert!(err.contains("./nothere: No such file or directory"), "{v}");
    assert!(err.contains("bin/app: No such file or directory"), "{v}");
}
