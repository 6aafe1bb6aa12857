//! The interpreter: runs a checked script inside the confined process.
//!
//! agent-rsh's command child execs agent-rsh's own binary as
//! `agent-rsh __script FD` under the run's Landlock rule set, seccomp
//! filter and rlimits; FD is a memfd holding the `Job` (the script, the
//! policy, the workspace, what the static check resolved). So every
//! redirection is opened, every glob listed and every stage exec'd by a
//! confined process. Each stage is forked and exec'd directly (no shell);
//! a command whose words come from expansions is checked after expansion,
//! right before exec, and a refusal stops the script with exit 126.
//!
//! Reports go back to agent-rsh by appending JSON lines to the same memfd:
//! `{"s":pid,"a":argv,"o":offset}` when a program starts,
//! `{"e":pid,"x":wait_status,"d":ms}` when it ends, `{"b":argv,"o":offset,
//! "c":status}` for a builtin, `{"denial":...}` for a refusal, `{"w":...}`
//! for a warning.
//!
//! The interpreter is single-threaded, so forking and continuing in Rust
//! (subshells, pipeline stages, command substitutions) is safe.

#[path = "background.rs"]
mod background;
#[path = "builtins.rs"]
mod builtins;
#[path = "procsub.rs"]
mod procsub;

use super::ShellError;
use super::ast::*;
use super::expand::{self, ExpandError, Shell, Tilde};
use super::options::{self, Options};
use super::scripts::{self, Shebang};
use super::verify::{self, Resolved};
use super::{feed, glob};
use crate::check::{self, Denial, DenialKind, judge};
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

/// What agent-rsh hands the interpreter.
#[derive(Debug, Serialize, Deserialize)]
pub struct Job {
    /// The script text; parsed again here (parsing is deterministic).
    pub script: String,
    pub max_bytes: usize,
    pub policy: Policy,
    /// The workspace's absolute, canonical path.
    pub workspace: PathBuf,
    /// What the static check resolved, by simple-command id.
    pub resolved: Vec<Option<Resolved>>,
}

/// The memfd layout: `MAGIC`, the job's length (u32 LE), the job (JSON),
/// then the interpreter's report lines.
pub const MAGIC: &[u8; 4] = b"ARS1";

/// Status of bash's fatal expansion errors at the top level of `bash -c`
/// (in a subshell they end the subshell with 1).
const FATAL_TOP: i32 = 127;

/// At most this many report lines per process (a loop must not fill
/// memory with reports).
const MAX_REPORTS: usize = 20_000;

/// How one pass of a loop's body ended (`Interp::loop_pass`).
enum Pass {
    Next(i32),
    Done(i32),
}

enum Unwind {
    Exit(i32),
    Break(u32),
    Continue(u32),
    /// Refused; the denial is recorded.
    Denied,
    /// A fatal expansion error; the message is printed.
    Fatal,
    /// An arithmetic error in `$(( ))`: the message is printed; bash
    /// abandons the top-level command and goes on with the next line.
    Abort,
    /// Refused inside a script file: the refusal is recorded and the
    /// command fails with 126, as bash fails a command it cannot run.
    Refused,
    /// `return` from a sourced file.
    Return(i32),
    /// A builtin failed deep inside (an assignment to a read-only name):
    /// the message is printed; the builtin's status.
    Failed(i32),
}

/// A script file (or `sh -c` string) the interpreter is running: its
/// name and text for `file:line` in refusals, and its own here-documents.
struct Frame {
    name: String,
    text: Rc<str>,
    script: Script,
    /// How the shell's messages name where they come from (bash's
    /// `NAME: line N: `): the file, `$0` of `-c`, or for `eval` and a
    /// trap the place they run from, whose line `base` adds to theirs.
    said_as: Rc<str>,
    base: usize,
}

/// Where the command running now was read: a shell that is not
/// interactive starts its messages with `NAME: line N: `, as bash does.
/// A free function prints the messages (`say`), so the place is the
/// process's, set as the interpreter enters and leaves a text.
struct Place {
    name: Rc<str>,
    text: Rc<str>,
    base: usize,
}

thread_local! {
    static PLACE: std::cell::RefCell<Option<Place>> = const { std::cell::RefCell::new(None) };
    /// The byte offset, in the place's text, of the command running now.
    static AT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The current place's name and line.
fn here() -> Option<(Rc<str>, usize)> {
    PLACE.with(|p| {
        let p = p.borrow();
        let p = p.as_ref()?;
        Some((
            p.name.clone(),
            p.base + scripts::line_of(&p.text, Some(AT.with(|a| a.get()))),
        ))
    })
}

/// What a command that runs a script asks for.
enum Call {
    /// A new shell (`./x.sh`, `sh x.sh`, `bash -c ...`): text None reads
    /// the script from standard input.
    Shell {
        name: String,
        text: Option<String>,
        positional: Vec<String>,
        set: Vec<String>,
        /// The text is a script file's (not `-c`'s).
        file: bool,
    },
    /// `source FILE ARGS` / `. FILE ARGS`: in the current shell.
    Source {
        name: String,
        text: String,
        args: Vec<String>,
    },
    /// `eval ARGS`: the arguments joined by spaces, parsed and run in the
    /// current shell, every command checked as it runs (a `return` in it
    /// returns from the function that called eval, as in bash).
    Eval { text: String },
    /// A script with another interpreter's shebang: that interpreter
    /// running the file (`exec`: the interpreter's path as written, so a
    /// virtualenv's `python` finds its environment).
    Program {
        argv: Vec<String>,
        offsets: Vec<usize>,
        exec: Option<PathBuf>,
        /// The script file itself: what `network.commands` judges (a
        /// venv's `pip` is pip, not the python that runs it).
        script: Option<PathBuf>,
    },
    /// Done already (bash's error for a file it cannot run): the status.
    Status(i32),
}

type R<T> = Result<T, Unwind>;

#[derive(Debug, Clone, Default)]
struct Var {
    value: Option<String>,
    exported: bool,
    /// An array's elements (`value` is then unused): `$NAME` is element 0.
    array: Option<Array>,
}

/// The elements of an indexed array (sparse) or an associative one.
#[derive(Debug, Clone)]
enum Array {
    Indexed(std::collections::BTreeMap<i64, String>),
    Assoc(std::collections::BTreeMap<String, String>),
}

impl Var {
    fn scalar(&self) -> Option<String> {
        match &self.array {
            Some(Array::Indexed(m)) => m.get(&0).cloned(),
            Some(Array::Assoc(m)) => m.get("0").cloned(),
            None => self.value.clone(),
        }
    }
}

struct Interp<'s> {
    script: &'s Script,
    policy: Policy,
    workspace: PathBuf,
    /// `/tmp` is the run's own (its mount view made it): a redirection
    /// and `cd` may reach it.
    private_tmp: bool,
    resolved: Vec<Option<Resolved>>,
    vars: HashMap<String, Var>,
    cwd: PathBuf,
    opts: Options,
    status: i32,
    /// Status of the last command substitution of the current command.
    subst_status: Option<i32>,
    errexit_ignored: u32,
    loop_depth: u32,
    /// A forked copy of the shell (subshell, pipeline stage, substitution).
    child: bool,
    /// A subshell of this shell's (forked, not a new shell running a
    /// script): an arithmetic error ends it rather than its line.
    subshell: bool,
    /// A shell running a script file (not a `-c` string): a fatal
    /// expansion error ends it with 1, as bash's does, not 127.
    script_file: bool,
    top_pid: u32,
    report_fd: RawFd,
    reports: usize,
    /// Shared between all the interpreter's processes: set when a refusal
    /// stops the script.
    denied_flag: *mut u8,
    fs: glob::Fs,
    cache: HashMap<String, Result<PathBuf, Denial>>,
    /// A `|&` stage: stderr joins stdout after the command's own
    /// redirections (bash applies the implicit 2>&1 last).
    stderr_to_pipe: bool,
    /// The files the pipe into this process carries (`cat .env | nc`),
    /// as far as the words say (`feed`): judged with each command that
    /// reads it.
    piped: Vec<String>,
    /// When the process that runs the current command was forked (the
    /// order of the `commands` report).
    forked_at: u64,
    /// The script file being run, if any (None: the command string).
    frame: Option<Rc<Frame>>,
    /// `$0`, then `$1`...
    positional: Vec<String>,
    /// `getopts`: the OPTIND it last set and the next option letter's
    /// index in that argument (bash keeps the same hidden state).
    getopts_at: (usize, usize),
    /// `alias NAME=TEXT`: kept and printed, never expanded, as in a bash
    /// that is not interactive (`expand_aliases` is off and `shopt`
    /// cannot turn it on).
    pub(super) aliases: std::collections::BTreeMap<String, String>,
    /// Nesting of `source`: where `return` is allowed.
    sourcing: u32,
    /// `set -- ARGS` ran: a file sourced with arguments then leaves the
    /// positional parameters it set, as in bash (`shift` does not count).
    args_set: bool,
    /// The functions defined so far, with the script file each was read
    /// from (None: the command string, whose ids the static check knows).
    functions: HashMap<String, Rc<Function>>,
    /// One entry per function call running: the variables `local` saved.
    locals: Vec<Vec<(String, Option<Var>)>>,
    /// The background jobs this shell started (`wait`, `%N`).
    jobs: Vec<background::BgJob>,
    /// `$!`: the pid of the last background job.
    last_bg: Option<i32>,
    /// Inside a background job: a refusal fails its command with 126 and
    /// is listed, instead of stopping the script (which goes on beside it).
    background: bool,
    /// The command string, for the line of such a refusal.
    source: Rc<str>,
    traps: background::Traps,
    /// `declare NAME=(...)` words of the command being run: the argv
    /// index of NAME, the elements, and whether they are appended.
    decl_arrays: Vec<(usize, ArrayItems, bool)>,
    /// How deep in command substitutions this process is (`set -x`).
    subst_depth: u32,
    /// `pushd`/`popd`: the directories under the current one.
    dir_stack: Vec<PathBuf>,
    /// Running a trap's commands (no ERR trap, no signal trap inside),
    /// and `$?` when it started (`exit` alone there ends with it).
    in_trap: bool,
    trap_status: i32,
    /// `exec CMD` ended the shell: no EXIT trap (the shell was replaced).
    exec_exit: bool,
    /// The shell's ends of the process substitutions of the commands
    /// running (`/dev/fd/N`), innermost last (procsub.rs).
    procsub_fds: Vec<RawFd>,
    /// Under `set -e`, an expansion met what ends a shell whatever the
    /// context: a bad array subscript (`warn`), an assignment to a
    /// read-only name.
    exit_now: bool,
    /// `readonly NAME`: no assignment, `unset`, `local` or `declare`
    /// changes NAME again in this shell.
    readonly: std::collections::BTreeSet<String>,
    /// The sourced file running was sourced where `set -e` is ignored
    /// (`. f || ...`, `if . f`): an assignment to a read-only name inside
    /// it abandons its line and does not end the shell (bash's rule; a
    /// function called so still ends it).
    ignored_by_caller: bool,
}

/// A defined function: its body and where it was read.
struct Function {
    body: Command,
    frame: Option<Rc<Frame>>,
}

/// What a new shell starts with.
struct NewShell {
    name: String,
    text: Option<String>,
    positional: Vec<String>,
    set: Vec<String>,
    file: bool,
    /// Prefix assignments: exported to the new shell.
    assigns: Vec<(String, String)>,
}

/// The user and system CPU seconds of this process and its waited-for
/// children.
fn cpu_times() -> (f64, f64) {
    let mut total = (0.0, 0.0);
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills a zeroed struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to the struct.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            total.0 += secs(ru.ru_utime);
            total.1 += secs(ru.ru_stime);
        }
    }
    total
}

/// A word as `set -x` shows it: single-quoted when it holds a character
/// the shell would read specially (as bash quotes it).
fn xtrace_quote(w: &str) -> String {
    let special = w.is_empty()
        || w.starts_with(['~', '#'])
        || w.chars()
            .any(|c| c.is_whitespace() || "'\"\\|&;()<>!{}*[]?^$`".contains(c) || c.is_control());
    if !special {
        return w.to_string();
    }
    format!("'{}'", w.replace('\'', "'\\''"))
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a stack value.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes all of `data` to `fd`; a closed reader ends it silently (as a
/// shell's builtins and messages to a closed pipe do).
fn write_fd(fd: RawFd, data: &[u8]) {
    // SAFETY: the interpreter's fds (0, 1, 2 and those it opened) stay
    // open while it writes to them.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = crate::sys::write_all(fd, data);
}

/// A shell message, after bash's `NAME: line N: ` (`agent-rsh: ` outside
/// a text).
fn say(msg: &str) {
    match here() {
        Some((name, line)) => write_fd(2, format!("{name}: line {line}: {msg}\n").as_bytes()),
        None => say_plain(msg),
    }
}

/// agent-rsh's own message, not a shell's: `agent-rsh: ` and no line.
fn say_plain(msg: &str) {
    write_fd(2, format!("agent-rsh: {msg}\n").as_bytes());
}

fn errno_text(e: i32) -> String {
    let s = std::io::Error::from_raw_os_error(e).to_string();
    // "No such file or directory (os error 2)" → bash's wording.
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn wait_pid(pid: i32) -> i32 {
    let mut st = 0;
    loop {
        // SAFETY: waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid {
            return st;
        }
        if r < 0 && last_errno() != libc::EINTR {
            return 0;
        }
    }
}

fn status_of(st: i32) -> i32 {
    if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else if libc::WIFSIGNALED(st) {
        128 + libc::WTERMSIG(st)
    } else {
        1
    }
}

/// A close-on-exec pipe as raw fds (the interpreter closes and moves its
/// fds by hand), or the errno.
fn pipe() -> Result<(RawFd, RawFd), i32> {
    let (r, w) = crate::sys::pipe().map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    Ok((r.into_raw_fd(), w.into_raw_fd()))
}

fn close(fd: RawFd) {
    // SAFETY: closing an fd we own.
    unsafe { libc::close(fd) };
}

fn dup2(from: RawFd, to: RawFd) -> bool {
    // SAFETY: dup2 has no memory effects.
    from == to || unsafe { libc::dup2(from, to) } >= 0
}

fn cstr(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// Entry point of `agent-rsh __script FD`; returns the exit status.
pub fn main(args: &[std::ffi::OsString]) -> i32 {
    let Some(fd) = args
        .get(2)
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse::<RawFd>().ok())
    else {
        say("__script is internal to agent-rsh and needs the job's fd");
        return 125;
    };
    // SAFETY: signal(2) in a single-threaded process: the stages must
    // start with SIGPIPE at its default (Rust ignores it).
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // Move the job's fd out of the way of redirections (fds 0-9) and keep
    // it from the programs the script runs.
    // SAFETY: fcntl/close on the fd handed to us.
    let report_fd = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 100) };
    if report_fd < 0 {
        say("cannot take over the job's fd");
        return 125;
    }
    close(fd);
    let job = match read_job(report_fd) {
        Ok(j) => j,
        Err(e) => {
            say(&format!("cannot read the script job: {e}"));
            return 125;
        }
    };
    // SAFETY: as above; O_APPEND so that every process's lines append.
    unsafe {
        let fl = libc::fcntl(report_fd, libc::F_GETFL);
        libc::fcntl(report_fd, libc::F_SETFL, fl | libc::O_APPEND);
    }
    let script = match super::parse(&job.script, job.max_bytes) {
        Ok(s) => s,
        Err(e) => {
            say(&format!("the script no longer parses: {e}"));
            return 125;
        }
    };
    let Some(mut it) = Interp::new(&script, job.policy, job.workspace, job.resolved, report_fd)
    else {
        return 125;
    };
    it.source = Rc::from(job.script.as_str());
    it.enter(None);
    let r = it.exec_lines(&script.body, &job.script);
    let code = it.finish(r);
    it.wait_writers();
    code
}

/// agent-rsh started as `sh`, `bash` or `dash`: inside a run's mount view
/// (where those are agent-rsh), the nested shell of a program the run
/// started (make's recipes, npm scripts, git aliases, `os.system`). It
/// runs its script on this interpreter under the run's policy, read from
/// the view's read-only root, every command checked as it runs; a refused
/// command fails with 126 and the script goes on, as bash goes on after a
/// command it cannot run. None: not in a run's view (no job there).
pub fn nested_main(args: &[std::ffi::OsString]) -> Option<i32> {
    let name = args.first()?.to_str()?;
    if !crate::policy::shell::is_shell(name) {
        return None;
    }
    let raw = std::fs::read(crate::script::SHELL_JOB).ok()?;
    // SAFETY: as in `main`.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let job: crate::script::ShellJob = match serde_json::from_slice(&raw) {
        Ok(j) => j,
        Err(e) => {
            say(&format!("cannot read the run's shell job: {e}"));
            return Some(125);
        }
    };
    let words: Vec<String> = args[1..]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut argv = vec![name.to_string()];
    argv.extend(words);
    let empty = Script {
        body: Vec::new(),
        heredocs: Vec::new(),
        simple_commands: 0,
    };
    let mut it = Interp::new(&empty, job.policy, job.workspace, Vec::new(), -1)?;
    it.child = true;
    let shell = match it.script_call_shell(&argv) {
        Call::Shell {
            name,
            text,
            positional,
            set,
            file,
        } => NewShell {
            name,
            text,
            positional,
            set,
            file,
            assigns: Vec::new(),
        },
        Call::Status(st) => return Some(st),
        _ => return Some(125),
    };
    let r = it.start_shell(shell);
    let code = it.finish(r);
    it.wait_writers();
    Some(code)
}

impl<'s> Interp<'s> {
    /// A shell at its start: the environment's variables, the process's
    /// directory, default options.
    fn new(
        script: &'s Script,
        policy: Policy,
        workspace: PathBuf,
        resolved: Vec<Option<Resolved>>,
        report_fd: RawFd,
    ) -> Option<Interp<'s>> {
        // SAFETY: an anonymous shared page for the refusal flag.
        let flag = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if flag == libc::MAP_FAILED {
            say("cannot map the shared flag page");
            return None;
        }
        let cwd = std::env::current_dir().unwrap_or_else(|_| workspace.clone());
        let mut vars: HashMap<String, Var> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .map(|(k, v)| {
                (
                    k,
                    Var {
                        value: Some(v),
                        exported: true,
                        array: None,
                    },
                )
            })
            .collect();
        vars.insert(
            "PWD".into(),
            Var {
                value: Some(cwd.display().to_string()),
                exported: true,
                array: None,
            },
        );
        vars.remove("OLDPWD");
        // bash sets IFS and OPTIND itself, whatever the environment holds.
        for (k, v) in [("IFS", " \t\n"), ("OPTIND", "1")] {
            vars.insert(
                k.into(),
                Var {
                    value: Some(v.into()),
                    exported: false,
                    array: None,
                },
            );
        }
        Some(Interp {
            script,
            fs: glob::Fs {
                cwd: cwd.display().to_string(),
                globstar: false,
            },
            private_tmp: policy.private_tmp() && Path::new(super::PRIVATE_TMP).exists(),
            policy,
            workspace,
            resolved,
            vars,
            cwd,
            opts: Options::default(),
            status: 0,
            subst_status: None,
            errexit_ignored: 0,
            loop_depth: 0,
            child: false,
            subshell: false,
            script_file: false,
            top_pid: std::process::id(),
            report_fd,
            reports: 0,
            denied_flag: flag.cast(),
            cache: HashMap::new(),
            stderr_to_pipe: false,
            piped: Vec::new(),
            forked_at: 0,
            frame: None,
            positional: vec!["agent-rsh".into()],
            getopts_at: (0, 1),
            aliases: std::collections::BTreeMap::new(),
            sourcing: 0,
            args_set: false,
            functions: HashMap::new(),
            locals: Vec::new(),
            jobs: Vec::new(),
            last_bg: None,
            background: false,
            source: Rc::from(""),
            traps: background::Traps::default(),
            in_trap: false,
            trap_status: 0,
            exec_exit: false,
            decl_arrays: Vec::new(),
            subst_depth: 0,
            dir_stack: Vec::new(),
            procsub_fds: Vec::new(),
            exit_now: false,
            readonly: std::collections::BTreeSet::new(),
            ignored_by_caller: false,
        })
    }
}

/// The job the run hands over in a sealed file (`MAGIC`, length, JSON).
fn read_job(fd: RawFd) -> std::io::Result<Job> {
    let mut head = [0u8; 8];
    // SAFETY: pread into a stack buffer.
    if unsafe { libc::pread(fd, head.as_mut_ptr().cast(), 8, 0) } != 8 || &head[..4] != MAGIC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a job",
        ));
    }
    let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        // SAFETY: pread into our buffer.
        let n = unsafe {
            libc::pread(
                fd,
                buf[got..].as_mut_ptr().cast(),
                len - got,
                (8 + got) as libc::off_t,
            )
        };
        if n <= 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got += n as usize;
    }
    Ok(serde_json::from_slice(&buf)?)
}

impl Interp<'_> {
    // ---- reports ----

    fn report(&mut self, v: serde_json::Value) {
        if self.reports >= MAX_REPORTS {
            return;
        }
        self.reports += 1;
        let mut line = v.to_string();
        line.push('\n');
        // One write per line: O_APPEND keeps lines from several
        // processes whole.
        // SAFETY: write from a live buffer.
        unsafe { libc::write(self.report_fd, line.as_ptr().cast(), line.len()) };
    }

    fn denied(&self) -> bool {
        // SAFETY: the flag page is mapped for the whole process life.
        unsafe { std::ptr::read_volatile(self.denied_flag) != 0 }
    }

    /// Records a refusal and stops the script; inside a script file,
    /// fails the command instead (`Unwind::Refused`), naming file and line.
    fn deny(&mut self, d: Denial) -> Unwind {
        if let Some(f) = self.frame.clone() {
            self.refuse_in(&f.name, &f.text, &d);
            return Unwind::Refused;
        }
        if self.background {
            let text = self.source.clone();
            let name = "<command>".to_string();
            self.refuse_in(&name, &text, &d);
            return Unwind::Refused;
        }
        // Only the first refusal is reported.
        if !self.denied() {
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(self.denied_flag, 1) };
            self.report(serde_json::json!({ "denial": d }));
        }
        Unwind::Denied
    }

    /// `env.dangerous` at run time.
    fn screen(&mut self, name: &str, offset: usize) -> R<()> {
        verify::screen_name(&self.policy, name, offset).map_err(|d| self.deny(d))
    }

    /// Prints and reports a refusal inside a script file.
    fn refuse_in(&mut self, name: &str, text: &str, d: &Denial) {
        let line = scripts::line_of(text, d.offset);
        let mut msg = format!("{name}:{line}: {}: {}", d.rule, d.reason);
        if let Some(h) = &d.hint {
            msg.push_str("; ");
            msg.push_str(h);
        }
        say_plain(&msg);
        self.report(serde_json::json!({ "r": d, "f": name, "l": line }));
    }

    /// After waiting for a child: stop if it was refused.
    fn check_denied(&self) -> R<()> {
        if self.denied() {
            Err(Unwind::Denied)
        } else {
            Ok(())
        }
    }

    /// The status the shell ends with, after its EXIT trap (none when a
    /// refusal stopped the script or `exec` replaced the shell).
    fn finish(&mut self, r: R<i32>) -> i32 {
        let stopped = matches!(r, Err(Unwind::Denied)) || std::mem::take(&mut self.exec_exit);
        let code = self.code_of(r);
        if stopped {
            return code;
        }
        self.run_exit_trap(code)
    }

    fn code_of(&mut self, r: R<i32>) -> i32 {
        match r {
            Ok(s) => s,
            Err(Unwind::Exit(c)) => c,
            Err(Unwind::Break(_) | Unwind::Continue(_)) => self.status,
            Err(Unwind::Denied | Unwind::Refused) => 126,
            Err(Unwind::Abort) => 1,
            Err(Unwind::Return(c) | Unwind::Failed(c)) => c,
            Err(Unwind::Fatal) => {
                if self.subshell || self.script_file {
                    1
                } else {
                    FATAL_TOP
                }
            }
        }
    }

    /// Ends a forked copy of the shell.
    fn child_exit(&mut self, r: R<i32>) -> ! {
        let code = self.finish(r);
        self.wait_writers();
        // SAFETY: _exit without running the parent's destructors.
        unsafe { libc::_exit(code & 0xff) }
    }

    fn fork(&mut self) -> R<i32> {
        self.forked_at = now_ns();
        // The trapped signals wait until the child has its own handlers
        // (none): one that arrives in between is not lost to either.
        let old = background::block_trapped();
        // SAFETY: the interpreter is single-threaded.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            self.child = true;
            self.subshell = true;
            self.reports = self.reports.min(MAX_REPORTS);
            self.forked();
        }
        background::restore_mask(&old);
        if pid < 0 {
            say(&format!("fork: {}", errno_text(last_errno())));
            return Err(Unwind::Fatal);
        }
        Ok(pid)
    }

    // ---- lists ----

    /// One pass of a loop's body. `break` and `continue` of this loop
    /// end here (`Done` ends the loop; `Next` goes on, the status being
    /// the last command's); those of an outer loop go up one level.
    fn loop_pass(&mut self, body: &List) -> R<Pass> {
        match self.exec_list(body) {
            Ok(s) => Ok(Pass::Next(s)),
            Err(Unwind::Break(n)) if n > 1 => Err(Unwind::Break(n - 1)),
            Err(Unwind::Break(_)) => Ok(Pass::Done(self.status)),
            Err(Unwind::Continue(n)) if n > 1 => Err(Unwind::Continue(n - 1)),
            Err(Unwind::Continue(_)) => Ok(Pass::Next(self.status)),
            Err(e) => Err(e),
        }
    }

    fn exec_list(&mut self, l: &List) -> R<i32> {
        for ao in l {
            self.status = self.exec_and_or(ao)?;
            self.run_pending_traps()?;
        }
        Ok(self.status)
    }

    fn exec_and_or(&mut self, ao: &AndOr) -> R<i32> {
        if ao.background {
            return self.exec_background(ao);
        }
        self.exec_and_or_now(ao)
    }

    fn exec_and_or_now(&mut self, ao: &AndOr) -> R<i32> {
        let n = ao.rest.len();
        let mut st = self.exec_pipeline_checked(&ao.first, n > 0)?;
        for (i, (c, p)) in ao.rest.iter().enumerate() {
            let run = match c {
                Connector::And => st == 0,
                Connector::Or => st != 0,
            };
            if run {
                st = self.exec_pipeline_checked(p, i + 1 < n)?;
            }
        }
        Ok(st)
    }

    fn exec_pipeline_checked(&mut self, p: &Pipeline, not_last: bool) -> R<i32> {
        let ignore = not_last || p.negated;
        if ignore {
            self.errexit_ignored += 1;
        }
        let r = self.exec_pipeline(p);
        if ignore {
            self.errexit_ignored -= 1;
        }
        let st = r?;
        self.status = st;
        let triggers = p.stages.len() > 1
            || matches!(
                p.stages[0].command,
                Command::Simple(_) | Command::Subshell { .. }
            );
        if st != 0 && self.errexit_ignored == 0 && !ignore && triggers {
            self.run_err_trap()?;
            if self.opts.errexit {
                return Err(Unwind::Exit(st));
            }
        }
        Ok(st)
    }

    fn exec_pipeline(&mut self, p: &Pipeline) -> R<i32> {
        let Some(posix) = p.timed else {
            return self.exec_pipeline_now(p);
        };
        let started = Instant::now();
        let before = cpu_times();
        let r = self.exec_pipeline_now(p);
        let after = cpu_times();
        let real = started.elapsed().as_secs_f64();
        let (user, sys) = (after.0 - before.0, after.1 - before.1);
        let text = if posix {
            format!("real {real:.2}\nuser {user:.2}\nsys {sys:.2}\n")
        } else {
            let f = |t: f64| {
                let t = t.max(0.0);
                let m = (t / 60.0).floor();
                format!("{}m{:.3}s", m as u64, t - m * 60.0)
            };
            format!("\nreal\t{}\nuser\t{}\nsys\t{}\n", f(real), f(user), f(sys))
        };
        write_fd(2, text.as_bytes());
        r
    }

    fn exec_pipeline_now(&mut self, p: &Pipeline) -> R<i32> {
        let st = if p.stages.len() == 1 {
            match self.exec_command(&p.stages[0].command, false) {
                Err(Unwind::Refused) => 126,
                r => r?,
            }
        } else {
            self.exec_stages(&p.stages)?
        };
        Ok(if p.negated { i32::from(st == 0) } else { st })
    }

    fn exec_stages(&mut self, stages: &[Stage]) -> R<i32> {
        let n = stages.len();
        let mut prev_read: Option<RawFd> = None;
        let mut pids = Vec::with_capacity(n);
        // The first stage reads what this process reads.
        let mut input = self.piped.clone();
        for (i, st) in stages.iter().enumerate() {
            let out = if i + 1 < n {
                match pipe() {
                    Ok(p) => Some(p),
                    Err(e) => {
                        say(&format!("pipe: {}", errno_text(e)));
                        if let Some(r) = prev_read {
                            close(r);
                        }
                        return Err(Unwind::Fatal);
                    }
                }
            } else {
                None
            };
            let started = Instant::now();
            let pid = self.fork()?;
            if pid == 0 {
                self.piped = input;
                if let Some(r) = prev_read {
                    dup2(r, 0);
                    close(r);
                }
                if let Some((r, w)) = out {
                    close(r);
                    dup2(w, 1);
                    close(w);
                    self.stderr_to_pipe = st.stderr_too;
                }
                let r = self.exec_command(&st.command, true);
                self.child_exit(r);
            }
            pids.push((pid, started));
            input = feed::carried(&st.command, &input);
            if let Some(r) = prev_read.take() {
                close(r);
            }
            if let Some((r, w)) = out {
                close(w);
                prev_read = Some(r);
            }
        }
        if let Some(r) = prev_read {
            close(r);
        }
        let mut statuses = Vec::with_capacity(n);
        for (pid, started) in pids {
            let raw = wait_pid(pid);
            self.report_end(pid, raw, started);
            statuses.push(status_of(raw));
        }
        self.check_denied()?;
        let last = statuses.last().copied().unwrap_or(0);
        if self.opts.pipefail {
            return Ok(statuses
                .iter()
                .rev()
                .find(|s| **s != 0)
                .copied()
                .unwrap_or(0));
        }
        Ok(last)
    }

    fn report_end(&mut self, pid: i32, raw: i32, started: Instant) {
        self.report(serde_json::json!({
            "e": pid,
            "x": raw,
            "d": started.elapsed().as_millis() as u64,
        }));
    }

    // ---- compound commands ----

    fn exec_command(&mut self, c: &Command, tail: bool) -> R<i32> {
        // The process substitutions its words start live as long as it.
        let mark = self.procsub_fds.len();
        let r = self.exec_command_now(c, tail);
        let ended = self.end_process_substs(mark);
        let st = r?;
        ended?;
        Ok(st)
    }

    fn exec_command_now(&mut self, c: &Command, tail: bool) -> R<i32> {
        AT.with(|a| a.set(c.offset()));
        match c {
            Command::Simple(s) => self.exec_simple(s, tail),
            Command::Function { name, body, .. } => {
                let f = Function {
                    body: (**body).clone(),
                    frame: self.frame.clone(),
                };
                self.functions.insert(name.clone(), Rc::new(f));
                self.status = 0;
                Ok(0)
            }
            Command::Subshell {
                body, redirects, ..
            } => {
                if self.child && tail {
                    return self.subshell_body(redirects, body);
                }
                let started = Instant::now();
                let pid = self.fork()?;
                if pid == 0 {
                    let r = self.subshell_body(redirects, body);
                    self.child_exit(r);
                }
                let raw = wait_pid(pid);
                let _ = started;
                self.check_denied()?;
                Ok(status_of(raw))
            }
            Command::Group {
                body, redirects, ..
            } => self.with_redirects(redirects, |me| me.exec_list(body)),
            Command::If {
                branches,
                otherwise,
                redirects,
                ..
            } => self.with_redirects(redirects, |me| {
                for (cond, body) in branches {
                    me.errexit_ignored += 1;
                    let r = me.exec_list(cond);
                    me.errexit_ignored -= 1;
                    if r? == 0 {
                        return me.exec_list(body);
                    }
                }
                match otherwise {
                    Some(o) => me.exec_list(o),
                    None => {
                        me.status = 0;
                        Ok(0)
                    }
                }
            }),
            Command::While {
                until,
                condition,
                body,
                redirects,
                ..
            } => self.with_redirects(redirects, |me| {
                let mut last = 0;
                me.loop_depth += 1;
                let r = (|| loop {
                    me.errexit_ignored += 1;
                    let c = me.exec_list(condition);
                    me.errexit_ignored -= 1;
                    let c = match c {
                        Err(Unwind::Break(n)) if n > 1 => return Err(Unwind::Break(n - 1)),
                        Err(Unwind::Break(_)) => break Ok(last),
                        Err(Unwind::Continue(n)) if n > 1 => return Err(Unwind::Continue(n - 1)),
                        Err(Unwind::Continue(_)) => continue,
                        other => other?,
                    };
                    if (c == 0) == *until {
                        break Ok(last);
                    }
                    match me.loop_pass(body)? {
                        Pass::Next(s) => last = s,
                        Pass::Done(s) => break Ok(s),
                    }
                })();
                me.loop_depth -= 1;
                let st = r?;
                me.status = st;
                Ok(st)
            }),
            Command::For {
                offset,
                name,
                words,
                body,
                redirects,
            } => self.with_redirects(redirects, |me| {
                let mut items = Vec::new();
                match words {
                    Some(words) => {
                        for w in words {
                            items.extend(me.fields(w)?);
                        }
                    }
                    // `for NAME; do`: the positional parameters.
                    None => items.extend(me.positional[1..].iter().cloned()),
                }
                let mut last = 0;
                me.loop_depth += 1;
                let r = (|| {
                    for item in items {
                        me.screen(name, *offset)?;
                        if me.readonly.contains(name) {
                            return match me.readonly_failed(name, Unwind::Failed(1)) {
                                Unwind::Failed(st) => Ok(st),
                                r => Err(r),
                            };
                        }
                        me.set_var(name, item);
                        match me.loop_pass(body)? {
                            Pass::Next(s) => last = s,
                            Pass::Done(s) => return Ok(s),
                        }
                    }
                    Ok(last)
                })();
                me.loop_depth -= 1;
                let st = r?;
                me.status = st;
                Ok(st)
            }),
            Command::ArithFor {
                init,
                condition,
                step,
                body,
                redirects,
                ..
            } => self.with_redirects(redirects, |me| {
                me.arith_step("", init)?;
                let mut last = 0;
                me.loop_depth += 1;
                let r = (|| loop {
                    let go = condition.parts.is_empty() || me.arith_step("", condition)? != 0;
                    if !go {
                        break Ok(last);
                    }
                    match me.loop_pass(body)? {
                        Pass::Next(s) => last = s,
                        Pass::Done(s) => break Ok(s),
                    }
                    me.arith_step("", step)?;
                })();
                me.loop_depth -= 1;
                let st = r?;
                me.status = st;
                Ok(st)
            }),
            Command::Case {
                word,
                arms,
                redirects,
                ..
            } => self.with_redirects(redirects, |me| {
                let subject = me.string(word, Tilde::Word)?;
                let mut falling = false;
                for arm in arms {
                    let mut hit = falling;
                    if !hit {
                        for p in &arm.patterns {
                            let pat = me.expand_result(|sh| expand::pattern(p, sh))?;
                            if pat.matches(&subject) {
                                hit = true;
                                break;
                            }
                        }
                    }
                    if hit {
                        // `$?` in the arm is still the status before `case`.
                        let st = if arm.body.is_empty() {
                            me.status = 0;
                            0
                        } else {
                            me.exec_list(&arm.body)?
                        };
                        if arm.fall_through {
                            falling = true;
                            continue;
                        }
                        return Ok(st);
                    }
                }
                if falling {
                    return Ok(me.status);
                }
                me.status = 0;
                Ok(0)
            }),
        }
    }

    /// The body of `( ... ) REDIRECTS` in the process that ends with it:
    /// the redirections stay in place, so the subshell's EXIT trap writes
    /// where its commands did, as in bash.
    fn subshell_body(&mut self, rs: &[Redirect], body: &List) -> R<i32> {
        let merge = std::mem::take(&mut self.stderr_to_pipe);
        match self.apply_redirects(rs, None)? {
            true => {
                if merge {
                    dup2(1, 2);
                }
                self.exec_list(body)
            }
            false => {
                self.status = 1;
                Ok(1)
            }
        }
    }

    // ---- redirections ----

    /// Runs `f` with the redirections applied, then restores the fds.
    fn with_redirects(&mut self, rs: &[Redirect], f: impl FnOnce(&mut Self) -> R<i32>) -> R<i32> {
        if std::mem::take(&mut self.stderr_to_pipe) {
            // Only in a `|&` stage's own process: nothing to restore.
            let r = match self.apply_redirects(rs, None) {
                Ok(true) => {
                    dup2(1, 2);
                    f(self)
                }
                Ok(false) => Ok(1),
                Err(e) => Err(e),
            };
            return r;
        }
        if rs.is_empty() {
            return f(self);
        }
        let mut saved: Vec<(RawFd, RawFd)> = Vec::new();
        let r = match self.apply_redirects(rs, Some(&mut saved)) {
            Ok(true) => f(self),
            Ok(false) => {
                self.status = 1;
                Ok(1)
            }
            Err(e) => Err(e),
        };
        for (fd, copy) in saved.into_iter().rev() {
            if copy >= 0 {
                dup2(copy, fd);
                close(copy);
            } else {
                close(fd);
            }
        }
        r
    }

    /// Applies redirections in order. `saved` (current-process commands)
    /// collects the fds to restore. Ok(false) after a failure bash
    /// reports and goes on from (status 1).
    fn apply_redirects(
        &mut self,
        rs: &[Redirect],
        mut saved: Option<&mut Vec<(RawFd, RawFd)>>,
    ) -> R<bool> {
        for r in rs {
            let fd = r.fd() as RawFd;
            let mut save = |fd: RawFd| {
                if let Some(s) = saved.as_deref_mut()
                    && !s.iter().any(|(f, _)| *f == fd)
                {
                    // SAFETY: fcntl on fds of this process.
                    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
                    s.push((fd, copy));
                }
            };
            match r.op {
                RedirOp::DupOut | RedirOp::DupIn => {
                    let RedirTarget::Word(w) = &r.target else {
                        continue;
                    };
                    let t = w.literal().unwrap_or_default();
                    save(fd);
                    if t == "-" {
                        close(fd);
                        continue;
                    }
                    let src: RawFd = t.parse().unwrap_or(-1);
                    // SAFETY: probing an fd.
                    if src < 0 || unsafe { libc::fcntl(src, libc::F_GETFD) } < 0 {
                        say(&format!("{t}: Bad file descriptor"));
                        return Ok(false);
                    }
                    dup2(src, fd);
                }
                RedirOp::Heredoc | RedirOp::HereString => {
                    let text = match &r.target {
                        RedirTarget::Heredoc(i) => {
                            let heredocs = match &self.frame {
                                Some(f) => &f.script.heredocs,
                                None => &self.script.heredocs,
                            };
                            let Some(h) = heredocs.get(*i) else {
                                continue;
                            };
                            let body = h.body.clone();
                            self.string(&body, Tilde::None)?
                        }
                        RedirTarget::Word(w) => {
                            let mut s = self.string(w, Tilde::Word)?;
                            s.push('\n');
                            s
                        }
                    };
                    save(fd);
                    let rd = match self.feed(text.into_bytes()) {
                        Ok(fd) => fd,
                        Err(e) => {
                            say(&format!("here-document: {}", errno_text(e)));
                            return Ok(false);
                        }
                    };
                    install(rd, fd);
                    if rd != fd {
                        close(rd);
                    }
                }
                _ => {
                    let RedirTarget::Word(w) = &r.target else {
                        continue;
                    };
                    let names = self.fields(w)?;
                    let [name] = names.as_slice() else {
                        say(&format!(
                            "{}: ambiguous redirect",
                            w.literal().unwrap_or_else(|| "$...".into())
                        ));
                        return Ok(false);
                    };
                    if r.op.writes() {
                        self.check_write_target(name, r.offset)?;
                    }
                    let targets: &[RawFd] = if matches!(r.op, RedirOp::OutErr | RedirOp::AppendErr)
                    {
                        &[1, 2]
                    } else {
                        &[fd]
                    };
                    for &t in targets {
                        save(t);
                    }
                    let opened = match self.open_target(name, r.op) {
                        Ok(f) => f,
                        Err(e) => {
                            say(&format!("{name}: {}", errno_text(e)));
                            return Ok(false);
                        }
                    };
                    for &t in targets {
                        install(opened, t);
                    }
                    if !targets.contains(&opened) {
                        close(opened);
                    }
                }
            }
        }
        Ok(true)
    }

    /// A pipe's read end holding `data` (a writer child when it does not
    /// fit in the pipe).
    fn feed(&mut self, data: Vec<u8>) -> Result<RawFd, i32> {
        let (r, w) = pipe()?;
        if data.len() > 65536 {
            // SAFETY: grow the pipe; failure leaves it as it is.
            unsafe {
                libc::fcntl(
                    w,
                    libc::F_SETPIPE_SZ,
                    data.len().min(1 << 20) as libc::c_int,
                )
            };
        }
        // SAFETY: F_GETPIPE_SZ has no memory effects.
        let cap = unsafe { libc::fcntl(w, libc::F_GETPIPE_SZ) };
        if cap >= 0 && data.len() <= cap as usize {
            write_fd(w, &data);
            close(w);
            return Ok(r);
        }
        // SAFETY: single-threaded fork; the child only writes and exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = last_errno();
            close(r);
            close(w);
            return Err(e);
        }
        if pid == 0 {
            close(r);
            write_fd(w, &data);
            // SAFETY: _exit in the child.
            unsafe { libc::_exit(0) };
        }
        close(w);
        Ok(r)
    }

    fn open_target(&self, name: &str, op: RedirOp) -> Result<RawFd, i32> {
        // bash's own names for the standard streams.
        let special = match name {
            "/dev/stdin" => Some(0),
            "/dev/stdout" => Some(1),
            "/dev/stderr" => Some(2),
            _ => name
                .strip_prefix("/dev/fd/")
                .and_then(|n| n.parse::<RawFd>().ok()),
        };
        if let Some(src) = special {
            // SAFETY: dup of an fd of this process.
            let fd = unsafe { libc::fcntl(src, libc::F_DUPFD_CLOEXEC, 10) };
            return if fd < 0 { Err(last_errno()) } else { Ok(fd) };
        }
        let flags = match op {
            RedirOp::In => libc::O_RDONLY,
            RedirOp::Out | RedirOp::Clobber | RedirOp::OutErr => {
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC
            }
            RedirOp::Append | RedirOp::AppendErr => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
            RedirOp::ReadWrite => libc::O_RDWR | libc::O_CREAT,
            _ => libc::O_RDONLY,
        };
        let path = cstr(name);
        // SAFETY: open with a NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o666) };
        if fd < 0 { Err(last_errno()) } else { Ok(fd) }
    }

    /// The run-time half of `redirect.outside`.
    fn check_write_target(&mut self, name: &str, offset: usize) -> R<()> {
        let abs = if name.starts_with('/') {
            PathBuf::from(name)
        } else {
            self.cwd.join(name)
        };
        let norm = verify::normalize(&abs);
        let ok = norm.as_ref().is_some_and(|p| {
            verify::writable(&self.policy, Some(&self.workspace), p)
                || (self.private_tmp && p.starts_with("/tmp"))
        });
        if ok {
            return Ok(());
        }
        let mut d = if norm.as_ref().is_some_and(|p| p.starts_with("/tmp")) {
            Denial::new(
                "redirect.outside",
                format!("the redirection writes to `{name}`, in the host's /tmp"),
                verify::tmp_hint(&self.policy),
            )
        } else {
            Denial::new(
                "redirect.outside",
                format!(
                    "the redirection writes to `{name}`, outside the workspace and the policy's write scopes"
                ),
                verify::outside_hint(&self.policy),
            )
        };
        d.offset = Some(offset);
        Err(self.deny(d))
    }

    // ---- simple commands ----

    fn fields(&mut self, w: &Word) -> R<Vec<String>> {
        self.expand_result(|sh| expand::fields(w, sh))
    }

    fn string(&mut self, w: &Word, t: Tilde) -> R<String> {
        self.expand_result(|sh| expand::string(w, t, sh))
    }

    fn expand_result<T>(
        &mut self,
        f: impl FnOnce(&mut dyn Shell) -> Result<T, ExpandError>,
    ) -> R<T> {
        match f(self) {
            Ok(_) if std::mem::take(&mut self.exit_now) => Err(Unwind::Exit(1)),
            Ok(v) => Ok(v),
            Err(ExpandError::Fatal(msg)) => {
                say(&msg);
                Err(Unwind::Fatal)
            }
            Err(ExpandError::Denied(d)) => Err(self.deny(d)),
            Err(ExpandError::Stopped) => Err(Unwind::Denied),
            Err(ExpandError::Arith(msg)) => {
                say(&msg);
                if std::mem::take(&mut self.exit_now) {
                    return Err(Unwind::Exit(1));
                }
                Err(Unwind::Abort)
            }
        }
    }

    /// One expression of `for ((...))`: its value (traced as bash does).
    fn arith_step(&mut self, _what: &str, w: &Word) -> R<i64> {
        let text = self.string(w, Tilde::None)?;
        if self.opts.xtrace {
            self.trace(&format!("(( {text} ))"));
        }
        self.expand_result(|sh| expand::arith_text(&text, sh))
    }

    /// `set -x`: a line on standard error, `+ ` (one `+` more in each
    /// command substitution).
    fn trace(&self, line: &str) {
        let depth = self.subst_depth as usize + 1;
        write_fd(2, format!("{} {line}\n", "+".repeat(depth)).as_bytes());
    }

    /// The elements of `NAME=(...)`: a word each is split and globbed as
    /// an argument is; `[SUBSCRIPT]=value` is the subscript's text and
    /// one string.
    fn array_items(&mut self, lit: &ArrayLit) -> R<ArrayItems> {
        let mut items = Vec::new();
        for e in &lit.elems {
            match &e.index {
                Some(i) => {
                    let k = self.string(i, Tilde::None)?;
                    let v = self.string(&e.value, Tilde::Assignment)?;
                    items.push((Some(k), v));
                }
                None => {
                    for f in self.fields(&e.value)? {
                        items.push((None, f));
                    }
                }
            }
            if items.len() > expand::MAX_ARRAY_ELEMENTS {
                say(&format!(
                    "an array holds at most {} elements",
                    expand::MAX_ARRAY_ELEMENTS
                ));
                return Err(Unwind::Abort);
            }
        }
        Ok(items)
    }

    /// `NAME=(...)` / `NAME+=(...)`: the array's new elements (an
    /// associative one when `assoc`, or when NAME is one already).
    fn set_array(
        &mut self,
        name: &str,
        items: ArrayItems,
        append: bool,
        assoc: Option<bool>,
    ) -> R<()> {
        if self.readonly.contains(name) {
            return Err(self.readonly_failed(name, Unwind::Failed(1)));
        }
        let assoc = assoc.unwrap_or_else(|| self.is_assoc(name));
        let old = self.vars.get(name).cloned().unwrap_or_default();
        let exported = old.exported;
        let mut indexed = std::collections::BTreeMap::new();
        let mut keyed = std::collections::BTreeMap::new();
        if append {
            match old.array {
                Some(Array::Indexed(m)) => indexed = m,
                Some(Array::Assoc(m)) => keyed = m,
                None => {
                    if let Some(v) = old.value {
                        if assoc {
                            keyed.insert("0".to_string(), v);
                        } else {
                            indexed.insert(0, v);
                        }
                    }
                }
            }
        }
        let mut next = indexed
            .keys()
            .next_back()
            .map_or(0, |k| k.saturating_add(1));
        for (k, v) in items {
            match (k, assoc) {
                (Some(k), true) => {
                    keyed.insert(k, v);
                }
                (None, true) => {
                    say(&format!(
                        "{name}: {v}: must use subscript when assigning associative array"
                    ));
                }
                (Some(k), false) => {
                    let i = self.expand_result(|sh| expand::arith_text(&k, sh))?;
                    let last = indexed.keys().next_back().copied();
                    let Ok(i) = absolute_index(i, last) else {
                        say(&format!("{name}[{i}]: bad array subscript"));
                        return Err(Unwind::Abort);
                    };
                    indexed.insert(i, v);
                    next = i.saturating_add(1);
                }
                (None, false) => {
                    indexed.insert(next, v);
                    next = next.saturating_add(1);
                }
            }
            if indexed.len().max(keyed.len()) > expand::MAX_ARRAY_ELEMENTS {
                say(&format!(
                    "{name}: an array holds at most {} elements",
                    expand::MAX_ARRAY_ELEMENTS
                ));
                return Err(Unwind::Abort);
            }
        }
        self.vars.insert(
            name.to_string(),
            Var {
                value: None,
                exported,
                array: Some(if assoc {
                    Array::Assoc(keyed)
                } else {
                    Array::Indexed(indexed)
                }),
            },
        );
        Ok(())
    }

    /// An assignment of the shell's (no command): `NAME=value`,
    /// `NAME[SUBSCRIPT]=value`, `NAME=(...)`, and their `+=` forms.
    fn assign_now(&mut self, a: &Assignment) -> R<()> {
        // bash abandons the line at an assignment to a read-only name;
        // under `set -e` it ends the shell, whatever the context.
        if self.readonly.contains(&a.name) {
            return Err(self.readonly_failed(&a.name, Unwind::Abort));
        }
        if let [Part::Array(lit)] = a.value.parts.as_slice() {
            let items = self.array_items(lit)?;
            if self.opts.xtrace {
                let shown: Vec<String> = items
                    .iter()
                    .map(|(k, v)| match k {
                        Some(k) => format!("[{k}]={}", xtrace_quote(v)),
                        None => xtrace_quote(v),
                    })
                    .collect();
                let op = if a.append { "+=" } else { "=" };
                self.trace(&format!("{}{op}({})", a.name, shown.join(" ")));
            }
            return self.set_array(&a.name, items, a.append, None);
        }
        if let Some(iw) = &a.index {
            let key = self.expand_result(|sh| expand::subscript(&a.name, iw, sh))?;
            let mut v = self.string(&a.value, Tilde::Assignment)?;
            if a.append {
                let old = Shell::element(self, &a.name, &key).ok().flatten();
                v = format!("{}{v}", old.unwrap_or_default());
            }
            if self.opts.xtrace {
                self.trace(&format!("{}[{key}]={}", a.name, xtrace_quote(&v)));
            }
            if let Err(m) = self.put_element(&a.name, key, v) {
                say(&m.0);
                return Err(Unwind::Abort);
            }
            return Ok(());
        }
        let mut v = self.string(&a.value, Tilde::Assignment)?;
        if a.append {
            v = format!("{}{v}", self.var(&a.name).unwrap_or_default());
        }
        if self.opts.xtrace {
            self.trace(&format!("{}={}", a.name, xtrace_quote(&v)));
        }
        self.set_var(&a.name, v);
        Ok(())
    }

    fn exec_simple(&mut self, c: &SimpleCommand, tail: bool) -> R<i32> {
        self.subst_status = None;
        self.exit_now = false;
        self.decl_arrays.clear();
        // Words: `export NAME=$x` takes its assignments whole, as bash
        // does for declaration builtins.
        let declaration = c.words.first().is_some_and(|w| {
            ["export", "declare", "typeset", "local", "readonly"]
                .iter()
                .any(|d| w.is_bare(d))
        });
        let mut argv = Vec::new();
        let mut offsets = Vec::new();
        // The argv as the rules judge it: `./*` as `.` (expand::fields_judged).
        let mut judged = (Vec::new(), Vec::new());
        // `[[ ]]` expands its operands itself, as it evaluates them.
        let cond = c.words.first().is_some_and(|w| w.is_bare("[["));
        if cond {
            argv.push("[[".to_string());
            offsets.push(c.offset);
            judged.0.push("[[".to_string());
            judged.1.push(c.offset);
        }
        for (i, w) in c.words.iter().enumerate().filter(|_| !cond) {
            if declaration
                && i > 0
                && let (Some(Part::Lit(t)), Some(Part::Array(lit))) =
                    (w.parts.first(), w.parts.last())
            {
                // `declare NAME=(...)`: the builtin takes NAME and the
                // elements.
                let (name, append) = match t.strip_suffix("+=") {
                    Some(n) => (n, true),
                    None => (t.trim_end_matches('='), false),
                };
                let items = self.array_items(lit)?;
                let at = argv.len();
                self.decl_arrays.push((at, items, append));
                argv.push(name.to_string());
                offsets.push(w.offset);
                judged.0.push(name.to_string());
                judged.1.push(w.offset);
                continue;
            }
            if declaration && i > 0 && is_assignment_word(w) {
                argv.push(self.string(w, Tilde::Assignment)?);
                offsets.push(w.offset);
                judged.0.push(argv[argv.len() - 1].clone());
                judged.1.push(w.offset);
                continue;
            }
            let (fs, js) = self.expand_result(|sh| expand::fields_judged(w, sh))?;
            let js = if i == 0 { fs.clone() } else { js };
            judged.1.extend(std::iter::repeat_n(w.offset, js.len()));
            judged.0.extend(js);
            offsets.extend(std::iter::repeat_n(w.offset, fs.len()));
            argv.extend(fs);
        }
        let mut assigns = Vec::with_capacity(c.assignments.len());
        // Assignments for the shell alone (no command, or a builtin that
        // does not export) may set IFS, as the static check allows.
        let shell_only = argv.first().is_none_or(|n| {
            verify::BUILTINS.contains(&n.as_str())
                && !matches!(n.as_str(), "export" | "declare" | "typeset" | "local")
        });
        for a in &c.assignments {
            // The static check screened the command string's; a script
            // file's are screened here.
            let screened = if argv.is_empty() {
                // `set -a` exports what is assigned: screened as an export.
                let exported =
                    self.opts.allexport || self.vars.get(&a.name).is_some_and(|v| v.exported);
                verify::screen_bare_name(&self.policy, &a.name, a.offset, exported)
            } else if shell_only {
                verify::screen_shell_name(&self.policy, &a.name, a.offset)
            } else {
                verify::screen_name(&self.policy, &a.name, a.offset)
            };
            if let Err(d) = screened {
                return Err(self.deny(d));
            }
            if argv.is_empty() {
                // The shell's own assignments take effect one by one, as
                // in bash (`a=1 b=$a`).
                self.assign_now(a)?;
                continue;
            }
            let mut v = self.string(&a.value, Tilde::Assignment)?;
            if a.append {
                v = format!("{}{v}", self.var(&a.name).unwrap_or_default());
            }
            // A read-only name keeps its value; the command still runs
            // (not under `set -e`).
            if self.readonly.contains(&a.name) {
                let r = self.readonly_failed(&a.name, Unwind::Failed(1));
                if matches!(r, Unwind::Exit(_)) {
                    return Err(r);
                }
                continue;
            }
            assigns.push((a.name.clone(), v));
        }
        if self.opts.xtrace && !argv.is_empty() {
            let mut line: Vec<String> = assigns
                .iter()
                .map(|(k, v)| format!("{k}={}", xtrace_quote(v)))
                .collect();
            if cond {
                // As written (bash shows the operands expanded).
                line.extend(
                    c.words
                        .iter()
                        .map(|w| w.literal().unwrap_or_else(|| "...".into())),
                );
            } else if argv[0] == "((" {
                line.push(format!(
                    "(( {} ))",
                    argv[1..argv.len() - 1].join(" ").trim()
                ));
            } else {
                line.extend(argv.iter().map(|a| xtrace_quote(a)));
            }
            self.trace(&line.join(" "));
        }
        if argv.is_empty() {
            for (k, v) in assigns {
                self.set_var(&k, v);
            }
            let st = self.subst_status.unwrap_or(0);
            if !c.redirects.is_empty() {
                // `> file` alone creates the file, in a subshell's scope.
                let r = self.with_redirects(&c.redirects, |_| Ok(0))?;
                if r != 0 {
                    return Ok(r);
                }
            }
            return Ok(st);
        }
        // `exec` alone makes its redirections the shell's own; `exec CMD`
        // runs CMD and ends the shell with its status.
        let mut exec = false;
        if argv[0] == "exec" {
            if argv.len() == 1 {
                let st = match self.apply_redirects(&c.redirects, None)? {
                    true => 0,
                    false => 1,
                };
                self.report(
                    serde_json::json!({ "b": argv, "o": c.offset, "c": st, "t": now_ns() }),
                );
                return Ok(st);
            }
            argv.remove(0);
            offsets.remove(0);
            judged.0.remove(0);
            judged.1.remove(0);
            exec = true;
            if !verify::program_backed(&argv[0])
                && (verify::BUILTINS.contains(&argv[0].as_str())
                    || verify::refused_builtin(&argv[0]).is_some())
            {
                let mut d = Denial::new(
                    "syntax.exec",
                    format!(
                        "`exec {}`: exec runs programs, `{}` is a shell builtin",
                        argv[0], argv[0]
                    ),
                    "run the builtin without exec",
                )
                .at_arg(0);
                d.offset = offsets.first().copied().or(Some(c.offset));
                return Err(self.deny(d));
            }
        }
        let name = argv[0].clone();
        if !exec && let Some(f) = self.functions.get(&name).cloned() {
            return self.call_function(c, &f, &argv, assigns);
        }
        if verify::BUILTINS.contains(&name.as_str()) && !(exec && verify::program_backed(&name)) {
            let started = now_ns();
            // Prefix assignments hold for the builtin only.
            let mut saved = self.set_for_call(assigns);
            let r = self.with_redirects(&c.redirects, |me| me.builtin(c, &argv, &offsets));
            let r = match r {
                Err(Unwind::Failed(st)) => Ok(st),
                r => r,
            };
            // `NAME=v export NAME` keeps (and exports) the value.
            if name == "export" {
                saved.retain(|(k, _)| {
                    !argv[1..]
                        .iter()
                        .any(|a| a.split('=').next() == Some(k.as_str()))
                });
            }
            self.restore(saved);
            let st = r?;
            // A pipeline stage's builtin is ordered by its fork, as the
            // programs beside it are.
            let at = if self.child {
                self.forked_at.min(started)
            } else {
                started
            };
            self.report(serde_json::json!({ "b": argv, "o": c.offset, "c": st, "t": at }));
            return Ok(st);
        }
        let mut exec_path = None;
        let mut identity = None;
        match self.script_call(c, &argv)? {
            None => {}
            Some(Call::Status(st)) => return Ok(st),
            Some(Call::Program {
                argv: a,
                offsets: o,
                exec: e,
                script,
            }) => {
                judged = (a.clone(), o);
                argv = a;
                exec_path = e;
                identity = script;
            }
            Some(Call::Eval { text }) => {
                // Prefix assignments hold for the call only, as bash
                // (outside POSIX mode) keeps them for `eval` and `source`.
                let saved = self.set_for_call(assigns);
                let r = self.with_redirects(&c.redirects, |me| me.run_text("eval".into(), text));
                self.restore(saved);
                let st = r?;
                self.status = st;
                if exec {
                    self.exec_exit = true;
                    return Err(Unwind::Exit(st));
                }
                return Ok(st);
            }
            Some(Call::Source { name, text, args }) => {
                let saved = self.set_for_call(assigns);
                let r = self.run_source(c, name, text, args);
                self.restore(saved);
                let st = r?;
                if exec {
                    self.exec_exit = true;
                    return Err(Unwind::Exit(st));
                }
                return Ok(st);
            }
            Some(Call::Shell {
                name,
                text,
                positional,
                set,
                file,
            }) => {
                let shell = NewShell {
                    name,
                    text,
                    positional,
                    set,
                    file,
                    assigns,
                };
                let st = self.run_shell(c, &argv, shell, tail)?;
                if exec {
                    self.exec_exit = true;
                    return Err(Unwind::Exit(st));
                }
                return Ok(st);
            }
        }
        // A program `script_call` judged already (by the name of the
        // allowed program it is) runs by the path as written.
        let checked = match exec_path {
            Some(p) => Some(p),
            None => self.check_program(c, &argv, &judged)?,
        };
        let program = match checked {
            Some(p) => p,
            None => {
                if name.contains('/') {
                    say(&format!("{name}: No such file or directory"));
                } else {
                    say(&format!("{name}: command not found"));
                }
                if exec {
                    return Err(Unwind::Exit(127));
                }
                return Ok(127);
            }
        };
        // The environment: exported variables, then the prefix assignments.
        let mut env: Vec<(String, String)> = self
            .vars
            .iter()
            .filter(|(_, v)| v.exported && v.array.is_none())
            .filter_map(|(k, v)| Some((k.clone(), v.value.clone()?)))
            .collect();
        for (k, v) in assigns {
            match env.iter_mut().find(|(n, _)| *n == k) {
                Some(slot) => slot.1 = v,
                None => env.push((k, v)),
            }
        }
        // Build flags and search paths were set freely; their values are
        // read now that a program would get them.
        for (k, v) in &env {
            if let check::env::ValueVerdict::Refused(why) =
                check::env::value_verdict(&self.policy, Some(&self.workspace), k, v)
            {
                let mut d = Denial::new(
                    "env.dangerous",
                    format!("the environment of `{name}` is refused: {why}"),
                    "leave that word out, or set the variable only for programs that need it",
                );
                d.offset = Some(c.offset);
                return Err(self.deny(d));
            }
        }
        // A shell with `>(...)` lists running waits for them before it
        // ends, so it cannot become the program.
        if tail && self.child && !self.writers_running() {
            self.exec_program(c, &program, identity.as_deref(), &argv, &env);
        }
        let started = Instant::now();
        let pid = self.fork()?;
        if pid == 0 {
            self.exec_program(c, &program, identity.as_deref(), &argv, &env);
        }
        let raw = wait_pid(pid);
        self.report_end(pid, raw, started);
        self.check_denied()?;
        if exec {
            self.exec_exit = true;
            return Err(Unwind::Exit(status_of(raw)));
        }
        Ok(status_of(raw))
    }

    /// In the process that becomes the program: redirections, then exec.
    /// `identity`: the script a shebang's interpreter runs, when that is
    /// what runs (`network.commands` judges the script, not python).
    fn exec_program(
        &mut self,
        c: &SimpleCommand,
        program: &Path,
        identity: Option<&Path>,
        argv: &[String],
        env: &[(String, String)],
    ) -> ! {
        match self.apply_redirects(&c.redirects, None) {
            Ok(true) => {}
            Ok(false) => self.child_exit(Ok(1)),
            Err(e) => self.child_exit(Err(e)),
        }
        if std::mem::take(&mut self.stderr_to_pipe) {
            dup2(1, 2);
        }
        // network.commands: this command reaches the proxy only when it
        // is one of the listed programs, and nothing else in any case.
        let mut granted_env = None;
        // The layer stacks on every layer above it, so a listed program
        // started by an unlisted one gets nothing either.
        if self.policy.network.level == crate::policy::Network::Domains
            && self.policy.network.per_command()
            && !is_own_binary(program)
        {
            let granted = self.policy.network.grants_program(
                &self.policy.commands.search_path,
                identity.unwrap_or(program),
            );
            if granted {
                granted_env = Some(crate::policy::network::granted_env(env));
            }
            let port = granted.then_some(crate::policy::PROXY_PORT);
            match crate::sys::connect_layer(port) {
                Ok(Some(fd)) => {
                    if let Err(e) = crate::sys::restrict_self(std::os::fd::AsRawFd::as_raw_fd(&fd))
                    {
                        say(&format!(
                            "{}: cannot limit its network: {}",
                            argv[0],
                            errno_text(e)
                        ));
                        // SAFETY: _exit in the child.
                        unsafe { libc::_exit(126) }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    say(&format!("{}: cannot limit its network: {e}", argv[0]));
                    // SAFETY: _exit in the child.
                    unsafe { libc::_exit(126) }
                }
            }
        }
        self.pass_process_substs();
        let prog = CString::new(program.as_os_str().as_bytes()).unwrap_or_default();
        let argv_c: Vec<CString> = argv.iter().map(|a| cstr(a)).collect();
        let env = granted_env.as_deref().unwrap_or(env);
        let env_c: Vec<CString> = env.iter().map(|(k, v)| cstr(&format!("{k}={v}"))).collect();
        let mut av: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
        av.push(std::ptr::null());
        let mut ev: Vec<*const libc::c_char> = env_c.iter().map(|c| c.as_ptr()).collect();
        ev.push(std::ptr::null());
        self.report(serde_json::json!({
            "s": std::process::id(),
            "a": argv,
            "o": c.offset,
            "t": self.forked_at,
        }));
        // SAFETY: execve with NUL-terminated arrays that outlive the call.
        unsafe { libc::execve(prog.as_ptr(), av.as_ptr(), ev.as_ptr()) };
        let e = last_errno();
        say(&format!("{}: {}", argv[0], errno_text(e)));
        // SAFETY: _exit in the child.
        unsafe { libc::_exit(if e == libc::ENOENT { 127 } else { 126 }) }
    }

    /// The program for an argv, checked as a command: from the static
    /// check when it already checked this argv, else resolved and judged
    /// now. None: allowed but not installed (bash's "command not found").
    fn check_program(
        &mut self,
        c: &SimpleCommand,
        argv: &[String],
        (judged, offsets): &(Vec<String>, Vec<usize>),
    ) -> R<Option<PathBuf>> {
        // A script file's commands are checked here, as they run: the
        // static check saw only the command string.
        let static_check = match self.frame {
            Some(_) => None,
            None => self.resolved.get(c.id).cloned().flatten(),
        };
        // The rules read paths as the command sees them from its
        // directory: an absolute path into the workspace (`"$PWD"`, `~`,
        // `$HOME/.git`, or typed out) is judged as the relative path it
        // names, so `rm -rf "$PWD"` is `rm -rf .`. The static check did not
        // know the directory, so such an argv is judged again.
        let seen = crate::check::as_seen_from(&self.workspace, &self.cwd, judged);
        // A pipe the static check did not follow (in a compound command,
        // a substitution or a script file) is judged now.
        if let Some(r) = &static_check
            && r.checked
            && self.piped.is_empty()
            && matches!(seen, std::borrow::Cow::Borrowed(_))
        {
            return Ok(Some(r.program.clone()));
        }
        let name = &argv[0];
        let shown = argv.join(" ");
        // In a script file every command is checked here, expansions or
        // not: say "after expansion" only for the command string's.
        let static_known = self.frame.is_none();
        let locate = |mut d: Denial| {
            d.offset = d
                .arg_index
                .and_then(|i| offsets.get(i).copied())
                .or(Some(c.offset));
            if static_known {
                d.reason = format!("{} (after expansion: `{shown}`)", d.reason);
            }
            if judged != argv {
                d.reason = format!("{}; {}", d.reason, verify::GLOB_AS_DIR);
            }
            d
        };
        if let Some((rule, hint)) = verify::refused_builtin(name) {
            let d = Denial::new(
                rule,
                format!("`{name}` is a shell builtin agent-rsh does not run"),
                hint,
            )
            .at_arg(0);
            return Err(self.deny(locate(d)));
        }
        let program = match static_check {
            Some(r) => r.program,
            None => match self.resolve(name) {
                Ok(p) => p,
                Err(d) if d.kind == DenialKind::NotFound => match self.workspace_program(name) {
                    Some(p) => p,
                    None => return Ok(None),
                },
                Err(d) => match self.workspace_program(name) {
                    Some(p) => p,
                    // The project's own program by a path that names
                    // nothing: bash's "No such file or directory", 127.
                    None if d.rule == "command.path"
                        && self.policy.commands.workspace
                        && !name.starts_with('/')
                        && std::fs::symlink_metadata(self.cwd.join(name)).is_err() =>
                    {
                        return Ok(None);
                    }
                    None => return Err(self.deny(locate(d))),
                },
            },
        };
        let stdin = feed::stdin_files(c, &self.piped);
        let j = {
            let (policy, cache) = (&self.policy, &mut self.cache);
            let (workspace, cwd) = (&self.workspace, &self.cwd);
            // A program a wrapper starts (`timeout 5 ./a.out`) may be the
            // project's own under commands.workspace, as a command's first
            // word may.
            let mut resolve = |n: &str| match resolve_cached(policy, cache, n) {
                Err(d) if d.rule == "command.path" && policy.commands.workspace => {
                    own_file(workspace, cwd, n).ok_or(d)
                }
                r => r,
            };
            judge::judge_fed(policy, &seen, &stdin, &mut resolve, false)
        };
        for w in j.warnings() {
            self.report(serde_json::json!({ "w": w }));
        }
        if let Some(d) = j.denial {
            return Err(self.deny(locate(d)));
        }
        Ok(Some(program))
    }

    // ---- scripts ----

    /// Whether `argv` runs a script, and how: a shell (`sh`, `bash`,
    /// `dash`, by name or path), `source`/`.`, or a file named by path
    /// whose first line names a shell or another interpreter.
    fn script_call(&mut self, c: &SimpleCommand, argv: &[String]) -> R<Option<Call>> {
        let name = argv[0].as_str();
        if name == "eval" {
            return Ok(Some(Call::Eval {
                text: argv[1..].join(" "),
            }));
        }
        if name == "source" || name == "." {
            let Some(file) = argv.get(1) else {
                say(&format!("{name}: filename argument required"));
                return Ok(Some(Call::Status(2)));
            };
            return Ok(Some(match self.read_script(file) {
                Ok(text) => Call::Source {
                    name: file.clone(),
                    text,
                    args: argv[2..].to_vec(),
                },
                Err(st) => Call::Status(st),
            }));
        }
        if self.policy.interprets_shell(name) {
            return Ok(Some(self.script_call_shell(argv)));
        }
        if name == "npx"
            && let Some(a) = self.npx_installed(argv)
        {
            return Ok(Some(match self.script_call(c, &a)? {
                Some(call) => call,
                None => Call::Program {
                    offsets: vec![c.offset; a.len()],
                    argv: a,
                    exec: None,
                    script: None,
                },
            }));
        }
        if !name.contains('/') {
            // Under `commands.workspace`, a name whose first hit on PATH is
            // in the workspace (an activated virtualenv's `pip`, `python`)
            // is that file, as in bash: judged by what it is.
            return match self.path_in_workspace(name) {
                Some(p) => {
                    let mut a = argv.to_vec();
                    a[0] = p.display().to_string();
                    self.script_call(c, &a)
                }
                None => Ok(None),
            };
        }
        // A file named by path: its first line decides. Anything else
        // (a directory, a binary, nothing there) is the program path's
        // business: a program the policy lists, or refused.
        let path = self.cwd.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            return Ok(None);
        };
        if !meta.is_file() {
            return Ok(None);
        }
        let mut head = [0u8; 512];
        let n = std::fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .unwrap_or(0);
        let kind = scripts::classify(&head[..n]);
        if kind == Shebang::Binary {
            // A link to an allowed program (a virtualenv's `python`): judged
            // as that program, run by the path as written.
            return Ok(match self.interpreter_name(name) {
                Some(allowed) if !self.inside_workspace(&path) => {
                    let mut judged = argv.to_vec();
                    judged[0] = allowed;
                    let offsets = vec![c.offset; argv.len()];
                    self.check_program(c, &judged, &(judged.clone(), offsets.clone()))?;
                    Some(Call::Program {
                        argv: argv.to_vec(),
                        offsets,
                        exec: Some(path),
                        script: None,
                    })
                }
                _ => None,
            });
        }
        if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 == 0 {
            say(&format!("{name}: Permission denied"));
            return Ok(Some(Call::Status(126)));
        }
        match kind {
            Shebang::Shell => Ok(Some(match self.read_script(name) {
                Ok(text) => Call::Shell {
                    name: name.to_string(),
                    text: Some(text),
                    positional: argv.to_vec(),
                    set: Vec::new(),
                    file: true,
                },
                Err(st) => Call::Status(st),
            })),
            Shebang::Program { path, via_env, arg } => {
                let (word, exec) = if via_env {
                    (path, None)
                } else {
                    match self.interpreter_name(&path) {
                        Some(n) => (n, Some(PathBuf::from(&path))),
                        None => (path, None),
                    }
                };
                let shown = exec.as_ref().map(|p| p.display().to_string());
                let mut out = vec![shown.unwrap_or_else(|| word.clone())];
                out.extend(arg);
                let lead = out.len();
                out.extend(argv.iter().cloned());
                let offsets: Vec<usize> = std::iter::repeat_n(c.offset, lead)
                    .chain(std::iter::repeat_n(c.offset, argv.len()))
                    .collect();
                // Judged by the interpreter's name: the rules and the
                // allowlist see `python3 ./x.py`.
                if exec.is_some() {
                    let mut judged = out.clone();
                    judged[0] = word;
                    self.check_program(c, &judged, &(judged.clone(), offsets.clone()))?;
                }
                Ok(Some(Call::Program {
                    argv: out,
                    offsets,
                    exec,
                    script: Some(self.cwd.join(&argv[0])),
                }))
            }
            Shebang::Binary => Ok(None),
        }
    }

    /// Under `commands.workspace`: the file `name` names when the first
    /// directory of PATH that holds it lies in the workspace.
    fn path_in_workspace(&self, name: &str) -> Option<PathBuf> {
        if !self.policy.commands.workspace {
            return None;
        }
        let path = self.var("PATH").unwrap_or_default();
        for d in path.split(':').filter(|d| !d.is_empty()) {
            let dir = self.cwd.join(d);
            let p = dir.join(name);
            if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                return self.inside_workspace(&dir).then_some(p);
            }
        }
        None
    }

    /// `npx [-y|--no-install|--offline|-q] NAME ARGS` under
    /// `commands.workspace`, NAME installed in the nearest
    /// `node_modules/.bin` from the shell's directory up to the workspace
    /// root: that program's argv, as npx would run it. npx never downloads
    /// here: anything else is npx itself, judged by its rules.
    fn npx_installed(&self, argv: &[String]) -> Option<Vec<String>> {
        if !self.policy.commands.workspace {
            return None;
        }
        let mut i = 1;
        while let Some(a) = argv.get(i) {
            match a.as_str() {
                "-y" | "--yes" | "--no" | "--no-install" | "--offline" | "-q" | "--quiet" => i += 1,
                "--" => {
                    i += 1;
                    break;
                }
                _ => break,
            }
        }
        let name = argv.get(i)?;
        if name.is_empty() || name.starts_with('-') || name.contains(['/', '@']) {
            return None;
        }
        let mut dir = self.cwd.clone();
        loop {
            let p = dir.join("node_modules/.bin").join(name);
            if p.is_file() && self.inside_workspace(&dir) {
                let mut out = vec![p.display().to_string()];
                out.extend(argv[i + 1..].iter().cloned());
                return Some(out);
            }
            if !dir.pop() || !self.inside_workspace(&dir) {
                return None;
            }
        }
    }

    /// Whether a file's real path lies in the workspace.
    fn inside_workspace(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|p| p.starts_with(&self.workspace))
    }

    /// The project's own program, under `commands.workspace`: a path to a
    /// file in the workspace, or a name found in a directory of PATH that
    /// lies in the workspace (`node_modules/.bin`, `.venv/bin`), in PATH
    /// order. The kernel lets it execute (the grant makes the workspace
    /// executable) under the run's confinement.
    fn workspace_program(&self, name: &str) -> Option<PathBuf> {
        if !self.policy.commands.workspace {
            return None;
        }
        let candidates: Vec<PathBuf> = if name.contains('/') {
            return own_file(&self.workspace, &self.cwd, name);
        } else {
            let path = self.var("PATH").unwrap_or_default();
            path.split(':')
                .filter(|d| !d.is_empty())
                .map(|d| self.cwd.join(d))
                .filter(|d| self.inside_workspace(d))
                .map(|d| d.join(name))
                .collect()
        };
        candidates.into_iter().find_map(|p| {
            let real = std::fs::canonicalize(&p).ok()?;
            (real.starts_with(&self.workspace) && real.is_file()).then_some(real)
        })
    }

    /// `sh ARGS`: the new shell's script and parameters, or bash's error.
    fn script_call_shell(&mut self, argv: &[String]) -> Call {
        let name = argv[0].as_str();
        let a = match scripts::shell_args(&argv[1..]) {
            Ok(a) => a,
            Err(e) => {
                say(&format!("{name}: {e}"));
                return Call::Status(2);
            }
        };
        let file = a.command.is_none();
        let (shown, text, arg0) = match (a.command, a.file) {
            (Some(cmd), _) => {
                let arg0 = a.arg0.unwrap_or_else(|| name.to_string());
                (arg0.clone(), Some(cmd), arg0)
            }
            (None, Some(file)) => match self.read_script(&file) {
                Ok(text) => (file.clone(), Some(text), file),
                Err(_) => return Call::Status(127),
            },
            (None, None) => (name.to_string(), None, name.to_string()),
        };
        let mut positional = vec![arg0];
        positional.extend(a.args);
        Call::Shell {
            name: shown,
            text,
            positional,
            set: a.set,
            file,
        }
    }

    /// The allowlisted name of an interpreter a shebang names by path: the
    /// name the policy resolves to the same file (`/usr/bin/python3`,
    /// a virtualenv's `python` symlink: `python3`). None: no such name.
    fn interpreter_name(&mut self, path: &str) -> Option<String> {
        let real = std::fs::canonicalize(path).ok()?;
        let base = |p: &Path| p.file_name()?.to_str().map(String::from);
        let mut names = vec![base(Path::new(path))?];
        if let Some(b) = base(&real) {
            // `python3.11` is allowed as `python3`.
            if let Some((stem, _)) = b.split_once('.') {
                names.push(stem.to_string());
            }
            names.push(b);
        }
        names.into_iter().find(|n| {
            self.resolve(n)
                .ok()
                .and_then(|p| std::fs::canonicalize(p).ok())
                .is_some_and(|p| p == real)
        })
    }

    /// A script's text, read (inside the confined process) relative to the
    /// shell's directory; on failure bash's message and status.
    fn read_script(&self, file: &str) -> Result<String, i32> {
        let path = self.cwd.join(file);
        let max = self.policy.max_command_bytes;
        let read = std::fs::File::open(&path).and_then(|f| {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(f, max as u64 + 1), &mut buf)?;
            Ok(buf)
        });
        match read {
            Ok(b) if b.len() > max => {
                say(&format!(
                    "{file}: longer than max_command_bytes ({max} bytes): not run"
                ));
                Err(126)
            }
            Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Err(e) => {
                let text = errno_text(e.raw_os_error().unwrap_or(libc::EIO));
                say(&format!("{file}: {text}"));
                Err(if e.kind() == std::io::ErrorKind::NotFound {
                    127
                } else {
                    126
                })
            }
        }
    }

    /// Runs a script's text in this process, as `name` for refusals.
    fn run_text(&mut self, name: String, text: String) -> R<i32> {
        // Nothing to run (empty, blank, comments only): bash's status 0.
        let blank = |l: &str| {
            let l = l.trim_start();
            l.is_empty() || l.starts_with('#')
        };
        if text.lines().all(blank) {
            self.status = 0;
            return Ok(0);
        }
        let script = match super::parse(&text, self.policy.max_command_bytes) {
            Ok(s) => s,
            Err(e) => {
                self.refuse_in(&name, &text, &Denial::from(e));
                return Ok(126);
            }
        };
        // `eval` and a trap are read where they run: bash counts their
        // lines from there.
        let (said_as, base) = match (name.as_str(), here()) {
            ("eval" | "trap", Some((at, line))) => (at, line - 1),
            _ => (Rc::from(name.as_str()), 0),
        };
        let frame = Rc::new(Frame {
            name,
            text: Rc::from(text),
            script,
            said_as,
            base,
        });
        let outer = self.enter(Some(frame.clone()));
        let r = self.exec_lines(&frame.script.body, &frame.text);
        self.leave(outer);
        r
    }

    /// Makes `frame` (None: the command string) the text that commands
    /// run from, for messages and refusals; what it replaced, for `leave`.
    fn enter(&mut self, frame: Option<Rc<Frame>>) -> (Option<Rc<Frame>>, usize) {
        let place = match &frame {
            Some(f) => Place {
                name: f.said_as.clone(),
                text: f.text.clone(),
                base: f.base,
            },
            None => Place {
                name: Rc::from("agent-rsh"),
                text: self.source.clone(),
                base: 0,
            },
        };
        PLACE.with(|p| *p.borrow_mut() = Some(place));
        let at = AT.with(|a| a.replace(0));
        (std::mem::replace(&mut self.frame, frame), at)
    }

    fn leave(&mut self, (frame, at): (Option<Rc<Frame>>, usize)) {
        self.enter(frame);
        AT.with(|a| a.set(at));
    }

    /// A call of a function: its body in this shell, with the call's
    /// arguments as the positional parameters (`$0` stays), the prefix
    /// assignments for the call only, and the variables `local` made
    /// restored after it. The body's commands are checked as they run.
    fn call_function(
        &mut self,
        c: &SimpleCommand,
        f: &Function,
        argv: &[String],
        assigns: Vec<(String, String)>,
    ) -> R<i32> {
        const MAX_DEPTH: usize = 1000;
        if self.locals.len() >= MAX_DEPTH {
            say(&format!(
                "{}: maximum function nesting level exceeded ({MAX_DEPTH})",
                argv[0]
            ));
            return Err(Unwind::Fatal);
        }
        let saved = self.set_for_call(assigns);
        let mut p = vec![self.positional[0].clone()];
        p.extend(argv[1..].iter().cloned());
        let positional = std::mem::replace(&mut self.positional, p);
        let outer = self.enter(f.frame.clone());
        self.locals.push(Vec::new());
        let r = self.with_redirects(&c.redirects, |me| me.exec_command(&f.body, false));
        let locals = self.locals.pop().unwrap_or_default();
        self.restore(locals.into_iter().rev().chain(saved));
        self.leave(outer);
        self.positional = positional;
        let st = match r {
            Err(Unwind::Return(st)) => st,
            other => other?,
        };
        self.status = st;
        Ok(st)
    }

    /// Sets a call's prefix assignments; what they replaced, for `restore`.
    fn set_for_call(&mut self, assigns: Vec<(String, String)>) -> Vec<(String, Option<Var>)> {
        let saved = assigns
            .iter()
            .map(|(k, _)| (k.clone(), self.vars.get(k).cloned()))
            .collect();
        // Undone after the call: not exported by `set -a`.
        let allexport = std::mem::take(&mut self.opts.allexport);
        for (k, v) in assigns {
            self.set_var(&k, v);
            // Exported for the call, as bash's temporary environment is
            // (the programs a function or a sourced file runs see it).
            // IFS was screened as the shell's own, not as an export.
            if k != "IFS"
                && let Some(var) = self.vars.get_mut(&k)
            {
                var.exported = true;
            }
        }
        self.opts.allexport = allexport;
        saved
    }

    /// Puts saved variables back, in order (unset where there was none).
    fn restore(&mut self, saved: impl IntoIterator<Item = (String, Option<Var>)>) {
        for (k, old) in saved {
            match old {
                Some(v) => {
                    self.vars.insert(k, v);
                }
                None => {
                    self.vars.remove(&k);
                }
            }
        }
    }

    /// `local NAME[=VALUE]...`: in a function, the names are saved for the
    /// call's end and set (to no value without `=`).
    fn local(&mut self, c: &SimpleCommand, args: &[String], offsets: &[usize]) -> R<i32> {
        if self.locals.is_empty() {
            say("local: can only be used in a function");
            return Ok(1);
        }
        let mut st = 0;
        let mut kind = None;
        let mut export = false;
        for (i, a) in args.iter().enumerate() {
            let off = offsets.get(i + 1).copied().unwrap_or(c.offset);
            let literal = self.decl_arrays.iter().any(|(at, _, _)| *at == i + 1);
            let (n, v) = match a.split_once('=') {
                Some((n, v)) if !literal => (n.strip_suffix('+').unwrap_or(n), Some(v.to_string())),
                _ => (a.as_str(), None),
            };
            if n.starts_with('-') && v.is_none() && !literal {
                for f in n.chars() {
                    match f {
                        'a' => kind = Some(false),
                        'A' => kind = Some(true),
                        'x' => export = true,
                        _ => {}
                    }
                }
                continue;
            }
            if !crate::lex::is_identifier(n) {
                say(&format!("local: `{a}': not a valid identifier"));
                st = 1;
                continue;
            }
            if let Err(d) = verify::screen_name(&self.policy, n, off) {
                return Err(self.deny(d));
            }
            if self.readonly.contains(n) {
                say(&format!("local: {n}: readonly variable"));
                st = 1;
                continue;
            }
            let old = self.vars.get(n).cloned();
            // Already local in this call: `local NAME` keeps its value.
            let mut fresh = true;
            if let Some(scope) = self.locals.last_mut() {
                if scope.iter().any(|(k, _)| k == n) {
                    fresh = false;
                } else {
                    scope.push((n.to_string(), old.clone()));
                }
            }
            if literal || kind.is_some() {
                // A new local array (bash does not keep the outer value).
                self.vars.insert(n.to_string(), Var::default());
                st |= self.declare_one("local", i + 1, a, off, kind, export)?;
                continue;
            }
            match v {
                Some(v) => {
                    let v = if a.contains("+=") {
                        format!("{}{v}", self.var(n).unwrap_or_default())
                    } else {
                        v
                    };
                    self.set_var(n, v)
                }
                None if fresh => {
                    self.vars.insert(
                        n.to_string(),
                        Var {
                            value: None,
                            exported: old.is_some_and(|v| v.exported),
                            array: None,
                        },
                    );
                }
                None => {}
            }
            // `local -x`: screened above as an export.
            if export && let Some(var) = self.vars.get_mut(n) {
                var.exported = true;
            }
        }
        Ok(st)
    }

    /// `declare NAME` in a function: NAME becomes local to the call, as
    /// `local NAME` does (unset until `declare` gives it a value).
    fn declare_local(&mut self, arg: &str, off: usize) {
        let n = arg.split_once('=').map_or(arg, |(n, _)| n);
        let n = n.strip_suffix('+').unwrap_or(n);
        if !crate::lex::is_identifier(n) || verify::screen_name(&self.policy, n, off).is_err() {
            // `declare` itself says why.
            return;
        }
        let old = self.vars.get(n).cloned();
        if let Some(scope) = self.locals.last_mut()
            && !scope.iter().any(|(k, _)| k == n)
        {
            // An exported name stays exported, as in bash.
            let exported = old.as_ref().is_some_and(|v| v.exported);
            scope.push((n.to_string(), old));
            self.vars.insert(
                n.to_string(),
                Var {
                    exported,
                    ..Var::default()
                },
            );
        }
    }

    /// `source FILE ARGS`: the file's commands in this shell.
    fn run_source(
        &mut self,
        c: &SimpleCommand,
        name: String,
        text: String,
        args: Vec<String>,
    ) -> R<i32> {
        let saved = (!args.is_empty()).then(|| {
            let mut p = vec![self.positional[0].clone()];
            p.extend(args);
            std::mem::replace(&mut self.positional, p)
        });
        let outer_set = std::mem::take(&mut self.args_set);
        self.sourcing += 1;
        let by_caller = self.ignored_by_caller;
        self.ignored_by_caller |= self.errexit_ignored > 0;
        let r = self.with_redirects(&c.redirects, |me| me.run_text(name, text));
        self.ignored_by_caller = by_caller;
        self.sourcing -= 1;
        // Outside a function, parameters the file set with `set --` stay.
        let keep = self.args_set && self.locals.is_empty();
        self.args_set |= outer_set;
        if let Some(p) = saved
            && !keep
        {
            self.positional = p;
        }
        match r {
            Err(Unwind::Return(st)) => Ok(st),
            other => other,
        }
    }

    /// A new shell running a script: a copy of this one with only the
    /// exported variables, default options, and its own positional
    /// parameters.
    fn run_shell(
        &mut self,
        c: &SimpleCommand,
        argv: &[String],
        shell: NewShell,
        tail: bool,
    ) -> R<i32> {
        let started = Instant::now();
        let pid = if tail && self.child { 0 } else { self.fork()? };
        if pid == 0 {
            let r = self.shell_child(c, shell);
            self.child_exit(r);
        }
        let raw = wait_pid(pid);
        self.report(
            serde_json::json!({ "b": argv, "o": c.offset, "c": status_of(raw), "t": now_ns() }),
        );
        let _ = started;
        self.check_denied()?;
        Ok(status_of(raw))
    }

    fn shell_child(&mut self, c: &SimpleCommand, shell: NewShell) -> R<i32> {
        if !self.apply_redirects(&c.redirects, None)? {
            return Ok(1);
        }
        if std::mem::take(&mut self.stderr_to_pipe) {
            dup2(1, 2);
        }
        self.start_shell(shell)
    }

    /// A new shell in this process: its text (standard input when none),
    /// the exported variables, default options, its parameters.
    fn start_shell(&mut self, shell: NewShell) -> R<i32> {
        let text = match shell.text {
            Some(t) => t,
            None => {
                let mut buf = Vec::new();
                let max = self.policy.max_command_bytes as u64 + 1;
                // SAFETY: fd 0 is only borrowed: ManuallyDrop never closes it.
                let stdin = std::mem::ManuallyDrop::new(unsafe {
                    <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(0)
                });
                let _ =
                    std::io::Read::read_to_end(&mut std::io::Read::take(&*stdin, max), &mut buf);
                String::from_utf8_lossy(&buf).into_owned()
            }
        };
        self.vars.retain(|_, v| v.exported);
        // bash sets IFS and OPTIND itself, whatever the environment holds.
        for (k, v) in [("IFS", " \t\n"), ("OPTIND", "1")] {
            self.vars.insert(
                k.into(),
                Var {
                    value: Some(v.into()),
                    exported: false,
                    array: None,
                },
            );
        }
        self.getopts_at = (0, 1);
        for (k, v) in shell.assigns {
            self.vars.insert(
                k,
                Var {
                    value: Some(v),
                    exported: true,
                    array: None,
                },
            );
        }
        self.opts = Options::default();
        if !shell.set.is_empty() {
            match options::parse_set(&shell.set) {
                Ok(changes) => self.opts.apply(&changes),
                Err((_, d)) => {
                    self.refuse_in(&shell.name, "", &d);
                    return Ok(2);
                }
            }
        }
        self.loop_depth = 0;
        self.errexit_ignored = 0;
        self.ignored_by_caller = false;
        self.sourcing = 0;
        self.args_set = false;
        // The top level of a shell of its own.
        self.subshell = false;
        self.script_file = shell.file;
        // A new shell knows no function of its parent's (bash's `export -f`
        // is not supported).
        self.functions.clear();
        self.locals.clear();
        // Nor its traps or jobs (ignored signals stay ignored).
        self.new_shell_traps();
        self.positional = shell.positional;
        self.run_text(shell.name, text)
    }

    fn resolve(&mut self, name: &str) -> Result<PathBuf, Denial> {
        resolve_cached(&self.policy, &mut self.cache, name)
    }

    // ---- builtins ----

    fn out(&self, text: &str) {
        write_fd(1, text.as_bytes());
    }

    fn builtin(&mut self, c: &SimpleCommand, argv: &[String], offsets: &[usize]) -> R<i32> {
        let args = &argv[1..];
        let deny_at = |me: &mut Self, d: Denial, i: usize| {
            let mut d = d.at_arg(i);
            d.offset = offsets.get(i).copied().or(Some(c.offset));
            me.deny(d)
        };
        Ok(match argv[0].as_str() {
            ":" | "true" => 0,
            "wait" => return self.wait_builtin(args),
            "trap" => self.trap_builtin(args),
            "return" => {
                let code = match args.first() {
                    None => self.status,
                    Some(a) => match a.trim().parse::<i64>() {
                        Ok(n) => (n & 0xff) as i32,
                        Err(_) => {
                            say(&format!("return: {a}: numeric argument required"));
                            2
                        }
                    },
                };
                if self.sourcing == 0 && self.locals.is_empty() {
                    say("return: can only `return' from a function or sourced script");
                    // bash's usage status.
                    return Ok(2);
                }
                return Err(Unwind::Return(code));
            }
            "shift" => {
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.parse::<usize>() {
                        Ok(n) => n,
                        Err(_) => {
                            say(&format!("shift: {a}: numeric argument required"));
                            return Ok(1);
                        }
                    },
                };
                if n >= self.positional.len() {
                    return Ok(1);
                }
                self.positional.drain(1..=n);
                0
            }
            "false" => 1,
            "pwd" => {
                let line = format!("{}\n", self.cwd.display());
                self.out(&line);
                0
            }
            "cd" => {
                let args: Vec<&String> = args.iter().filter(|a| *a != "--").collect();
                if args.len() > 1 {
                    say("cd: too many arguments");
                    return Ok(1);
                }
                let (target, print) = match args.first().map(|s| s.as_str()) {
                    None => (self.workspace.display().to_string(), false),
                    Some("-") => match self.var("OLDPWD") {
                        Some(o) => (o, true),
                        None => {
                            say("cd: OLDPWD not set");
                            return Ok(1);
                        }
                    },
                    Some(t) => (t.to_string(), false),
                };
                let logical = verify::normalize(&self.cwd.join(&target));
                // The workspace, or the run's own /tmp.
                let tmp = self.private_tmp;
                let allowed =
                    |p: &Path| p.starts_with(&self.workspace) || tmp && p.starts_with("/tmp");
                let inside = logical.as_ref().is_some_and(|p| allowed(p));
                let Some(logical) = logical.filter(|_| inside) else {
                    let host_tmp = verify::normalize(&self.cwd.join(&target))
                        .is_some_and(|p| p.starts_with("/tmp"));
                    let d = if host_tmp {
                        Denial::new(
                            "cd.outside",
                            format!("`cd {target}` leaves the workspace for the host's /tmp"),
                            verify::tmp_hint(&self.policy),
                        )
                    } else {
                        Denial::new(
                            "cd.outside",
                            format!("`cd {target}` leaves the workspace"),
                            "stay inside the workspace; give a directory relative to it",
                        )
                    };
                    return Err(deny_at(self, d, 1));
                };
                let p = CString::new(logical.as_os_str().as_bytes()).unwrap_or_default();
                // SAFETY: chdir with a NUL-terminated path.
                if unsafe { libc::chdir(p.as_ptr()) } != 0 {
                    say(&format!("cd: {target}: {}", errno_text(last_errno())));
                    return Ok(1);
                }
                // A symlink out of the workspace is not followed.
                let real_ok = std::fs::canonicalize(&logical).is_ok_and(|r| allowed(&r));
                if !real_ok {
                    let back = CString::new(self.cwd.as_os_str().as_bytes()).unwrap_or_default();
                    // SAFETY: chdir back to where we were.
                    unsafe { libc::chdir(back.as_ptr()) };
                    let d = Denial::new(
                        "cd.outside",
                        format!("`cd {target}` leads out of the workspace"),
                        "stay inside the workspace; symlinks out of it are not followed",
                    );
                    return Err(deny_at(self, d, 1));
                }
                let old = std::mem::replace(&mut self.cwd, logical);
                self.fs.cwd = self.cwd.display().to_string();
                self.set_var("OLDPWD", old.display().to_string());
                let pwd = self.cwd.display().to_string();
                self.set_var("PWD", pwd.clone());
                if print {
                    self.out(&format!("{pwd}\n"));
                }
                0
            }
            "export" | "unset" => {
                let mut st = 0;
                let mut functions = false;
                for (i, a) in args.iter().enumerate() {
                    if argv[0] == "unset" && a == "-v" {
                        continue;
                    }
                    if argv[0] == "unset" && a == "-f" {
                        functions = true;
                        continue;
                    }
                    if functions {
                        self.functions.remove(a);
                        continue;
                    }
                    let (n, v) = match a.split_once('=') {
                        Some((n, v)) if argv[0] == "export" => (n, Some(v)),
                        _ => (a.as_str(), None),
                    };
                    if argv[0] == "unset"
                        && let Some((name, sub)) = a.split_once('[')
                        && let Some(sub) = sub.strip_suffix(']')
                        && crate::lex::is_identifier(name)
                    {
                        // `unset 'a[i]'`: one element (`a[@]`: all).
                        let off = offsets.get(i + 1).copied().unwrap_or(c.offset);
                        if let Err(d) = verify::screen_shell_name(&self.policy, name, off) {
                            return Err(self.deny(d));
                        }
                        if self.readonly.contains(name) {
                            say(&format!("unset: {name}: cannot unset: readonly variable"));
                            st = 1;
                            continue;
                        }
                        if sub == "@" || sub == "*" {
                            self.vars.remove(name);
                            continue;
                        }
                        let key = if self.is_assoc(name) {
                            expand::Key::Name(sub.to_string())
                        } else {
                            expand::Key::Index(
                                self.expand_result(|sh| expand::arith_text(sub, sh))?,
                            )
                        };
                        let Some(var) = self.vars.get_mut(name) else {
                            continue;
                        };
                        match (&mut var.array, key) {
                            (Some(Array::Assoc(m)), k) => {
                                m.remove(&k.to_string());
                            }
                            (Some(Array::Indexed(m)), expand::Key::Index(k)) => {
                                let last = m.keys().next_back().copied();
                                match absolute_index(k, last) {
                                    Ok(k) => {
                                        m.remove(&k);
                                    }
                                    Err(_) => {
                                        say(&format!("unset: [{k}]: bad array subscript"));
                                        st = 1;
                                    }
                                }
                            }
                            (None, expand::Key::Index(0)) => {
                                self.vars.remove(name);
                            }
                            _ => {}
                        }
                        continue;
                    }
                    if !crate::lex::is_identifier(n) {
                        say(&format!("{}: `{a}': not a valid identifier", argv[0]));
                        st = 1;
                        continue;
                    }
                    let off = offsets.get(i + 1).copied().unwrap_or(c.offset);
                    let screened = if argv[0] == "unset" {
                        verify::screen_shell_name(&self.policy, n, off)
                    } else {
                        verify::screen_name(&self.policy, n, off)
                    };
                    if let Err(d) = screened {
                        return Err(self.deny(d));
                    }
                    if argv[0] == "unset" {
                        if self.readonly.contains(n) {
                            say(&format!("unset: {n}: cannot unset: readonly variable"));
                            st = 1;
                        } else {
                            self.vars.remove(n);
                        }
                        continue;
                    }
                    // A read-only name is exported all the same, without
                    // the value (as bash does).
                    let v = match v {
                        Some(_) if self.readonly.contains(n) => {
                            if let r @ Unwind::Exit(_) = self.readonly_failed(n, Unwind::Failed(1))
                            {
                                return Err(r);
                            }
                            st = 1;
                            None
                        }
                        v => v,
                    };
                    let var = self.vars.entry(n.to_string()).or_insert(Var {
                        value: None,
                        exported: true,
                        array: None,
                    });
                    var.exported = true;
                    if let Some(v) = v {
                        var.value = Some(v.to_string());
                    }
                }
                st
            }
            "set" => {
                let (opts, positional) = options::split_set(args);
                if !opts.is_empty() || positional.is_none() {
                    match options::parse_set(opts) {
                        Ok(changes) => self.opts.apply(&changes),
                        Err((i, d)) => return Err(deny_at(self, d, i + 1)),
                    }
                }
                if let Some(p) = positional {
                    // `set -- ARGS`: the new positional parameters.
                    self.positional.truncate(1);
                    self.positional.extend(p.iter().cloned());
                    self.args_set = true;
                }
                0
            }
            "exit" => {
                let code = match args.first() {
                    // In a trap: the status before the trap, as in bash.
                    None if self.in_trap => self.trap_status,
                    None => self.status,
                    Some(a) => match a.trim().parse::<i64>() {
                        Ok(n) => (n & 0xff) as i32,
                        Err(_) => {
                            say(&format!("exit: {a}: numeric argument required"));
                            2
                        }
                    },
                };
                return Err(Unwind::Exit(code));
            }
            "break" | "continue" => {
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.parse::<u32>() {
                        Ok(n) if n >= 1 => n,
                        _ => {
                            say(&format!("{}: {a}: loop count out of range", argv[0]));
                            return Ok(1);
                        }
                    },
                };
                if self.loop_depth == 0 {
                    return Ok(0);
                }
                let n = n.min(self.loop_depth);
                return Err(if argv[0] == "break" {
                    Unwind::Break(n)
                } else {
                    Unwind::Continue(n)
                });
            }
            _ => return self.more_builtin(c, argv, offsets),
        })
    }
}

/// The file a path names from `cwd`, when its real path is a regular file
/// in the workspace: one of the project's own programs.
fn own_file(workspace: &Path, cwd: &Path, name: &str) -> Option<PathBuf> {
    let real = std::fs::canonicalize(cwd.join(name)).ok()?;
    (real.starts_with(workspace) && real.is_file()).then_some(real)
}

fn resolve_cached(
    policy: &Policy,
    cache: &mut HashMap<String, Result<PathBuf, Denial>>,
    name: &str,
) -> Result<PathBuf, Denial> {
    if let Some(r) = cache.get(name) {
        return r.clone();
    }
    let r = check::resolve(policy, name);
    cache.insert(name.to_string(), r.clone());
    r
}

/// Puts `opened` at `target`, inheritable by programs.
fn install(opened: RawFd, target: RawFd) {
    if opened == target {
        // SAFETY: clear close-on-exec on our own fd.
        unsafe { libc::fcntl(target, libc::F_SETFD, 0) };
    } else {
        dup2(opened, target);
    }
}

fn is_assignment_word(w: &Word) -> bool {
    matches!(w.parts.first(), Some(Part::Lit(t)) if t.find('=').is_some_and(|i| crate::lex::is_identifier(&t[..i])))
}

impl Shell for Interp<'_> {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).and_then(Var::scalar)
    }

    fn is_assoc(&self, name: &str) -> bool {
        self.vars
            .get(name)
            .is_some_and(|v| matches!(v.array, Some(Array::Assoc(_))))
    }

    fn element(
        &self,
        name: &str,
        key: &expand::Key,
    ) -> Result<Option<String>, expand::BadSubscript> {
        // A negative index counts back from the end of an array; bash
        // has none to count from in a scalar or an unset name.
        let negative = matches!(key, expand::Key::Index(i) if *i < 0);
        let Some(v) = self.vars.get(name) else {
            return if negative {
                Err(expand::BadSubscript)
            } else {
                Ok(None)
            };
        };
        match (&v.array, key) {
            (Some(Array::Assoc(m)), k) => Ok(m.get(&k.to_string()).cloned()),
            (_, &expand::Key::Index(i)) => match &v.array {
                Some(Array::Indexed(m)) => {
                    let last = m.keys().next_back().copied();
                    Ok(m.get(&absolute_index(i, last)?).cloned())
                }
                _ if negative => Err(expand::BadSubscript),
                _ => Ok(if i == 0 { v.value.clone() } else { None }),
            },
            (_, expand::Key::Name(_)) => Ok(None),
        }
    }

    fn elements(&self, name: &str) -> Option<Vec<(expand::Key, String)>> {
        let v = self.vars.get(name)?;
        match &v.array {
            Some(Array::Indexed(m)) => Some(
                m.iter()
                    .map(|(k, v)| (expand::Key::Index(*k), v.clone()))
                    .collect(),
            ),
            Some(Array::Assoc(m)) => Some(
                m.iter()
                    .map(|(k, v)| (expand::Key::Name(k.clone()), v.clone()))
                    .collect(),
            ),
            None => v.value.clone().map(|s| vec![(expand::Key::Index(0), s)]),
        }
    }

    fn set_element(
        &mut self,
        name: &str,
        key: expand::Key,
        value: String,
    ) -> Result<(), ExpandError> {
        let exported = self.opts.allexport || self.vars.get(name).is_some_and(|v| v.exported);
        verify::screen_bare_name(&self.policy, name, 0, exported).map_err(ExpandError::Denied)?;
        self.put_element(name, key, value)
            .map_err(|m| ExpandError::Arith(m.0))
    }

    fn warn(&mut self, msg: &str) {
        say(msg);
        // bash ends a shell under `set -e` at a bad subscript, before the
        // command runs and whatever the context (`||`, `if`).
        if self.opts.errexit && msg.ends_with(": bad array subscript") {
            self.exit_now = true;
        }
    }

    fn set_var(&mut self, name: &str, value: String) -> Result<(), ExpandError> {
        if let Some(m) = self.read_only(name) {
            self.exit_now = self.opts.errexit && !self.ignored_by_caller;
            return Err(ExpandError::Arith(m));
        }
        // `${NAME:=value}` assigns as a bare assignment does.
        let exported = self.opts.allexport || self.vars.get(name).is_some_and(|v| v.exported);
        verify::screen_bare_name(&self.policy, name, 0, exported).map_err(ExpandError::Denied)?;
        Interp::set_var(self, name, value);
        Ok(())
    }

    fn last_status(&self) -> i32 {
        self.status
    }

    fn pid(&self) -> u32 {
        self.top_pid
    }

    fn last_background(&self) -> Option<u32> {
        self.last_bg.map(|p| p as u32)
    }

    fn noglob(&self) -> bool {
        self.opts.noglob
    }

    fn nounset(&self) -> bool {
        self.opts.nounset
    }

    fn positional(&self) -> &[String] {
        &self.positional
    }

    fn process_subst(&mut self, body: &List, output: bool) -> Result<String, ExpandError> {
        self.start_process_subst(body, output)
    }

    fn command_output(&mut self, body: &List) -> Result<String, ExpandError> {
        let (r, w) = pipe().map_err(|e| ExpandError::Fatal(format!("pipe: {}", errno_text(e))))?;
        let pid = match self.fork() {
            Ok(p) => p,
            Err(_) => {
                close(r);
                close(w);
                return Err(ExpandError::Fatal("cannot fork".into()));
            }
        };
        if pid == 0 {
            close(r);
            dup2(w, 1);
            close(w);
            // bash does not pass -e into command substitutions.
            self.opts.errexit = false;
            self.subst_depth += 1;
            self.stderr_to_pipe = false;
            let res = self.exec_list(body);
            self.child_exit(res);
        }
        close(w);
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: read into a stack buffer.
            let n = unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                out.extend_from_slice(&buf[..n as usize]);
            } else if n == 0 || last_errno() != libc::EINTR {
                break;
            }
        }
        close(r);
        let st = status_of(wait_pid(pid));
        self.subst_status = Some(st);
        self.status = st;
        if self.denied() {
            return Err(ExpandError::Stopped);
        }
        // bash drops NUL bytes from substitutions.
        out.retain(|b| *b != 0);
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn dirs(&mut self) -> &mut dyn glob::Dirs {
        &mut self.fs
    }
}

/// A negative index counts back from past the last index.
fn absolute_index(i: i64, last: Option<i64>) -> Result<i64, expand::BadSubscript> {
    if i >= 0 {
        return Ok(i);
    }
    // last + 1 + i, without overflow: i + 1 is at most 0.
    match last.map(|l| l + (i + 1)) {
        Some(a) if a >= 0 => Ok(a),
        _ => Err(expand::BadSubscript),
    }
}

/// The elements of `NAME=(...)` before they are stored: a subscript's
/// text (None: the next index) and the value.
type ArrayItems = Vec<(Option<String>, String)>;

impl Interp<'_> {
    fn var(&self, name: &str) -> Option<String> {
        Shell::var(self, name)
    }

    /// Sets one element (the name screened already); the message of
    /// bash's error otherwise.
    fn put_element(
        &mut self,
        name: &str,
        key: expand::Key,
        value: String,
    ) -> Result<(), ShellError> {
        if let Some(m) = self.read_only(name) {
            return Err(m.into());
        }
        let var = self.vars.entry(name.to_string()).or_default();
        if var.array.is_none() {
            let mut m = std::collections::BTreeMap::new();
            if let Some(v) = var.value.take() {
                m.insert(0, v);
            }
            var.array = Some(Array::Indexed(m));
        }
        let full = || {
            format!(
                "{name}: an array holds at most {} elements",
                expand::MAX_ARRAY_ELEMENTS
            )
        };
        match (var.array.as_mut(), key) {
            (Some(Array::Assoc(m)), k) => {
                let k = k.to_string();
                if !m.contains_key(&k) && m.len() >= expand::MAX_ARRAY_ELEMENTS {
                    return Err(full().into());
                }
                m.insert(k, value);
            }
            (Some(Array::Indexed(m)), expand::Key::Index(i)) => {
                let last = m.keys().next_back().copied();
                let Ok(i) = absolute_index(i, last) else {
                    return Err(format!("{name}[{i}]: bad array subscript").into());
                };
                if !m.contains_key(&i) && m.len() >= expand::MAX_ARRAY_ELEMENTS {
                    return Err(full().into());
                }
                m.insert(i, value);
            }
            (_, k) => return Err(format!("{name}[{k}]: bad array subscript").into()),
        }
        Ok(())
    }

    /// bash's message when NAME is read-only (`readonly`).
    fn read_only(&self, name: &str) -> Option<String> {
        self.readonly
            .contains(name)
            .then(|| format!("{name}: readonly variable"))
    }

    /// An assignment to a read-only name: bash's message, then under
    /// `set -e` the end of the shell with 1 whatever the context (`||`,
    /// `if`) unless a file was sourced in such a context, else
    /// `otherwise`.
    fn readonly_failed(&mut self, name: &str, otherwise: Unwind) -> Unwind {
        say(&self.read_only(name).unwrap_or_default());
        if self.opts.errexit && !self.ignored_by_caller {
            Unwind::Exit(1)
        } else {
            otherwise
        }
    }

    fn set_var(&mut self, name: &str, value: String) {
        // `set -a`: what is assigned is exported (every caller screened
        // the name as an export then).
        if self.opts.allexport
            && let Some(v) = self.vars.get_mut(name)
        {
            v.exported = true;
        }
        match self.vars.get_mut(name) {
            Some(Var { array: Some(a), .. }) => match a {
                Array::Indexed(m) => {
                    m.insert(0, value);
                }
                Array::Assoc(m) => {
                    m.insert("0".into(), value);
                }
            },
            Some(v) => v.value = Some(value),
            None => {
                self.vars.insert(
                    name.to_string(),
                    Var {
                        value: Some(value),
                        exported: self.opts.allexport,
                        array: None,
                    },
                );
            }
        }
    }
}

/// Whether `program` is agent-rsh itself: the mount view's shells are its
/// binary, and a nested interpreter adds each command's network layer
/// itself (a layer for `sh` would bound every command it runs).
fn is_own_binary(program: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::metadata(program),
        std::fs::metadata("/proc/self/exe"),
    ) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
