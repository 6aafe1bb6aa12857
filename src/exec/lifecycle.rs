//! The life of a run as a pure state machine: the deadline, forwarded
//! signals, cancellation, the kill after the grace period and the bounded
//! drain of output once the guardian has gone. `exec::run` feeds it what
//! happened (time passing, a signal, the guardian's exit) and carries out
//! the kills it asks for; every transition is decided here, without
//! processes, so each one has a unit test.

use crate::result::Status;
use std::time::{Duration, Instant};

/// How long output is still read after the guardian exited. In a PID
/// namespace every writer is dead by then, so the pipes close at once and
/// the bound is only a backstop; without one a daemon that left the
/// process group may hold them open.
pub const DRAIN_IN_PID_NAMESPACE: Duration = Duration::from_millis(2000);
pub const DRAIN_WITHOUT_PID_NAMESPACE: Duration = Duration::from_millis(200);

/// What the run loop must do to the process tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// Send this signal to the guardian (it forwards it into the tree).
    Guardian(i32),
    /// The grace period is over: SIGKILL the guardian, and without a PID
    /// namespace the command's process group too.
    Tree,
}

/// Why the loop stops reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The guardian has exited and both output pipes are at end of file.
    Done,
    /// The guardian has exited but something outside the run's process
    /// group kept an output pipe open past the drain bound.
    DrainExpired,
}

#[derive(Debug)]
pub struct Lifecycle {
    deadline: Instant,
    grace: Duration,
    drain: Duration,
    kill_at: Option<Instant>,
    timed_out: bool,
    interrupted: Option<i32>,
    guardian_done: bool,
    drain_until: Option<Instant>,
}

impl Lifecycle {
    pub fn new(started: Instant, timeout: Duration, grace: Duration, pid_ns: bool) -> Self {
        Lifecycle {
            deadline: started + timeout,
            grace,
            drain: if pid_ns {
                DRAIN_IN_PID_NAMESPACE
            } else {
                DRAIN_WITHOUT_PID_NAMESPACE
            },
            kill_at: None,
            timed_out: false,
            interrupted: None,
            guardian_done: false,
            drain_until: None,
        }
    }

    /// Neither ended, nor timed out, nor interrupted.
    fn running(&self) -> bool {
        !self.guardian_done && !self.timed_out && self.interrupted.is_none()
    }

    /// True while a cancellation request can still change the outcome.
    pub fn cancellable(&self) -> bool {
        !self.guardian_done && self.interrupted.is_none()
    }

    /// True until the guardian has been reaped.
    pub fn guardian_alive(&self) -> bool {
        !self.guardian_done
    }

    /// The kill, if any, that is due at `now`: the deadline's SIGTERM, or
    /// the SIGKILL of the tree once the grace period after a SIGTERM (the
    /// deadline's or a forwarded one) has passed.
    pub fn tick(&mut self, now: Instant) -> Option<Kill> {
        if self.running() && now >= self.deadline {
            self.timed_out = true;
            self.kill_at = Some(now + self.grace);
            return Some(Kill::Guardian(libc::SIGTERM));
        }
        if !self.guardian_done
            && let Some(k) = self.kill_at
            && now >= k
        {
            self.kill_at = None;
            return Some(Kill::Tree);
        }
        None
    }

    /// agent-rsh received `sig` (SIGINT, SIGTERM, SIGHUP): forward it and
    /// start the grace period. The first signal names the outcome; a later
    /// one is still forwarded but does not extend the grace period.
    pub fn signal(&mut self, sig: i32, now: Instant) -> Option<Kill> {
        if self.guardian_done {
            return None;
        }
        self.interrupted.get_or_insert(sig);
        self.kill_at.get_or_insert(now + self.grace);
        Some(Kill::Guardian(sig))
    }

    /// The caller asked to stop the run (the cancel fd became readable):
    /// as if agent-rsh had received SIGTERM, once.
    pub fn cancel(&mut self, now: Instant) -> Option<Kill> {
        if !self.cancellable() {
            return None;
        }
        self.signal(libc::SIGTERM, now)
    }

    /// The guardian was reaped: no more kills; output is drained for a
    /// bounded time.
    pub fn guardian_exited(&mut self, now: Instant) {
        if self.guardian_done {
            return;
        }
        self.guardian_done = true;
        self.kill_at = None;
        self.drain_until = Some(now + self.drain);
    }

    /// Whether the loop stops at `now`, given whether an output pipe is
    /// still open.
    pub fn stop(&self, now: Instant, output_open: bool) -> Option<Stop> {
        if !self.guardian_done {
            return None;
        }
        if !output_open {
            return Some(Stop::Done);
        }
        match self.drain_until {
            Some(d) if now >= d => Some(Stop::DrainExpired),
            _ => None,
        }
    }

    /// The next instant at which `tick` or `stop` has something to do.
    pub fn wake(&self) -> Option<Instant> {
        [
            self.running().then_some(self.deadline),
            self.kill_at,
            self.drain_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The poll timeout in milliseconds until `wake` (rounded up, so a
    /// wake-up never comes early and spins), or -1 for none.
    pub fn poll_timeout_ms(&self, now: Instant) -> i32 {
        self.wake().map_or(-1, |w| {
            let us = w.saturating_duration_since(now).as_micros();
            us.div_ceil(1000).min(i32::MAX as u128) as i32
        })
    }

    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// The RunResult's status, exit code and signal, from what happened
    /// and the command's wait status (None when the guardian never
    /// reported one).
    pub fn verdict(&self, wait_status: Option<i32>) -> (Status, Option<i32>, Option<i32>) {
        let exit_of = |st: i32| libc::WIFEXITED(st).then(|| libc::WEXITSTATUS(st));
        let signal_of = |st: i32| libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st));
        match (self.interrupted, self.timed_out, wait_status) {
            (Some(sig), _, st) => (Status::Interrupted, st.and_then(exit_of), Some(sig)),
            (None, true, st) => (
                Status::TimedOut,
                st.and_then(exit_of),
                st.and_then(signal_of).or(Some(libc::SIGKILL)),
            ),
            (None, false, Some(st)) => match (exit_of(st), signal_of(st)) {
                (Some(c), _) => (Status::Exited, Some(c), None),
                (None, s) => (Status::Signaled, None, s),
            },
            (None, false, None) => (Status::Failed, None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);
    const GRACE: Duration = Duration::from_secs(2);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn life(pid_ns: bool) -> (Lifecycle, Instant) {
        let t0 = Instant::now();
        (Lifecycle::new(t0, TIMEOUT, GRACE, pid_ns), t0)
    }

    /// Wait statuses as the kernel encodes them.
    fn exited(code: i32) -> i32 {
        code << 8
    }
    fn killed_by(sig: i32) -> i32 {
        sig
    }

    #[test]
    fn nothing_happens_before_the_deadline_and_poll_sleeps_until_it() {
        let (mut l, t0) = life(true);
        assert_eq!(l.tick(t0 + TIMEOUT - ms(1)), None);
        assert_eq!(l.wake(), Some(t0 + TIMEOUT));
        assert_eq!(l.poll_timeout_ms(t0 + TIMEOUT - ms(1)), 1);
        // Rounded up: 300 us is one millisecond, never zero.
        assert_eq!(
            l.poll_timeout_ms(t0 + TIMEOUT - Duration::from_micros(300)),
            1
        );
        assert_eq!(l.stop(t0, true), None);
        assert_eq!(l.stop(t0, false), None, "the guardian is still running");
    }

    #[test]
    fn the_deadline_sends_sigterm_then_the_tree_is_killed_after_the_grace() {
        let (mut l, t0) = life(true);
        let at = t0 + TIMEOUT;
        assert_eq!(l.tick(at), Some(Kill::Guardian(libc::SIGTERM)));
        assert!(l.timed_out());
        // Once only: the next wake-up is the end of the grace period.
        assert_eq!(l.tick(at), None);
        assert_eq!(l.wake(), Some(at + GRACE));
        assert_eq!(l.tick(at + GRACE - ms(1)), None);
        assert_eq!(l.tick(at + GRACE), Some(Kill::Tree));
        assert_eq!(l.tick(at + GRACE + ms(1)), None, "killed once");
        assert_eq!(l.wake(), None, "nothing left to wait for but the exit");
        assert_eq!(l.poll_timeout_ms(at + GRACE), -1);
    }

    #[test]
    fn with_no_grace_both_kills_are_due_at_the_deadline() {
        let t0 = Instant::now();
        let mut l = Lifecycle::new(t0, TIMEOUT, Duration::ZERO, true);
        assert_eq!(l.tick(t0 + TIMEOUT), Some(Kill::Guardian(libc::SIGTERM)));
        assert_eq!(l.tick(t0 + TIMEOUT), Some(Kill::Tree));
        assert_eq!(l.tick(t0 + TIMEOUT), None);
    }

    #[test]
    fn a_child_that_exits_on_sigterm_is_not_killed_again() {
        let (mut l, t0) = life(true);
        l.tick(t0 + TIMEOUT);
        l.guardian_exited(t0 + TIMEOUT + ms(5));
        assert_eq!(l.tick(t0 + TIMEOUT + GRACE), None);
        assert_eq!(
            l.verdict(Some(killed_by(libc::SIGTERM))),
            (Status::TimedOut, None, Some(libc::SIGTERM))
        );
    }

    #[test]
    fn a_timed_out_run_without_a_status_reports_sigkill() {
        let (mut l, t0) = life(true);
        l.tick(t0 + TIMEOUT);
        l.tick(t0 + TIMEOUT + GRACE);
        l.guardian_exited(t0 + TIMEOUT + GRACE);
        assert_eq!(
            l.verdict(None),
            (Status::TimedOut, None, Some(libc::SIGKILL))
        );
        // A command that caught SIGTERM and exited keeps its exit code;
        // the signal says the run was ended by the deadline's kill.
        assert_eq!(
            l.verdict(Some(exited(143))),
            (Status::TimedOut, Some(143), Some(libc::SIGKILL))
        );
    }

    #[test]
    fn a_signal_is_forwarded_and_names_the_outcome_and_the_deadline_no_longer_applies() {
        let (mut l, t0) = life(true);
        let at = t0 + ms(100);
        assert_eq!(
            l.signal(libc::SIGINT, at),
            Some(Kill::Guardian(libc::SIGINT))
        );
        assert_eq!(l.wake(), Some(at + GRACE), "the deadline is not a wake-up");
        assert_eq!(l.tick(t0 + TIMEOUT), Some(Kill::Tree));
        assert!(!l.timed_out());
        assert_eq!(
            l.verdict(Some(killed_by(libc::SIGINT))),
            (Status::Interrupted, None, Some(libc::SIGINT))
        );
    }

    #[test]
    fn a_second_signal_is_forwarded_without_moving_the_grace_or_the_outcome() {
        let (mut l, t0) = life(true);
        l.signal(libc::SIGTERM, t0 + ms(100));
        assert_eq!(
            l.signal(libc::SIGINT, t0 + ms(1500)),
            Some(Kill::Guardian(libc::SIGINT))
        );
        assert_eq!(l.wake(), Some(t0 + ms(100) + GRACE));
        assert_eq!(
            l.verdict(Some(exited(0))),
            (Status::Interrupted, Some(0), Some(libc::SIGTERM))
        );
    }

    #[test]
    fn a_signal_after_the_deadline_keeps_the_grace_already_running() {
        let (mut l, t0) = life(true);
        l.tick(t0 + TIMEOUT);
        assert_eq!(
            l.signal(libc::SIGINT, t0 + TIMEOUT + ms(500)),
            Some(Kill::Guardian(libc::SIGINT))
        );
        assert_eq!(l.wake(), Some(t0 + TIMEOUT + GRACE));
        // Interrupted wins over timed out in the verdict, as a user who
        // pressed ^C expects.
        assert_eq!(l.verdict(None).0, Status::Interrupted);
    }

    #[test]
    fn cancel_acts_as_sigterm_once_and_not_after_a_signal_or_the_exit() {
        let (mut l, t0) = life(true);
        assert!(l.cancellable());
        assert_eq!(l.cancel(t0), Some(Kill::Guardian(libc::SIGTERM)));
        assert!(!l.cancellable());
        assert_eq!(l.cancel(t0 + ms(1)), None);
        assert_eq!(
            l.verdict(None),
            (Status::Interrupted, None, Some(libc::SIGTERM))
        );

        let (mut l, t0) = life(true);
        l.signal(libc::SIGHUP, t0);
        assert_eq!(l.cancel(t0), None);
        assert_eq!(l.verdict(None).2, Some(libc::SIGHUP));

        let (mut l, t0) = life(true);
        l.guardian_exited(t0);
        assert_eq!(l.cancel(t0), None);
        assert_eq!(l.signal(libc::SIGINT, t0), None, "nothing left to signal");
        assert_eq!(l.verdict(Some(exited(3))), (Status::Exited, Some(3), None));
    }

    #[test]
    fn after_the_guardian_exits_output_is_drained_for_a_bounded_time() {
        for (pid_ns, drain) in [
            (true, DRAIN_IN_PID_NAMESPACE),
            (false, DRAIN_WITHOUT_PID_NAMESPACE),
        ] {
            let (mut l, t0) = life(pid_ns);
            let at = t0 + ms(50);
            l.guardian_exited(at);
            assert!(!l.guardian_alive());
            assert_eq!(l.stop(at, false), Some(Stop::Done));
            assert_eq!(l.stop(at, true), None);
            assert_eq!(l.wake(), Some(at + drain));
            assert_eq!(l.stop(at + drain - ms(1), true), None);
            assert_eq!(l.stop(at + drain, true), Some(Stop::DrainExpired));
            // A second report of the exit does not extend the bound.
            l.guardian_exited(at + drain);
            assert_eq!(l.wake(), Some(at + drain));
        }
    }

    #[test]
    fn an_exit_during_the_grace_cancels_the_pending_kill() {
        // Before: a pending kill in the past made every poll return at
        // once while draining; now the exit clears it.
        let (mut l, t0) = life(true);
        l.signal(libc::SIGTERM, t0);
        l.guardian_exited(t0 + GRACE + ms(10));
        assert_eq!(l.tick(t0 + GRACE + ms(20)), None);
        assert_eq!(l.wake(), Some(t0 + GRACE + ms(10) + DRAIN_IN_PID_NAMESPACE));
    }

    #[test]
    fn the_verdict_of_a_run_that_ended_by_itself() {
        let (mut l, t0) = life(false);
        l.guardian_exited(t0);
        assert_eq!(l.verdict(Some(exited(0))), (Status::Exited, Some(0), None));
        assert_eq!(
            l.verdict(Some(killed_by(libc::SIGSEGV))),
            (Status::Signaled, None, Some(libc::SIGSEGV))
        );
        assert_eq!(l.verdict(None), (Status::Failed, None, None));
    }
}
