//! Process substitution, `<(list)` and `>(list)`, as bash runs it.
//!
//! When a word holding one is expanded, a forked copy of the shell starts
//! the list with its standard output (`<(`) or input (`>(`) on a pipe,
//! and the word becomes `/dev/fd/N`, N the shell's end of the pipe. The
//! list's commands are checked as they run, as a command substitution's
//! are (the static check has seen those written out already). The shell
//! keeps its end open, close-on-exec, while the command that got the word
//! runs, and makes it inheritable only in the programs that command
//! starts, so no other program of the run holds a writer that would keep
//! a `>(...)` reader from its end of file. When the command ends the
//! shell closes its end; the list is a job of the shell's (no job
//! number): `$!` is its pid, `wait` and `wait $!` wait for it, and it is
//! reaped as it ends. A shell (the script's, or a forked one: a pipeline
//! stage, a subshell) waits for its `>(...)` lists still running before
//! it ends: they hold the end of its output, and bash leaves them running
//! after it exits, so that its caller still gets what they print and the
//! files they write are whole, where a run ends everything left with its
//! script. A `<(...)` list still running then ends with the run, as a
//! background job does: its reader is gone.

use super::*;

/// bash's first process substitution is `/dev/fd/63`, the next 62, ...:
/// the shell's ends go down from here, above the fds a script can name
/// (0 to 9), among those the interpreter takes for itself (free ones
/// from 10 up).
const HIGHEST_FD: RawFd = 63;
const LOWEST_FD: RawFd = 10;

impl Interp<'_> {
    /// Starts `body` beside the current command; the path of the shell's
    /// end of its pipe.
    pub(super) fn start_process_subst(
        &mut self,
        body: &List,
        output: bool,
    ) -> Result<String, ExpandError> {
        let fatal = |what: &str, e: i32| ExpandError::Fatal(format!("{what}: {}", errno_text(e)));
        let (r, w) = pipe().map_err(|e| fatal("pipe", e))?;
        // The shell's end: the reader of `<(`, the writer of `>(`.
        let (ours, theirs) = if output { (w, r) } else { (r, w) };
        let Some(fd) = high_fd(ours) else {
            let e = last_errno();
            close(r);
            close(w);
            return Err(fatal("process substitution", e));
        };
        close(ours);
        let pid = match self.fork() {
            Ok(p) => p,
            Err(_) => {
                close(fd);
                close(theirs);
                return Err(ExpandError::Fatal("cannot fork".into()));
            }
        };
        if pid == 0 {
            close(fd);
            // Other substitutions of the same command are not this
            // list's: a writer of one held here would keep its reader
            // waiting for an end of file until this list ends.
            for other in std::mem::take(&mut self.procsub_fds) {
                close(other);
            }
            let std = if output { 0 } else { 1 };
            install(theirs, std);
            if theirs != std {
                close(theirs);
            }
            self.subst_depth += 1;
            self.stderr_to_pipe = false;
            // One command alone is this process (a program exec'd in
            // place), so `kill $!` reaches it, as in bash.
            let r = match body.as_slice() {
                [ao] if ao.rest.is_empty()
                    && !ao.background
                    && ao.first.stages.len() == 1
                    && !ao.first.negated
                    && ao.first.timed.is_none() =>
                {
                    match self.exec_command(&ao.first.stages[0].command, true) {
                        Err(Unwind::Refused) => Ok(126),
                        r => r,
                    }
                }
                _ => self.exec_list(body),
            };
            self.child_exit(r);
        }
        close(theirs);
        self.procsub_fds.push(fd);
        self.adopt_process_subst(pid, output);
        Ok(format!("/dev/fd/{fd}"))
    }

    /// After the command whose words started the substitutions above
    /// `mark`: the shell closes its ends (the lists see their end of
    /// file, or a closed reader), reaps those that ended, and stops if a
    /// list was refused.
    pub(super) fn end_process_substs(&mut self, mark: usize) -> R<()> {
        if self.procsub_fds.len() <= mark {
            return Ok(());
        }
        for fd in self.procsub_fds.split_off(mark) {
            close(fd);
        }
        self.sweep_process_substs();
        self.check_denied()
    }

    /// A shell that ends waits for its `>(...)` lists (not after a
    /// refusal, which stops the script at once).
    pub(super) fn wait_writers(&mut self) {
        if !self.denied() {
            self.wait_process_subst_writers();
        }
    }

    /// In the process that becomes a program: the substitutions of the
    /// commands running in this shell are the program's to open.
    pub(super) fn pass_process_substs(&self) {
        for &fd in &self.procsub_fds {
            // SAFETY: clearing close-on-exec on an fd this process holds.
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        }
    }
}

/// `fd` copied to the highest free fd from `HIGHEST_FD` (or the soft
/// limit on open files) down, close-on-exec (the lowest free one when
/// they are all taken); None: no fd left.
fn high_fd(fd: RawFd) -> Option<RawFd> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit into a stack value.
    let highest = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        HIGHEST_FD.min(lim.rlim_cur.saturating_sub(1).min(RawFd::MAX as u64) as RawFd)
    } else {
        HIGHEST_FD
    };
    let free = (LOWEST_FD..=highest).rev().find(|&n| {
        // SAFETY: probing an fd of this process; the interpreter is
        // single-threaded, so a free fd stays free.
        unsafe { libc::fcntl(n, libc::F_GETFD) < 0 && last_errno() == libc::EBADF }
    });
    // SAFETY: duplicating an fd of this process onto a free number.
    let mut copy = free.map_or(-1, |n| unsafe { libc::dup3(fd, n, libc::O_CLOEXEC) });
    if copy < 0 {
        // SAFETY: as above.
        copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, LOWEST_FD) };
    }
    (copy >= 0).then_some(copy)
}
