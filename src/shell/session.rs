//! A login session: lines in, the engine runs them, results out.
//!
//! The same `line` handles `-c`, lines read from standard input and the
//! interactive prompt, so the three faces cannot drift apart: lex, then a
//! built-in (`cd`, `pwd`, `help`, `exit`) or `engine::execute` in the home
//! directory, then the report, the audit record and the refusal counter.

use super::Login;
use crate::admit::{self, CommandInput, Request};
use crate::audit::Record;
use crate::check::{self, Denial};
use crate::engine::{self, RunOptions, TextSink};
use crate::plan::StdinMode;
use crate::result::{RunResult, Status, code};
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What happens after a line.
enum Next {
    Continue,
    Exit(i32),
}

pub struct Session {
    login: Login,
    /// Current directory, relative to the home directory, `..`-free.
    cwd: PathBuf,
    prev_cwd: PathBuf,
    refusals: u32,
    last_status: i32,
    interactive: bool,
    /// Where the current line started, for its audit record.
    line_cwd: PathBuf,
    /// The current line's setup warnings (what this machine and account
    /// cannot enforce: `engine::execute_noting_setup`).
    setup: Vec<String>,
    /// Setup warnings already said in this session, by what they say is
    /// lost (`setup_key`): each is said once, not after every command.
    said: HashSet<String>,
}

impl Session {
    pub fn new(login: Login) -> Session {
        Session {
            login,
            cwd: PathBuf::new(),
            prev_cwd: PathBuf::new(),
            refusals: 0,
            last_status: 0,
            interactive: false,
            line_cwd: PathBuf::new(),
            setup: Vec::new(),
            said: HashSet::new(),
        }
    }

    /// `-c CMD`: one line; the command reads agent-rsh's standard input.
    pub fn run_command(&mut self, command: &str) -> i32 {
        match self.line(command, StdinMode::Inherit) {
            Next::Continue => self.last_status,
            Next::Exit(c) => c,
        }
    }

    /// Lines from a non-terminal standard input; each command reads
    /// `/dev/null` (standard input is the script).
    pub fn script(&mut self) -> i32 {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut buf = Vec::new();
        loop {
            if let Some(c) = self.pending_signal() {
                return c;
            }
            buf.clear();
            match input.read_until(b'\n', &mut buf) {
                Ok(0) => return self.end("end of input", self.last_status),
                Ok(_) => {}
                Err(e) => {
                    say_err!("agent-rsh: cannot read standard input: {e}");
                    return self.end("read error", code::FAILED);
                }
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            let next = match std::str::from_utf8(&buf) {
                Ok(line) => self.line(line, StdinMode::Null),
                Err(e) => {
                    let d = Denial {
                        offset: Some(e.valid_up_to()),
                        ..Denial::new(
                            "lex.encoding",
                            "the line is not valid UTF-8",
                            "commands are UTF-8 text",
                        )
                    };
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    self.finish(RunResult::denied(text, d))
                }
            };
            if let Next::Exit(c) = next {
                return c;
            }
        }
    }

    /// The interactive shell: prompt, line editing, history.
    pub fn interactive(&mut self) -> i32 {
        self.interactive = true;
        ignore_job_control_signals();
        let term = Terminal::save();
        let policy = &self.login.policy;
        let size = policy.shell.history_size;
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .history_ignore_dups(true)
            .and_then(|b| b.max_history_size(size.max(1)))
            .map(|b| b.build());
        let editor = config.and_then(rustyline::DefaultEditor::with_config);
        let mut rl = match editor {
            Ok(e) => e,
            Err(e) => {
                say_err!("agent-rsh: cannot set up line editing: {e}");
                return self.end("terminal error", code::FAILED);
            }
        };
        let mut history = (size > 0).then(|| History::open(&self.login.home, size));
        if let Some(h) = &history {
            for l in &h.loaded {
                let _ = rl.add_history_entry(l.as_str());
            }
        }
        say!(
            "agent-rsh: restricted shell for {}; `help` lists what you may run.",
            self.login.identity.user
        );
        loop {
            if let Some(c) = self.pending_signal() {
                return c;
            }
            let prompt = self.prompt();
            match rl.readline(&prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = rl.add_history_entry(line.as_str());
                        if let Some(h) = &mut history {
                            h.append(&line);
                        }
                    }
                    let next = self.line(&line, StdinMode::Inherit);
                    term.reset();
                    if let Next::Exit(c) = next {
                        return c;
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(rustyline::error::ReadlineError::Eof) => {
                    if let Some(c) = self.pending_signal() {
                        return c;
                    }
                    say!("");
                    return self.end("end of input", 0);
                }
                Err(e) => {
                    if let Some(c) = self.pending_signal() {
                        return c;
                    }
                    say_err!("agent-rsh: cannot read the terminal: {e}");
                    return self.end("terminal error", code::FAILED);
                }
            }
        }
    }

    fn prompt(&self) -> String {
        let cwd = if self.cwd.as_os_str().is_empty() {
            "~".to_string()
        } else {
            format!("~/{}", self.cwd.display())
        };
        format!("{}:{cwd}$ ", self.login.identity.user)
    }

    /// SIGHUP or SIGTERM between commands ends the session; SIGINT there
    /// (a Ctrl-C that arrived after a command ended) is dropped.
    fn pending_signal(&mut self) -> Option<i32> {
        match crate::exec::take_pending_signal() {
            Ok(Some(s)) if s == libc::SIGHUP || s == libc::SIGTERM => {
                Some(self.end(&format!("signal {s}"), 128 + s))
            }
            _ => None,
        }
    }

    /// Logs the end of a session (not for `-c`) and returns `code`.
    fn end(&mut self, reason: &str, code: i32) -> i32 {
        if self.login.origin.face != "login-command"
            && let Some(log) = &self.login.audit
        {
            let mut rec = Record::new("session-end", &self.login.origin);
            rec.detail = Some(reason.to_string());
            rec.refusals = Some(self.refusals);
            rec.exit_code = Some(code);
            if let Err(e) = log.append(&rec) {
                say_err!("agent-rsh: {e}");
            }
        }
        code
    }

    fn abs_cwd(&self) -> PathBuf {
        if self.cwd.as_os_str().is_empty() {
            self.login.home.clone()
        } else {
            self.login.home.join(&self.cwd)
        }
    }

    fn line(&mut self, text: &str, stdin: StdinMode) -> Next {
        self.line_cwd = self.abs_cwd();
        let trimmed = text.trim_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Next::Continue;
        }
        let argv = match admit::split(&self.login.policy, &CommandInput::Line(text.into())) {
            Ok(a) => a,
            // A compound command goes to the engine whole: agent-rsh's
            // interpreter runs it (its `cd` lasts for that line only).
            Err(_) if self.login.policy.syntax == crate::policy::Syntax::Compound => {
                vec![String::new()]
            }
            Err(d) => return self.finish(RunResult::denied(text.into(), d)),
        };
        let builtin = |status: i32| {
            let mut r = RunResult::new(text.into(), argv.clone(), Status::Exited);
            r.exit_code = Some(status);
            r
        };
        match argv[0].as_str() {
            "cd" => match self.cd(&argv[1..]) {
                Ok(status) => self.finish(builtin(status)),
                Err(d) => self.finish(RunResult::denied(text.into(), d)),
            },
            "pwd" => {
                say!("{}", self.abs_cwd().display());
                self.finish(builtin(0))
            }
            "help" => {
                self.help();
                self.finish(builtin(0))
            }
            "exit" | "logout" => {
                let status = match argv.get(1).map(|a| a.parse::<u8>()) {
                    None => self.last_status,
                    Some(Ok(n)) => i32::from(n),
                    Some(Err(_)) => {
                        say_err!("agent-rsh: exit: the status must be a number from 0 to 255");
                        return self.finish(builtin(code::USAGE));
                    }
                };
                let _ = self.finish(builtin(status));
                Next::Exit(self.end("exit", status))
            }
            _ => {
                let req = Request {
                    cwd: self
                        .cwd
                        .to_str()
                        .filter(|s| !s.is_empty())
                        .map(String::from),
                    stdin,
                    ..Request::line(text)
                };
                let opts = RunOptions {
                    capture: false,
                    workspace: Some(self.login.home.clone()),
                    ..RunOptions::default()
                };
                let mut setup = Vec::new();
                let r = engine::execute_noting_setup(
                    &self.login.policy,
                    &req,
                    &opts,
                    &mut TextSink,
                    &mut setup,
                );
                self.setup = setup;
                if is_missing_cwd(&r) {
                    // A command removed the directory the shell was in.
                    self.cwd = PathBuf::new();
                    say_err!(
                        "agent-rsh: the current directory is gone; back in the home directory"
                    );
                }
                let hangup = match (r.status, r.signal) {
                    (Status::Interrupted, Some(s)) if s == libc::SIGHUP || s == libc::SIGTERM => {
                        Some(s)
                    }
                    _ => None,
                };
                match (self.finish(r), hangup) {
                    (Next::Continue, Some(s)) => {
                        Next::Exit(self.end(&format!("signal {s}"), 128 + s))
                    }
                    (next, _) => next,
                }
            }
        }
    }

    /// Reports a line's result, logs it, counts refusals.
    fn finish(&mut self, r: RunResult) -> Next {
        self.last_status = r.exit_code();
        let limit = self.login.policy.shell.warning_limit;
        // A vanished cwd is the session's state, not the user's attempt.
        if r.status == Status::Denied && !is_missing_cwd(&r) {
            self.refusals += 1;
        }
        self.report(&r, limit);
        self.setup.clear();
        if let Some(log) = &self.login.audit {
            let mut rec = Record::command(
                &self.login.origin,
                Some(self.line_cwd.display().to_string()),
                &r,
            );
            if r.status == Status::Denied {
                rec.refusals = Some(self.refusals);
            }
            if let Err(e) = log.append(&rec) {
                say_err!("agent-rsh: {e}; ending the session, which cannot be audited");
                return Next::Exit(code::FAILED);
            }
        }
        if r.status == Status::Denied && limit > 0 && self.refusals >= limit {
            say_err!(
                "agent-rsh: {} refused commands; the session ends (shell.warning_limit = {limit})",
                self.refusals
            );
            return Next::Exit(self.end("warning limit", code::DENIED));
        }
        Next::Continue
    }

    fn report(&mut self, r: &RunResult, limit: u32) {
        let mut err = std::io::stderr().lock();
        for w in &r.warnings {
            if self.setup.contains(w) && !self.said.insert(setup_key(w).to_string()) {
                continue;
            }
            let _ = writeln!(err, "agent-rsh: warning: {w}");
        }
        match r.status {
            Status::Denied | Status::NotFound => {
                let Some(d) = &r.denial else { return };
                let what = if r.status == Status::Denied {
                    "denied"
                } else {
                    "not found"
                };
                let mut line = format!("agent-rsh: {what} ({}): {}", d.rule, d.reason);
                if let Some(at) = d.location() {
                    line.push_str(&format!(" ({at})"));
                }
                let hint = if d.rule == "command.not-allowed" {
                    Some("type `help` for the commands you may run")
                } else {
                    d.hint.as_deref()
                };
                if let Some(h) = hint {
                    line.push_str(&format!("; hint: {h}"));
                }
                if r.status == Status::Denied && limit > 0 && !is_missing_cwd(r) {
                    line.push_str(&format!(" [refusal {} of {limit}]", self.refusals));
                }
                let _ = writeln!(err, "{line}");
            }
            // Ctrl-C at the prompt's own terminal: a new line is enough.
            Status::Interrupted if r.signal == Some(libc::SIGINT) && self.interactive => {
                let _ = writeln!(err);
            }
            _ => {
                if let Some(line) = r.ending_line() {
                    let _ = writeln!(err, "{line}");
                }
            }
        }
    }

    /// `cd [DIR | -]`: within the home directory; symlinks out are refused.
    fn cd(&mut self, args: &[String]) -> Result<i32, Denial> {
        let arg = match args {
            [] => "",
            [a] => a.as_str(),
            _ => {
                say_err!("agent-rsh: cd: one directory at most");
                return Ok(code::USAGE);
            }
        };
        let home = &self.login.home;
        // /tmp is each run's private /tmp (its mount view), which lasts
        // only as long as the line: the session cannot stand in it.
        let tmp = (arg == "/tmp" || arg.starts_with("/tmp/"))
            && self.login.policy.syntax == crate::policy::Syntax::Compound;
        let escape = || {
            Denial::new(
                "cd.escape",
                format!("`{arg}` is outside your home directory {}", home.display()),
                if tmp {
                    "the session stays inside your home directory; /tmp is each command's own, so use it within one line: `cd /tmp && ls`"
                } else {
                    "commands run inside your home directory; `cd` alone returns to it"
                },
            )
        };
        let wanted: PathBuf = if arg == "-" {
            self.prev_cwd.clone()
        } else if let Some(abs) = arg.strip_prefix('/') {
            let abs = Path::new("/").join(abs);
            match abs.strip_prefix(home) {
                Ok(rel) => rel.to_path_buf(),
                Err(_) => return Err(escape()),
            }
        } else {
            self.cwd.join(arg)
        };
        let rel = check::confine_cwd(wanted.to_str()).map_err(|_| escape())?;
        let ws = crate::workspace::Workspace::persistent(home, None).map_err(|e| {
            Denial::new(
                "cd.home",
                format!("the home directory cannot be used: {e}"),
                "ask an administrator",
            )
        })?;
        match ws.resolve_cwd(&rel) {
            Ok(real) => {
                let rel = real.strip_prefix(ws.root()).unwrap_or(&rel).to_path_buf();
                if rel.to_str().is_none() {
                    say_err!("agent-rsh: cd: {arg}: the name is not UTF-8");
                    return Ok(1);
                }
                self.prev_cwd = std::mem::replace(&mut self.cwd, rel);
                Ok(0)
            }
            Err(d) if d.rule == "cwd.escape" => Err(escape()),
            Err(_) => {
                say_err!("agent-rsh: cd: {arg}: no such directory");
                Ok(1)
            }
        }
    }

    fn help(&self) {
        let p = &self.login.policy;
        let mut allowed: Vec<&str> = p.commands.allow.iter().map(String::as_str).collect();
        allowed.sort_unstable();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Commands you may run:");
        for chunk in allowed.chunks(8) {
            let _ = writeln!(out, "  {}", chunk.join("  "));
        }
        if allowed.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        let _ = writeln!(
            out,
            "Built-ins: cd [DIR | -] (inside your home), pwd, help, exit [N]; Ctrl-D leaves."
        );
        let syntax = if p.syntax == crate::policy::Syntax::Compound {
            "A line is read as bash reads it: pipes, `;`, `&&`, `||`, redirections inside your home,\n\
             here-documents, variables and globs work, and every command in it is checked.\n\
             A `cd` in a longer line lasts for that line; `cd DIR` alone is the session's."
        } else {
            "One command per line, run directly without a shell: no pipes, redirections, `;`, `&&`,\n\
             `$`, globs or `~`. Quote arguments with '...' or \"...\" as in sh; quoted characters are text."
        };
        let _ = writeln!(
            out,
            "{syntax}\nCtrl-C stops the running command. Each command may run for at most {} s.",
            p.limits.timeout_ms.div_ceil(1000)
        );
    }
}

/// What a setup warning says is lost, without why: the text before its
/// first `: ` ("limits.memory_bytes (N bytes) is not enforced"). The why
/// may name something of this run only (its cgroup's directory).
fn setup_key(w: &str) -> &str {
    w.split_once(": ").map_or(w, |(what, _)| what)
}

fn is_missing_cwd(r: &RunResult) -> bool {
    r.status == Status::Denied && r.denial.as_ref().is_some_and(|d| d.rule == "cwd.missing")
}

/// The shell must survive Ctrl-\ and Ctrl-Z: the command (which gets the
/// default dispositions back before exec) is the one they are meant for.
fn ignore_job_control_signals() {
    for sig in [libc::SIGQUIT, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
        // SAFETY: setting a disposition to SIG_IGN has no memory effects.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
}

/// The terminal's settings, restored after every command (a program killed
/// in raw mode must not leave the prompt unusable) and at exit. While the
/// shell runs, the suspend character is off: there is no job control, and
/// a stopped command would hang until its deadline.
struct Terminal {
    original: Option<nix::sys::termios::Termios>,
    shell: Option<nix::sys::termios::Termios>,
}

impl Terminal {
    fn save() -> Terminal {
        use nix::sys::termios::{SetArg, SpecialCharacterIndices, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let original = tcgetattr(&stdin).ok();
        let shell = original.clone().map(|mut t| {
            t.control_chars[SpecialCharacterIndices::VSUSP as usize] = 0;
            t
        });
        if let Some(t) = &shell {
            let _ = tcsetattr(&stdin, SetArg::TCSADRAIN, t);
        }
        Terminal { original, shell }
    }

    fn reset(&self) {
        if let Some(t) = &self.shell {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSADRAIN,
                t,
            );
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(t) = &self.original {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSADRAIN,
                t,
            );
        }
    }
}

/// `~/.agent-rsh_history`, opened once without following symlinks: the
/// home is writable by the user's commands, and agent-rsh itself is not
/// confined, so a planted symlink must not make it write elsewhere.
struct History {
    file: Option<File>,
    loaded: Vec<String>,
}

const HISTORY_FILE: &str = ".agent-rsh_history";

impl History {
    fn open(home: &Path, size: usize) -> History {
        let path = home.join(HISTORY_FILE);
        let mut h = History {
            file: open_history(&path),
            loaded: Vec::new(),
        };
        let Some(f) = &mut h.file else { return h };
        let mut text = Vec::new();
        if f.take(16 << 20).read_to_end(&mut text).is_err() {
            return h;
        }
        let lines: Vec<String> = String::from_utf8_lossy(&text)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect();
        let keep = lines.len().saturating_sub(size);
        h.loaded = lines[keep..].to_vec();
        if lines.len() > 2 * size {
            // Rewrite with the kept lines: a new file renamed over the name
            // (rename replaces a symlink itself, never its target).
            let rewritten = tempfile::NamedTempFile::new_in(home).and_then(|mut t| {
                for l in &h.loaded {
                    writeln!(t, "{l}")?;
                }
                t.persist(&path).map_err(|e| e.error)
            });
            if rewritten.is_ok() {
                h.file = open_history(&path);
            }
        }
        h
    }

    fn append(&mut self, line: &str) {
        if let Some(mut f) = self.file.as_ref() {
            // One write(2) (O_APPEND): a line from another session is never
            // interleaved with it.
            let _ = f.write(format!("{line}\n").as_bytes());
        }
    }
}

fn open_history(path: &Path) -> Option<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    (meta.is_file() && meta.uid() == me).then_some(f)
}
