//! Acting on a running job: send to its stdin, kill its tree, wait for it.

use super::error::{JobError, JobResult};
use super::state::{JobDir, JobStatus, StateDir, write_atomic};
use crate::policy::Policy;
use crate::result::code;
use serde::Serialize;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// `send`'s answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    pub id: String,
    pub bytes: usize,
    pub eof: bool,
}

/// Writes `data` to the job's stdin (waiting at most `timeout` for the job
/// to read it) and with `eof` closes it.
pub fn send(
    policy: &Policy,
    id: &str,
    data: &[u8],
    eof: bool,
    timeout: Duration,
) -> JobResult<Sent> {
    let job = StateDir::must_open(policy)?.job(id)?;
    if job.path("stdin.closed").exists() {
        return Err(JobError::new(
            code::FAILED,
            format!("job {id}'s stdin was closed (send --eof); nothing was sent"),
        ));
    }
    if !job.alive() {
        return Err(JobError::new(
            code::FAILED,
            format!("job {id} is not running; nothing was sent"),
        ));
    }
    let mut sent = 0;
    if !data.is_empty() {
        let fifo = open_fifo_writer(&job.path("stdin")).map_err(|e| {
            JobError::new(
                code::FAILED,
                format!(
                    "job {id} does not read its stdin ({}); nothing was sent",
                    if e.raw_os_error() == Some(libc::ENXIO) {
                        "it closed it or has not started".to_string()
                    } else {
                        e.to_string()
                    }
                ),
            )
        })?;
        sent = write_with_deadline(&fifo, data, Instant::now() + timeout);
        if sent < data.len() {
            return Err(JobError::new(
                code::FAILED,
                format!(
                    "job {id} did not read its stdin: {sent} of {} bytes were sent",
                    data.len()
                ),
            ));
        }
    }
    if eof {
        write_atomic(&job.path("stdin.closed"), b"")
            .map_err(|e| JobError::io("cannot mark stdin closed", e))?;
        deliver_eof(&job, Duration::from_secs(2))?;
    }
    Ok(Sent {
        id: id.to_string(),
        bytes: sent,
        eof,
    })
}

fn open_fifo_writer(path: &Path) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    let md = f.metadata()?;
    use std::os::unix::fs::FileTypeExt;
    if !md.file_type().is_fifo() {
        return Err(io::Error::other("not a FIFO"));
    }
    Ok(f.into())
}

fn write_with_deadline(fd: &OwnedFd, mut data: &[u8], deadline: Instant) -> usize {
    let mut sent = 0;
    while !data.is_empty() {
        // SAFETY: write from a live slice.
        let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        if n > 0 {
            sent += n as usize;
            data = &data[n as usize..];
            continue;
        }
        let e = io::Error::last_os_error().raw_os_error();
        if e == Some(libc::EINTR) {
            continue;
        }
        if e != Some(libc::EAGAIN) {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: poll on one pollfd.
        unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
    }
    sent
}

/// Tells the supervisor to close the command's stdin. The command may
/// have read what was just sent and ended before the end of file reached
/// its supervisor (which then exits and stops reading its control FIFO):
/// then there is no stdin left to close and nothing failed. Waits at most
/// `wait` for that exit before calling the supervisor gone.
fn deliver_eof(job: &JobDir, wait: Duration) -> JobResult<()> {
    match control(job, "eof") {
        Err(e) if !ended_within(job, wait) => Err(e),
        _ => Ok(()),
    }
}

/// True once the job's supervisor has exited (its lock is released),
/// waiting for it at most `limit`: the control FIFO and the lock close in
/// the same exit, not at the same instant.
fn ended_within(job: &JobDir, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if !job.alive() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends one line to the supervisor's control FIFO.
fn control(job: &JobDir, line: &str) -> JobResult<()> {
    let fifo = open_fifo_writer(&job.path("control")).map_err(|e| {
        JobError::new(
            code::FAILED,
            format!("job {}'s supervisor is gone ({e})", job.id),
        )
    })?;
    let msg = format!("{line}\n");
    if write_with_deadline(
        &fifo,
        msg.as_bytes(),
        Instant::now() + Duration::from_secs(5),
    ) < msg.len()
    {
        return Err(JobError::new(
            code::FAILED,
            format!("job {}'s supervisor does not answer", job.id),
        ));
    }
    Ok(())
}

/// The signals `kill` accepts.
pub fn parse_signal(name: &str) -> Option<i32> {
    match name.trim_start_matches("SIG").to_ascii_uppercase().as_str() {
        "TERM" | "15" => Some(libc::SIGTERM),
        "KILL" | "9" => Some(libc::SIGKILL),
        "INT" | "2" => Some(libc::SIGINT),
        _ => None,
    }
}

/// Signals the job's whole tree (TERM, INT: then, after the grace period,
/// TERM and KILL; KILL at once) and waits for it to end.
pub fn kill(policy: &Policy, id: &str, signal: i32) -> JobResult<JobStatus> {
    let job = StateDir::must_open(policy)?.job(id)?;
    if !job.alive() {
        return job.status();
    }
    let meta = job.meta()?;
    match control(&job, &format!("kill {signal}")) {
        Ok(()) => {}
        // It ended between the check and the write.
        Err(_) if !job.alive() => return job.status(),
        Err(e) => return Err(e),
    }
    // The supervisor sends the signal, then SIGKILL after the grace
    // period; should the tree outlive that by far (a supervisor starved
    // of CPU), SIGKILL is asked for, and at last the supervisor itself is
    // killed, which takes the tree down with it.
    let grace = Duration::from_millis(meta.grace_ms);
    let st = wait_dir(&job, Some(grace * 2 + Duration::from_secs(10)))?;
    if st.status != super::State::Running {
        return Ok(st);
    }
    let _ = control(&job, &format!("kill {}", libc::SIGKILL));
    let st = wait_dir(&job, Some(Duration::from_secs(10)))?;
    if st.status != super::State::Running {
        return Ok(st);
    }
    kill_supervisor(&job);
    wait_dir(&job, Some(Duration::from_secs(10)))
}

/// SIGKILLs the job's supervisor, found by the pid it recorded and
/// checked to be agent-rsh's supervisor entry through a pidfd (so a
/// reused pid is never signalled). Its run's guardian has a parent-death
/// signal: the tree dies with it, and the job reads `lost`.
fn kill_supervisor(job: &JobDir) {
    let Some(info) = job.read::<super::state::SupervisorInfo>("supervisor.json") else {
        return;
    };
    let pid = info.supervisor_pid;
    // SAFETY: pidfd_open takes a pid and flags; the fd is ours.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return;
    }
    // SAFETY: a new fd we own.
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw as i32) };
    let ours = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        c.split(|&b| b == 0)
            .any(|a| a == super::SUPERVISE.as_bytes())
    });
    if ours && job.alive() {
        // SAFETY: pidfd_send_signal on a pidfd we own.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

/// Waits for the job to end (at most `timeout`); returns its status, which
/// is still `running` when the timeout passed first.
pub fn wait(policy: &Policy, id: &str, timeout: Option<Duration>) -> JobResult<JobStatus> {
    let job = StateDir::must_open(policy)?.job(id)?;
    wait_dir(&job, timeout)
}

fn wait_dir(job: &JobDir, timeout: Option<Duration>) -> JobResult<JobStatus> {
    let until = timeout.map(|t| Instant::now() + t);
    let mut pause = Duration::from_millis(5);
    while job.alive() {
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            break;
        }
        let nap = until.map_or(pause, |u| pause.min(u - now));
        std::thread::sleep(nap);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    job.status()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs::File;
    use std::io::Read;

    fn job_with_fifo() -> (tempfile::TempDir, JobDir) {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("control"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::write(dir.path().join("lock"), b"").unwrap();
        let job = JobDir {
            id: "1".into(),
            dir: dir.path().to_path_buf(),
        };
        (dir, job)
    }

    #[test]
    fn eof_reaches_a_reading_supervisor() {
        let (_d, job) = job_with_fifo();
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(job.path("control"))
            .unwrap();
        let lock = File::open(job.path("lock")).unwrap();
        crate::sys::lock(&lock).unwrap();
        deliver_eof(&job, Duration::from_millis(50)).unwrap();
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "eof\n");
    }

    #[test]
    fn eof_after_the_supervisor_ended_is_not_an_error() {
        // No reader on the control FIFO and nobody holds the lock: the
        // job ended (on what was just sent) before the end of file came.
        let (_d, job) = job_with_fifo();
        deliver_eof(&job, Duration::from_millis(50)).unwrap();
    }

    #[test]
    fn eof_to_a_live_job_without_a_reader_says_the_supervisor_is_gone() {
        let (_d, job) = job_with_fifo();
        let lock = File::open(job.path("lock")).unwrap();
        crate::sys::lock(&lock).unwrap();
        let e = deliver_eof(&job, Duration::from_millis(50)).unwrap_err();
        assert!(e.to_string().contains("supervisor is gone"), "{e}");
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("TERM"), Some(libc::SIGTERM));
        assert_eq!(parse_signal("SIGKILL"), Some(libc::SIGKILL));
        assert_eq!(parse_signal("int"), Some(libc::SIGINT));
        assert_eq!(parse_signal("HUP"), None);
    }
}
