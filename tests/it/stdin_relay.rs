//! Standard input reaches the command through an object agent-rsh owns
//! and relays: a pipe, or a pty of its own when the caller's stdin is a
//! terminal. The command never holds the caller's terminal or a job's
//! FIFO, so it cannot change their mode, owner or times through fd 0
//! (python3 allowed, the string layer deciding nothing). And input still
//! arrives: lines typed on a terminal (the command sees a terminal, of the
//! terminal's size), piped bytes exactly, end of file when the input ends;
//! the caller's terminal modes come back after the run, also after a
//! deadline or a signal ended it.

use crate::common::{BIN, PATIENCE, cannot_run, ready, root, wait_for};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const NOBODY: u32 = 65534;

/// The attack on fd 0, and what the command sees there. Prints `ready`,
/// then, on SIGWINCH, the terminal's size; reads one line, prints it with
/// whether fd 0 is a terminal, then changes fd 0's mode and times.
const ATTACK: &str = r#"
import os, signal, sys
def winch(*_):
    c, l = os.get_terminal_size(0)
    print("size", c, l, flush=True)
if os.isatty(0):
    signal.signal(signal.SIGWINCH, winch)
print("ready", flush=True)
line = sys.stdin.readline()
print("got", repr(line), "tty", os.isatty(0), flush=True)
for name, f in (("fchmod", lambda: os.fchmod(0, 0o666)), ("utime", lambda: os.utime(0, (1, 1)))):
    try:
        f()
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, e.errno, flush=True)
"#;

/// A world-readable directory with the policy, and a workspace holding
/// the attack script, owned by `owner`.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(owner: u32) -> Setup {
        let dir = tempfile::Builder::new()
            .prefix("agent-rsh-stdin-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        let s = Setup { dir };
        std::fs::write(
            s.policy(),
            "confinement = \"required\"\n[commands]\nallow = [\"python3\", \"cat\"]\n[packs]\noff = [\"python\"]\n",
        )
        .unwrap();
        std::fs::set_permissions(s.policy(), PermissionsExt::from_mode(0o644)).unwrap();
        std::fs::create_dir(s.workspace()).unwrap();
        std::fs::write(s.workspace().join("attack.py"), ATTACK).unwrap();
        for p in [s.workspace(), s.workspace().join("attack.py")] {
            std::os::unix::fs::chown(&p, Some(owner), Some(owner)).unwrap();
        }
        s
    }

    fn policy(&self) -> PathBuf {
        self.dir.path().join("policy.toml")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Seconds since the epoch, a little in the past (file times come from a
/// coarse clock).
fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - 2
}

/// (mode, uid, gid, atime, mtime) of a path.
fn meta(p: &Path) -> (u32, u32, u32, i64, i64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.mode(), m.uid(), m.gid(), m.atime(), m.mtime())
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A tmux server of its own, running one pane; killed on drop.
struct Pane {
    dir: tempfile::TempDir,
}

impl Pane {
    /// Starts `script` (sh) in a 100x30 terminal.
    fn start(script: &Path) -> Pane {
        let p = Pane {
            dir: tempfile::tempdir().unwrap(),
        };
        let st = p
            .cmd()
            .args(["new-session", "-d", "-s", "t", "-x", "100", "-y", "30"])
            .arg(format!("sh {}", quote(script.to_str().unwrap())))
            .status()
            .unwrap();
        assert!(st.success());
        p
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(self.dir.path().join("socket"));
        c.args(["-f", "/dev/null"]);
        c
    }

    fn tty(&self) -> PathBuf {
        let out = self
            .cmd()
            .args(["display-message", "-p", "-t", "t", "#{pane_tty}"])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }

    fn keys(&self, keys: &[&str]) {
        let st = self
            .cmd()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap();
        assert!(st.success());
    }

    fn resize(&self, cols: u32, lines: u32) {
        let st = self
            .cmd()
            .args(["resize-window", "-t", "t", "-x"])
            .arg(cols.to_string())
            .arg("-y")
            .arg(lines.to_string())
            .status()
            .unwrap();
        assert!(st.success());
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// The terminal's modes (`stty -g`) the pane recorded right before and
/// right after the run (read from inside: tmux sets the pane's modes in
/// the pane's process, after the session is reported started).
fn modes(s: &Setup) -> (String, String) {
    (text(&s.path("modes.before")), text(&s.path("modes.after")))
}

/// The pane's script: waits for a line (so the test reads the terminal's
/// state first), runs `line` with stdout and stderr in files, records the
/// status, then stays (the terminal must outlive the run).
fn pane_script(s: &Setup, line: &str) -> PathBuf {
    let script = s.path("pane.sh");
    std::fs::write(
        &script,
        format!(
            "echo $$ > {pid}\nread go\nstty -g > {before}\n{line} > {out} 2> {err}\nst=$?\nstty -g > {after}\necho $st > {status}\nsleep 600\n",
            before = quote(s.path("modes.before").to_str().unwrap()),
            after = quote(s.path("modes.after").to_str().unwrap()),
            pid = quote(s.path("pid").to_str().unwrap()),
            out = quote(s.path("out").to_str().unwrap()),
            err = quote(s.path("err").to_str().unwrap()),
            status = quote(s.path("status").to_str().unwrap()),
        ),
    )
    .unwrap();
    script
}

/// `agent-rsh run --stdin ...` as a shell line, as `uid`.
fn run_line(s: &Setup, uid: u32, args: &str) -> String {
    let who = if uid == 0 {
        String::new()
    } else {
        format!("setpriv --reuid={uid} --regid={uid} --clear-groups ")
    };
    format!(
        "{who}{} run --policy {} --stdin --workspace {} {args}",
        quote(BIN),
        quote(s.policy().to_str().unwrap()),
        quote(s.workspace().to_str().unwrap()),
    )
}

fn wait_status(s: &Setup, pane: &Pane) -> i32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let t = text(&s.path("status"));
        if t.ends_with('\n') {
            return t.trim().parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the run did not end; stdout:\n{}\nstderr:\n{}\nscreen:\n{}",
            text(&s.path("out")),
            text(&s.path("err")),
            pane.screen()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_out(s: &Setup, what: &str) {
    wait_for(&format!("{what:?} in the run's output"), || {
        text(&s.path("out")).contains(what)
    });
}

fn terminal_ready(test: &str) -> bool {
    if !ready(test, false, &["tmux", "python3", "stty", "setpriv"]) {
        return false;
    }
    if !root() {
        cannot_run("needs root to give the terminal to an account and to drop to nobody");
        return false;
    }
    true
}

/// The attack in a terminal, as `uid`, whose terminal it is.
fn terminal_attack(uid: u32) {
    let s = Setup::new(uid);
    let script = pane_script(&s, &run_line(&s, uid, "-- python3 attack.py"));
    let pane = Pane::start(&script);
    let tty = pane.tty();
    assert!(tty.starts_with("/dev/pts/"), "{tty:?}");
    std::os::unix::fs::chown(&tty, Some(uid), None).unwrap();
    let before = meta(&tty);
    pane.keys(&["go", "Enter"]);
    wait_out(&s, "ready");
    // The window size reaches the command's terminal (and SIGWINCH it).
    pane.resize(91, 17);
    wait_out(&s, "size 91 17");
    pane.keys(&["typed on the terminal", "Enter"]);
    let status = wait_status(&s, &pane);
    let out = text(&s.path("out"));
    assert_eq!(
        status,
        0,
        "stdout:\n{out}\nstderr:\n{}",
        text(&s.path("err"))
    );
    assert!(
        out.contains("got 'typed on the terminal\\n' tty True"),
        "{out}"
    );
    assert!(out.contains("fchmod ") && out.contains("utime "), "{out}");
    let after = meta(&tty);
    assert_eq!(
        (after.0, after.1, after.2),
        (before.0, before.1, before.2),
        "the terminal's mode or owner changed; the command said:\n{out}"
    );
    assert!(
        after.3 >= before.3 && after.4 >= before.4,
        "the terminal's times went back: {before:?} -> {after:?}; the command said:\n{out}"
    );
    let (m0, m1) = modes(&s);
    assert!(!m0.is_empty());
    assert_eq!(m1, m0, "the terminal's modes were not restored");
}

#[test]
fn run_stdin_on_a_terminal_cannot_change_the_terminal_as_root() {
    if !terminal_ready("run_stdin_on_a_terminal_cannot_change_the_terminal_as_root") {
        return;
    }
    terminal_attack(0);
}

#[test]
fn run_stdin_on_a_terminal_cannot_change_the_terminal_as_an_account() {
    if !terminal_ready("run_stdin_on_a_terminal_cannot_change_the_terminal_as_an_account") {
        return;
    }
    terminal_attack(NOBODY);
}

/// A run ended by its deadline, and one ended by a signal to agent-rsh,
/// while it relays from a terminal in raw mode: the modes come back.
#[test]
fn the_terminal_modes_come_back_after_a_deadline_or_a_signal() {
    if !terminal_ready("the_terminal_modes_come_back_after_a_deadline_or_a_signal") {
        return;
    }
    for (how, args, want) in [
        ("deadline", "--timeout 1000 -- python3 attack.py", 124),
        ("signal", "-- python3 attack.py", 128 + libc::SIGTERM),
    ] {
        let s = Setup::new(0);
        let script = pane_script(&s, &run_line(&s, 0, args));
        let pane = Pane::start(&script);
        pane.keys(&["go", "Enter"]);
        wait_out(&s, "ready");
        if how == "signal" {
            let sh: i32 = text(&s.path("pid")).trim().parse().unwrap();
            let children =
                std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
            let agent: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
            // SAFETY: kill(2) on the pane's agent-rsh.
            assert_eq!(unsafe { libc::kill(agent, libc::SIGTERM) }, 0);
        }
        let status = wait_status(&s, &pane);
        assert_eq!(status, want, "{how}: {}", text(&s.path("err")));
        let (m0, m1) = modes(&s);
        assert!(!m0.is_empty());
        assert_eq!(m1, m0, "{how}: the modes were not restored");
    }
}

fn pipe_policy() -> (Setup, Command) {
    // The workspace is the caller's own (root's when the tests run as root).
    // SAFETY: geteuid has no preconditions.
    let s = Setup::new(unsafe { libc::geteuid() });
    let mut c = Command::new(BIN);
    c.env_remove("AGENT_RSH_POLICY")
        .args(["run", "--json", "--stdin", "--policy"])
        .arg(s.policy())
        .arg("--workspace")
        .arg(s.workspace());
    (s, c)
}

/// Runs `c` with `input` written to its stdin from a thread (the run may
/// end before it reads everything); returns the RunResult.
fn with_input(mut c: Command, input: Vec<u8>) -> serde_json::Value {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    crate::common::json(&out.stdout)
}

#[test]
fn piped_stdin_arrives_byte_exact_with_its_end_of_file() {
    if !ready(
        "piped_stdin_arrives_byte_exact_with_its_end_of_file",
        false,
        &["python3"],
    ) {
        return;
    }
    // Some MiB of every byte value, no newline at the end.
    let mut input = Vec::with_capacity(6 << 20);
    let mut x: u32 = 12345;
    while input.len() < (6 << 20) + 7 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        input.push((x >> 16) as u8);
    }
    let want = format!("{} {}", input.len(), zlib_sums(&input));
    let (_s, mut c) = pipe_policy();
    c.args([
        "--argv",
        "--",
        "python3",
        "-c",
        "import sys, zlib; d = sys.stdin.buffer.read(); print(len(d), zlib.crc32(d), zlib.adler32(d)); print(repr(sys.stdin.buffer.read()))",
    ]);
    let r = with_input(c, input);
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["stdout"], format!("{want}\nb''\n"), "{r}");
}

/// `crc32 adler32` as python's zlib computes them.
fn zlib_sums(d: &[u8]) -> String {
    {
        let mut crc: u32 = !0;
        for &b in d {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        let (mut a, mut b) = (1u32, 0u32);
        for &x in d {
            a = (a + x as u32) % 65521;
            b = (b + a) % 65521;
        }
        format!("{} {}", !crc, (b << 16) | a)
    }
}

#[test]
fn piped_stdin_the_command_stops_reading_does_not_hold_the_run() {
    if !ready(
        "piped_stdin_the_command_stops_reading_does_not_hold_the_run",
        false,
        &["python3"],
    ) {
        return;
    }
    // The caller's input goes on (far more than any pipe holds) after the
    // command has read what it wanted and closed its stdin.
    let (_s, mut c) = pipe_policy();
    c.args([
        "--argv",
        "--",
        "python3",
        "-c",
        "import os, sys; print(sys.stdin.buffer.read(5)); os.close(0); print(sys.stdout.flush() or 'closed')",
    ]);
    let r = with_input(c, vec![b'y'; 32 << 20]);
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["stdout"], "b'yyyyy'\nclosed\n", "{r}");
}

#[test]
fn piped_stdin_fd_is_a_pipe_the_caller_file_keeps_its_metadata() {
    if !ready(
        "piped_stdin_fd_is_a_pipe_the_caller_file_keeps_its_metadata",
        false,
        &["python3"],
    ) {
        return;
    }
    // stdin redirected from a file the caller owns: the command gets a
    // pipe, and the file keeps its mode and times.
    let (s, mut c) = pipe_policy();
    let file = s.path("input.txt");
    std::fs::write(&file, "first line\nsecond").unwrap();
    std::fs::set_permissions(&file, PermissionsExt::from_mode(0o600)).unwrap();
    let before = meta(&file);
    c.args(["--", "python3", "attack.py"])
        .stdin(std::fs::File::open(&file).unwrap());
    let out = c.output().unwrap();
    let r = crate::common::json(&out.stdout);
    assert_eq!(r["exitCode"], 0, "{r}");
    let stdout = r["stdout"].as_str().unwrap();
    assert!(stdout.contains("got 'first line\\n' tty False"), "{r}");
    let after = meta(&file);
    assert_eq!(
        (after.0, after.1, after.2),
        (before.0, before.1, before.2),
        "{r}"
    );
    assert_eq!(after.4, before.4, "{r}");
}

#[test]
fn a_job_cannot_change_its_stdin_fifo_or_any_state_file() {
    if !ready(
        "a_job_cannot_change_its_stdin_fifo_or_any_state_file",
        false,
        &["python3"],
    ) {
        return;
    }
    let s = Setup::new(unsafe { libc::geteuid() });
    let state = s.path("state");
    let agent = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.env_remove("AGENT_RSH_POLICY")
            .env("XDG_STATE_HOME", &state)
            .arg(args[0])
            .arg("--policy")
            .arg(s.policy())
            .args(&args[1..]);
        let out = c.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    };
    let since = now_secs();
    let ws = s.workspace();
    let (out, code) = agent(&[
        "spawn",
        "--workspace",
        ws.to_str().unwrap(),
        "--",
        "python3",
        "attack.py",
    ]);
    assert_eq!(code, 0, "{out}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = state.join("agent-rsh/jobs").join(&id);
    let fifo = dir.join("stdin");
    // The command waits for its line: nothing has touched the FIFO yet.
    wait_for("the job to be ready", || {
        agent(&["output", &id]).0.contains("ready")
    });
    let snapshot = |dir: &Path| -> Vec<(String, u32, u32, u32)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let (mode, uid, gid, _, _) = meta(&e.path());
                (e.file_name().to_string_lossy().into_owned(), mode, uid, gid)
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&dir);
    assert_eq!(meta(&fifo).0 & 0o7777, 0o600);
    let (out, code) = agent(&["send", &id, "a line for the job"]);
    assert_eq!(code, 0, "{out}");
    let (out, code) = agent(&["wait", &id]);
    assert_eq!(code, 0, "{out}");
    let (output, _) = agent(&["output", &id]);
    assert!(
        output.contains(r#"got 'a line for the job\\n' tty False"#),
        "{output}"
    );
    assert!(
        output.contains("fchmod ") && output.contains("utime "),
        "{output}"
    );
    assert_eq!(meta(&fifo).0 & 0o7777, 0o600, "{output}");
    let after = snapshot(&dir);
    for b in &before {
        if let Some(a) = after.iter().find(|a| a.0 == b.0) {
            assert_eq!(a, b, "{output}");
        }
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let (_, _, _, atime, mtime) = meta(&p);
        assert!(
            atime >= since && mtime >= since,
            "{p:?}: times {atime} {mtime} set back; {output}"
        );
    }
}
