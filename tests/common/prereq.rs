//! What the end-to-end tests need beyond the Rust toolchain, set up by the
//! tests themselves: a venv with the MCP Python SDK, an npm install of the
//! MCP TypeScript SDK clients, both under `target/tmp` and reused by later
//! runs. A test whose prerequisite cannot be had (no python3, node, tmux,
//! root...) is skipped with a line on stderr, but fails under `CI=true`,
//! where a skip would pass silently.

use super::root;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Tests run on parallel threads of one process, and two of them may need
/// the same prerequisite at once: making one (`venv --clear`, `npm
/// install`) while another test uses it fails the other. Every setup below
/// holds this lock from its stamp check to its stamp write.
static SETUP: Mutex<()> = Mutex::new(());

fn setup_lock() -> MutexGuard<'static, ()> {
    // A test that panicked while holding it left nothing half made that the
    // stamp check would take as done, so the lock stays usable.
    SETUP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True when the environment says this is a CI run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The running test's name: libtest runs each test on a thread named after
/// it (`run::workspace_hygiene`); `fallback` where there is none.
pub fn test_name(fallback: &str) -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => fallback.to_string(),
    }
}

/// Returns false (the test should return) after saying on stderr
/// `SKIPPED <test>: <why>`, `<test>` being the running test's name (`test`
/// where the thread has none); under CI the missing prerequisite is a
/// failure instead.
pub fn unavailable(test: &str, why: &str) -> bool {
    let test = test_name(test);
    if in_ci() {
        panic!("{test}: {why}; CI=true, so this is a failure, not a skip (.ci/run installs it)");
    }
    eprintln!("SKIPPED {test}: {why} (set CI=true to make this a failure)");
    false
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{:?} {:?} failed ({}): {}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn tmp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The MCP Python SDK version the Python client test was written against.
pub const MCP_PYTHON_SDK: &str = "mcp==2.3.0";

/// An interpreter that imports the MCP Python SDK: `$AGENT_RSH_TEST_PYTHON`,
/// else a venv made (once) under target/tmp with `pip install mcp`.
pub fn python_with_mcp() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("AGENT_RSH_TEST_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let _setup = setup_lock();
    let venv = tmp_dir("mcp-python").join("venv");
    let py = venv.join("bin/python");
    let stamp = venv.join(".agent-rsh-installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == MCP_PYTHON_SDK) {
        return Ok(py);
    }
    run(Command::new("python3").args(["-c", "import sys; assert sys.version_info >= (3, 10)"]))
        .map_err(|e| format!("python3 (3.10 or later) is needed: {e}"))?;
    run(Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg("--clear")
        .arg(&venv))
    .map_err(|e| format!("cannot make a venv (Debian: apt-get install python3-venv): {e}"))?;
    run(Command::new(venv.join("bin/pip")).args([
        "install",
        "-q",
        "--disable-pip-version-check",
        MCP_PYTHON_SDK,
    ]))?;
    std::fs::write(&stamp, MCP_PYTHON_SDK).unwrap();
    Ok(py)
}

/// A directory with the TypeScript client script and its npm packages
/// (tests/mcp-ts/package.json, installed once under target/tmp), and the
/// node to run it with.
pub fn typescript_clients() -> Result<PathBuf, String> {
    let _setup = setup_lock();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-ts");
    let dir = tmp_dir("mcp-ts");
    let major = run(Command::new("node").args(["-p", "process.versions.node.split('.')[0]"]))
        .map_err(|e| format!("node (20 or later) is needed: {e}"))?;
    if major.parse::<u32>().unwrap_or(0) < 20 {
        return Err(format!(
            "node {major} is too old; the TypeScript SDK needs 20 or later"
        ));
    }
    let manifest = std::fs::read_to_string(src.join("package.json")).unwrap();
    let stamp = dir.join(".agent-rsh-installed");
    std::fs::copy(src.join("client.mjs"), dir.join("client.mjs")).unwrap();
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == manifest) {
        return Ok(dir);
    }
    std::fs::write(dir.join("package.json"), &manifest).unwrap();
    run(Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--loglevel=error",
        ])
        .current_dir(&dir))
    .map_err(|e| format!("npm install of the MCP TypeScript SDK failed: {e}"))?;
    std::fs::write(&stamp, manifest).unwrap();
    Ok(dir)
}

/// Whether `program` is an executable on PATH.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Whether python3 is on the default policies' search path (/usr/local/bin,
/// /usr/bin, /bin), where a run finds it (the caller's PATH is not used).
pub fn system_python3() -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join("python3").exists())
}

/// True when the test can run: root (when `needs_root`) and every program
/// on PATH. Otherwise the test is skipped, or fails under CI.
pub fn ready(test: &str, needs_root: bool, programs: &[&str]) -> bool {
    if needs_root && !root() {
        return unavailable(test, "needs root (it creates throwaway accounts)");
    }
    let missing: Vec<&str> = programs.iter().copied().filter(|p| !on_path(p)).collect();
    if !missing.is_empty() {
        return unavailable(
            test,
            &format!(
                "needs {} on PATH (Debian packages: tmux, procps, passwd, util-linux, git)",
                missing.join(", ")
            ),
        );
    }
    true
}

/// A venv with pytest (made once under target/tmp from /usr/bin/python3,
/// which the policies' read scopes cover), for the coding profile's test.
pub fn pytest_venv() -> Result<PathBuf, String> {
    let _setup = setup_lock();
    make_pytest_venv()
}

fn make_pytest_venv() -> Result<PathBuf, String> {
    let venv = tmp_dir("pytest").join("venv");
    let stamp = venv.join(".agent-rsh-installed");
    // The stamp names the venv's own path: a venv's scripts start with its
    // absolute path, so one copied with a build directory is made again.
    let mark = format!("pytest {}", venv.display());
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == mark) {
        return Ok(venv);
    }
    run(Command::new("/usr/bin/python3")
        .arg("-m")
        .arg("venv")
        .arg("--clear")
        .arg(&venv))
    .map_err(|e| format!("cannot make a venv with /usr/bin/python3 (Debian: python3-venv): {e}"))?;
    run(Command::new(venv.join("bin/pip")).args([
        "install",
        "-q",
        "--disable-pip-version-check",
        "pytest",
    ]))?;
    std::fs::write(&stamp, mark).unwrap();
    Ok(venv)
}

/// A directory of wheels for installing pytest into a fresh venv with
/// `pip install --no-index --find-links DIR`: pytest, its dependencies and
/// `wheel` (which builds a C extension's wheel), downloaded once with the
/// pytest venv's pip.
pub fn pytest_wheels() -> Result<PathBuf, String> {
    let _setup = setup_lock();
    let dir = tmp_dir("pytest").join("wheels");
    let stamp = dir.join(".agent-rsh-downloaded");
    if stamp.is_file() {
        return Ok(dir);
    }
    let venv = make_pytest_venv()?;
    run(Command::new(venv.join("bin/pip"))
        .args(["download", "-q", "--disable-pip-version-check", "-d"])
        .arg(&dir)
        .args(["pytest", "wheel"]))?;
    std::fs::write(&stamp, "").unwrap();
    Ok(dir)
}
