//! Asynchronous commands (`&`, `$!`, `wait`) and traps (`trap`), as bash
//! runs them in a non-interactive shell.
//!
//! `CMD &` forks a copy of the shell that runs CMD; its commands are
//! checked as they run, exactly as in the foreground, and a refused one
//! fails with 126 and is listed in the RunResult's `refusals` (the script
//! in front goes on, as it would with any failing background command).
//! Its standard input is `/dev/null` and it ignores SIGINT and SIGQUIT, as
//! bash does without job control. Jobs still running when the script
//! ends are not waited for; the run ends with the script, and the run's
//! PID namespace (or its guardian) ends them.
//!
//! Traps: `EXIT` runs when the shell ends (the end of the script, `exit`,
//! `set -e`, a fatal expansion error), `ERR` when a command fails where
//! `set -e` would stop (not inside functions, as bash without `-E`), and
//! the signals below run their commands between commands, or end a
//! `wait` early, as bash does. A forked copy of the shell (a subshell, a
//! pipeline stage, a command substitution, a background job) starts with
//! no traps, signals ignored with `trap '' SIG` staying ignored.

use super::ShellError;
use super::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// Signals whose traps are run, as (number, name without `SIG`).
const SIGNALS: &[(i32, &str)] = &[
    (libc::SIGHUP, "HUP"),
    (libc::SIGINT, "INT"),
    (libc::SIGQUIT, "QUIT"),
    (libc::SIGUSR1, "USR1"),
    (libc::SIGUSR2, "USR2"),
    (libc::SIGPIPE, "PIPE"),
    (libc::SIGALRM, "ALRM"),
    (libc::SIGTERM, "TERM"),
];

/// Jobs remembered at most (their statuses for `wait PID`).
const MAX_JOBS: usize = 4096;

/// Trapped signals received and not yet handled, one bit per signal.
static PENDING: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if (0..64).contains(&sig) {
        PENDING.fetch_or(1u64 << sig, Ordering::SeqCst);
    }
}

/// How a signal is handled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Disposition {
    Default,
    Ignore,
    Catch,
}

fn set_disposition(sig: i32, d: Disposition) {
    // SAFETY: sigaction with a handler that only touches an atomic; no
    // SA_RESTART, so a trapped signal interrupts `wait`.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = match d {
            Disposition::Default => libc::SIG_DFL,
            Disposition::Ignore => libc::SIG_IGN,
            Disposition::Catch => on_signal as extern "C" fn(libc::c_int) as usize,
        };
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Blocks the signals a trap may catch; the mask before, for
/// `restore_mask`.
pub(super) fn block_trapped() -> libc::sigset_t {
    // SAFETY: sigset operations on stack values; sigprocmask in a
    // single-threaded process.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for (sig, _) in SIGNALS {
            libc::sigaddset(&mut set, *sig);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old);
        old
    }
}

pub(super) fn restore_mask(old: &libc::sigset_t) {
    // SAFETY: as above.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// A background job this shell started.
pub(super) struct BgJob {
    /// bash's job number (`%N`).
    number: usize,
    pid: i32,
    started: Instant,
    /// The wait status once reaped.
    raw: Option<i32>,
    /// A `>(...)` list: the top-level shell waits for it before the run
    /// ends (procsub.rs).
    writer: bool,
}

/// The shell's traps: the commands, as given (`""` ignores).
#[derive(Default, Clone)]
pub(super) struct Traps {
    exit: Option<String>,
    err: Option<String>,
    signals: Vec<(i32, String)>,
    /// In a subshell: the parent's traps, which `trap` and `trap -p` show
    /// (they do not run) until a trap is set or reset, as in bash, so
    /// `$(trap -p)` and `trap -p | ...` see the shell's traps.
    inherited: Option<Box<Traps>>,
}

/// What a `trap` argument names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Exit,
    Err,
    Signal(i32),
}

fn condition(spec: &str) -> Result<Condition, ShellError> {
    let up = spec.to_ascii_uppercase();
    let bare = up.strip_prefix("SIG").unwrap_or(&up);
    if bare == "EXIT" || spec == "0" {
        return Ok(Condition::Exit);
    }
    if up == "ERR" {
        return Ok(Condition::Err);
    }
    if let Some((n, _)) = SIGNALS
        .iter()
        .find(|(n, name)| *name == bare || spec.parse::<i32>().ok() == Some(*n))
    {
        return Ok(Condition::Signal(*n));
    }
    let known = matches!(bare, "DEBUG" | "RETURN" | "KILL" | "STOP" | "CHLD" | "CONT")
        || spec.parse::<u32>().is_ok_and(|n| n < 65)
        || signal_number(bare).is_some();
    if known {
        let supported: Vec<&str> = SIGNALS.iter().map(|(_, n)| *n).collect();
        return Err(format!(
            "{spec}: agent-rsh runs traps for EXIT, ERR, {} only",
            supported.join(", ")
        )
        .into());
    }
    Err(format!("{spec}: invalid signal specification").into())
}

/// Other signal names bash knows, for a message that says what is
/// supported rather than that the name is wrong.
fn signal_number(bare: &str) -> Option<i32> {
    Some(match bare {
        "ILL" => libc::SIGILL,
        "TRAP" => libc::SIGTRAP,
        "ABRT" | "IOT" => libc::SIGABRT,
        "BUS" => libc::SIGBUS,
        "FPE" => libc::SIGFPE,
        "SEGV" => libc::SIGSEGV,
        "STKFLT" => libc::SIGSTKFLT,
        "TSTP" => libc::SIGTSTP,
        "TTIN" => libc::SIGTTIN,
        "TTOU" => libc::SIGTTOU,
        "URG" => libc::SIGURG,
        "XCPU" => libc::SIGXCPU,
        "XFSZ" => libc::SIGXFSZ,
        "VTALRM" => libc::SIGVTALRM,
        "PROF" => libc::SIGPROF,
        "WINCH" => libc::SIGWINCH,
        "IO" | "POLL" => libc::SIGIO,
        "PWR" => libc::SIGPWR,
        "SYS" => libc::SIGSYS,
        _ => return None,
    })
}

fn signal_name(sig: i32) -> String {
    SIGNALS
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or_else(|| sig.to_string(), |(_, name)| format!("SIG{name}"))
}

/// bash's quoting of a trap's commands in `trap -p`.
fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Interp<'_> {
    // ---- asynchronous commands ----

    /// `AND_OR &`: a forked copy of the shell runs it; the status is 0.
    pub(super) fn exec_background(&mut self, ao: &AndOr) -> R<i32> {
        self.sweep_jobs();
        let started = Instant::now();
        let pid = self.fork()?;
        if pid == 0 {
            self.background = true;
            // bash without job control: stdin is /dev/null (the command's
            // own redirections come after), SIGINT and SIGQUIT ignored.
            // SAFETY: open/dup2/close on this process's fds.
            unsafe {
                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    dup2(fd, 0);
                    close(fd);
                }
            }
            for sig in [libc::SIGINT, libc::SIGQUIT] {
                set_disposition(sig, Disposition::Ignore);
            }
            // One command alone is this process (exec'd in place when it
            // is a program), so `kill $!` reaches it, as in bash.
            let r = match (&ao.rest[..], &ao.first) {
                ([], p) if p.stages.len() == 1 && !p.negated => {
                    match self.exec_command(&p.stages[0].command, true) {
                        Err(Unwind::Refused) => Ok(126),
                        r => r,
                    }
                }
                _ => self.exec_and_or_now(ao),
            };
            self.child_exit(r);
        }
        let number = self.jobs.iter().map(|j| j.number).max().unwrap_or(0) + 1;
        self.remember_job(number, pid, started, false);
        self.status = 0;
        Ok(0)
    }

    fn remember_job(&mut self, number: usize, pid: i32, started: Instant, writer: bool) {
        self.jobs.push(BgJob {
            number,
            pid,
            started,
            raw: None,
            writer,
        });
        if self.jobs.len() > MAX_JOBS {
            // Forget the oldest reaped job.
            if let Some(i) = self.jobs.iter().position(|j| j.raw.is_some()) {
                self.jobs.remove(i);
            }
        }
        self.last_bg = Some(pid);
    }

    /// A process substitution's list (procsub.rs) is a job without a
    /// number, as in bash: `$!`, `wait` and `wait PID` know it, `jobs`
    /// and `%N` do not.
    pub(super) fn adopt_process_subst(&mut self, pid: i32, writer: bool) {
        self.sweep_jobs();
        self.remember_job(0, pid, Instant::now(), writer);
    }

    /// Reaps the process substitutions (and jobs) that have ended.
    pub(super) fn sweep_process_substs(&mut self) {
        self.sweep_jobs();
    }

    /// Whether a `>(...)` list of this shell's is still running.
    pub(super) fn writers_running(&mut self) -> bool {
        self.sweep_jobs();
        self.jobs.iter().any(|j| j.writer && j.raw.is_none())
    }

    /// Waits for the `>(...)` lists still running (a trapped signal ends
    /// the wait).
    pub(super) fn wait_process_subst_writers(&mut self) {
        for i in 0..self.jobs.len() {
            if self.jobs[i].writer && self.wait_job(i).is_err() {
                return;
            }
        }
    }

    /// Reaps the jobs that have ended, keeping their statuses, so that a
    /// loop of `&` leaves no zombies behind.
    fn sweep_jobs(&mut self) {
        for i in 0..self.jobs.len() {
            if self.jobs[i].raw.is_some() {
                continue;
            }
            let mut st = 0;
            let pid = self.jobs[i].pid;
            // SAFETY: waitpid on our own child, without blocking.
            if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
                self.reaped(i, st);
            }
        }
    }

    fn reaped(&mut self, i: usize, raw: i32) {
        let (pid, started) = (self.jobs[i].pid, self.jobs[i].started);
        self.jobs[i].raw = Some(raw);
        self.report_end(pid, raw, started);
    }

    /// Waits for job `i`; its status.
    fn wait_job(&mut self, i: usize) -> Result<i32, i32> {
        if let Some(raw) = self.jobs[i].raw {
            return Ok(status_of(raw));
        }
        let pid = self.jobs[i].pid;
        let mut st = 0;
        loop {
            // SAFETY: waitpid on our own child.
            let r = unsafe { libc::waitpid(pid, &mut st, 0) };
            if r == pid {
                self.reaped(i, st);
                return Ok(status_of(st));
            }
            let e = last_errno();
            if r < 0 && e == libc::EINTR {
                if let Some(sig) = self.trapped_pending() {
                    return Err(128 + sig);
                }
                continue;
            }
            // Not our child any more (cannot happen): as if it exited 127.
            self.jobs[i].raw = Some(127 << 8);
            return Ok(127);
        }
    }

    /// The first pending signal that has a trap to run.
    fn trapped_pending(&self) -> Option<i32> {
        let bits = PENDING.load(Ordering::SeqCst);
        self.traps
            .signals
            .iter()
            .find(|(sig, t)| !t.is_empty() && bits & (1u64 << sig) != 0)
            .map(|(sig, _)| *sig)
    }

    /// `wait`, `wait PID|%N...`, `wait -n`.
    pub(super) fn wait_builtin(&mut self, args: &[String]) -> R<i32> {
        let mut any = false;
        let mut ids = Vec::new();
        let mut opts = true;
        for a in args {
            if opts && a == "--" {
                opts = false;
            } else if opts && a == "-n" {
                any = true;
            } else if opts && a.starts_with('-') && a.len() > 1 && a.parse::<i64>().is_err() {
                say(&format!("wait: {a}: invalid option"));
                say("wait: usage: wait [-n] [id ...]");
                return Ok(2);
            } else {
                opts = false;
                ids.push(a.clone());
            }
        }
        if any {
            return Ok(self.wait_any());
        }
        if ids.is_empty() {
            for i in 0..self.jobs.len() {
                if let Err(st) = self.wait_job(i) {
                    return Ok(st);
                }
            }
            // bash forgets them all.
            self.jobs.clear();
            return Ok(0);
        }
        let mut st = 0;
        for id in ids {
            let found = if let Some(spec) = id.strip_prefix('%') {
                let numbered = || self.jobs.iter().rev().filter(|j| j.number != 0);
                let n = match spec {
                    "" | "%" | "+" => numbered().next().map(|j| j.number),
                    "-" => numbered().nth(1).map(|j| j.number),
                    n => n.parse::<usize>().ok(),
                };
                let i = n.and_then(|n| self.jobs.iter().position(|j| j.number == n));
                if i.is_none() {
                    say(&format!("wait: {id}: no such job"));
                    st = 127;
                    continue;
                }
                i.map(|i| (i, true))
            } else {
                let Ok(pid) = id.parse::<i32>() else {
                    say(&format!("wait: `{id}': not a pid or valid job spec"));
                    st = 1;
                    continue;
                };
                self.jobs
                    .iter()
                    .position(|j| j.pid == pid)
                    .map(|i| (i, false))
            };
            let Some((i, by_number)) = found else {
                say(&format!("wait: pid {id} is not a child of this shell"));
                st = 127;
                continue;
            };
            st = match self.wait_job(i) {
                Ok(s) => s,
                Err(s) => return Ok(s),
            };
            if by_number {
                // A job waited for by its number leaves the table (bash
                // still knows its pid's status).
                self.jobs[i].number = 0;
            }
        }
        Ok(st)
    }

    /// `wait -n`: the next job to end (one that has ended already first).
    fn wait_any(&mut self) -> i32 {
        loop {
            if let Some(i) = self
                .jobs
                .iter()
                .position(|j| j.number != 0 && j.raw.is_some())
            {
                let st = status_of(self.jobs[i].raw.unwrap_or(0));
                self.jobs[i].number = 0;
                return st;
            }
            if !self.jobs.iter().any(|j| j.raw.is_none()) {
                return 127;
            }
            // Block until one of our children ends, without reaping it.
            // SAFETY: waitid into a zeroed siginfo.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r =
                unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if r < 0 {
                if last_errno() == libc::EINTR {
                    if let Some(sig) = self.trapped_pending() {
                        return 128 + sig;
                    }
                    continue;
                }
                return 127;
            }
            // SAFETY: waitid filled in a child's pid.
            let pid = unsafe { info.si_pid() };
            let mut st = 0;
            // SAFETY: reaping the child waitid reported.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            if let Some(i) = self.jobs.iter().position(|j| j.pid == pid) {
                self.reaped(i, st);
            }
        }
    }

    /// `jobs -p`: the pids of the jobs in the table; `jobs` lists nothing
    /// (bash's lines are its own notation of the job's state).
    pub(super) fn jobs_builtin(&mut self, args: &[String]) -> i32 {
        if args.iter().any(|a| a == "-p") {
            self.sweep_jobs();
            let mut out = String::new();
            for j in self.jobs.iter().filter(|j| j.number != 0) {
                out.push_str(&format!("{}\n", j.pid));
            }
            self.out(&out);
        }
        0
    }

    /// In a forked copy of the shell: no jobs of its own, no traps but
    /// the ignored signals.
    pub(super) fn forked(&mut self) {
        self.jobs.clear();
        // A subshell of a subshell that set no trap shows the same.
        if self.traps.inherited.is_none() {
            self.traps.inherited = Some(Box::new(self.traps.clone()));
        }
        self.traps.exit = None;
        self.traps.err = None;
        let traps = std::mem::take(&mut self.traps.signals);
        for (sig, t) in traps {
            if t.is_empty() {
                self.traps.signals.push((sig, t));
            } else {
                set_disposition(sig, Disposition::Default);
            }
        }
        PENDING.store(0, Ordering::SeqCst);
    }

    /// A new shell (a script, `sh -c`) in this process: as a fork, and
    /// it shows no trap of its parent's.
    pub(super) fn new_shell_traps(&mut self) {
        self.forked();
        self.traps.inherited = None;
    }

    // ---- traps ----

    /// `trap`, `trap -p [SIG...]`, `trap [-] SIG...`, `trap CMDS SIG...`.
    pub(super) fn trap_builtin(&mut self, args: &[String]) -> i32 {
        let mut args = args;
        let mut print = false;
        while let Some(a) = args.first() {
            match a.as_str() {
                "--" => {
                    args = &args[1..];
                    break;
                }
                "-p" | "-P" => print = true,
                "-l" => {
                    let mut out = String::new();
                    for (n, name) in SIGNALS {
                        out.push_str(&format!("{n}) SIG{name}\n"));
                    }
                    self.out(&out);
                    return 0;
                }
                s if s.starts_with('-') && s.len() > 1 => {
                    say(&format!("trap: {s}: invalid option"));
                    say("trap: usage: trap [-lp] [[arg] signal_spec ...]");
                    return 2;
                }
                _ => break,
            }
            args = &args[1..];
        }
        if print || args.is_empty() {
            let mut st = 0;
            let mut conds = Vec::new();
            for a in args {
                match condition(a) {
                    Ok(c) => conds.push(c),
                    Err(m) => {
                        say(&format!("trap: {m}"));
                        st = 1;
                    }
                }
            }
            let all = args.is_empty();
            let mut out = String::new();
            let mut line = |cmd: &Option<String>, name: &str, want: bool| {
                if let (Some(t), true) = (cmd, want) {
                    out.push_str(&format!("trap -- {} {name}\n", single_quote(t)));
                }
            };
            let shown = self.traps.inherited.as_deref().unwrap_or(&self.traps);
            line(&shown.exit, "EXIT", all || conds.contains(&Condition::Exit));
            let mut sigs = shown.signals.clone();
            sigs.sort();
            for (sig, t) in &sigs {
                let want = all || conds.contains(&Condition::Signal(*sig));
                line(&Some(t.clone()), &signal_name(*sig), want);
            }
            line(&shown.err, "ERR", all || conds.contains(&Condition::Err));
            self.out(&out);
            return st;
        }
        // One argument, or `-` first: reset the conditions named.
        let (action, specs) = if args.len() == 1 || args[0] == "-" {
            (None, if args[0] == "-" { &args[1..] } else { args })
        } else {
            (Some(args[0].clone()), &args[1..])
        };
        // bash: a first argument that is a number alone resets too.
        let (action, specs) = match action {
            Some(a) if a.parse::<u32>().is_ok() => (None, args),
            other => (other, specs),
        };
        let mut st = 0;
        self.traps.inherited = None;
        for spec in specs {
            let c = match condition(spec) {
                Ok(c) => c,
                Err(m) => {
                    say(&format!("trap: {m}"));
                    st = 1;
                    continue;
                }
            };
            match c {
                Condition::Exit => self.traps.exit = action.clone(),
                Condition::Err => self.traps.err = action.clone(),
                Condition::Signal(sig) => {
                    self.traps.signals.retain(|(s, _)| *s != sig);
                    let d = match &action {
                        None => Disposition::Default,
                        Some(t) if t.is_empty() => Disposition::Ignore,
                        Some(_) => Disposition::Catch,
                    };
                    // SIGPIPE stays at its default for the programs unless
                    // a trap says otherwise.
                    set_disposition(sig, d);
                    if let Some(t) = &action {
                        self.traps.signals.push((sig, t.clone()));
                    }
                }
            }
        }
        st
    }

    /// Runs a trap's commands in this shell, `$?` kept for them; the
    /// commands are read and checked as they run, as a script file's are
    /// (a refusal names `trap` and the line in its text).
    fn run_trap(&mut self, text: String) -> R<i32> {
        let was = std::mem::replace(&mut self.in_trap, true);
        let status = self.status;
        let outer = std::mem::replace(&mut self.trap_status, status);
        let r = self.run_text("trap".into(), text);
        self.in_trap = was;
        self.trap_status = outer;
        self.status = status;
        match r {
            Err(Unwind::Return(_)) => Ok(status),
            Err(e) => Err(e),
            Ok(_) => Ok(status),
        }
    }

    /// Runs the traps of the signals received since the last look.
    pub(super) fn run_pending_traps(&mut self) -> R<()> {
        if PENDING.load(Ordering::SeqCst) == 0 || self.in_trap {
            return Ok(());
        }
        let bits = PENDING.swap(0, Ordering::SeqCst);
        for (sig, _) in SIGNALS {
            if bits & (1u64 << sig) == 0 {
                continue;
            }
            let text = self
                .traps
                .signals
                .iter()
                .find(|(s, _)| s == sig)
                .map(|(_, t)| t.clone());
            if let Some(t) = text
                && !t.is_empty()
            {
                self.run_trap(t)?;
            }
        }
        Ok(())
    }

    /// The ERR trap, after a command failed where `set -e` would stop.
    pub(super) fn run_err_trap(&mut self) -> R<()> {
        if self.in_trap || !self.locals.is_empty() {
            return Ok(());
        }
        match self.traps.err.clone() {
            Some(t) if !t.is_empty() => self.run_trap(t).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// The EXIT trap, as the shell ends with `code`: the status it ends
    /// with (`exit N` in the trap changes it).
    pub(super) fn run_exit_trap(&mut self, code: i32) -> i32 {
        let Some(t) = self.traps.exit.take() else {
            return code;
        };
        if t.is_empty() {
            return code;
        }
        self.status = code;
        match self.run_trap(t) {
            Err(Unwind::Exit(c)) => c,
            _ => code,
        }
    }
}
