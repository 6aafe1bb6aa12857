//! A terminal for a test: a tmux server of its own running one window,
//! killed on drop. Its socket lives in a directory of its own, removed
//! with it.

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    dir: tempfile::TempDir,
}

impl Tmux {
    /// Runs `line` (a `sh -c` command line) in a fresh `cols`x`lines`
    /// terminal. The window closes when `line` ends, so a test that reads
    /// the screen after it ends keeps it open (`; sleep 60`).
    pub fn start(line: &str, cols: u32, lines: u32) -> Tmux {
        let t = Tmux {
            dir: tempfile::tempdir().unwrap(),
        };
        let st = t
            .cmd()
            .args(["new-session", "-d", "-s", "t", "-x"])
            .arg(cols.to_string())
            .arg("-y")
            .arg(lines.to_string())
            .arg(line)
            .status()
            .unwrap();
        assert!(st.success(), "tmux new-session failed");
        t
    }

    /// tmux, talking to this server.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(self.dir.path().join("socket"));
        c.args(["-f", "/dev/null"]);
        c
    }

    /// The screen and up to 200 lines of history, wrapped lines joined.
    pub fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `keys` (tmux key names: `Enter`, `C-d`, or text).
    pub fn keys(&self, keys: &[&str]) {
        let st = self
            .cmd()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Waits until `pred` holds for the screen; panics with the screen.
    pub fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + super::PATIENCE;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// `s` quoted for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
