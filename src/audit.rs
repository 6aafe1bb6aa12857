//! The audit log: one JSON line per decision, appended with `O_APPEND`.
//!
//! Each record is serialized in full and handed to the kernel in a single
//! `write(2)` on a file opened with `O_APPEND`, so records from concurrent
//! sessions never interleave on a local filesystem (the kernel moves the
//! offset to the end and writes under the inode lock). Records name
//! variables at most, never their values.

pub use crate::policy::AuditPolicy;
use crate::policy::Policy;
use crate::result::{RunResult, Status};
use serde::Serialize;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// An open audit log.
pub struct AuditLog {
    file: File,
    path: PathBuf,
}

impl AuditLog {
    /// Opens (creating with mode 0600 if needed) the log for appending.
    pub fn open(path: &Path) -> io::Result<AuditLog> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("audit log {}: {e}", path.display())))?;
        Ok(AuditLog {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends one record as one line, in one system call.
    pub fn append(&self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        // SAFETY: write from a live buffer to our own fd.
        let n = unsafe { libc::write(self.file.as_raw_fd(), line.as_ptr().cast(), line.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("audit log {}: {e}", self.path.display()),
            ));
        }
        if n as usize != line.len() {
            // Retrying would split the record; a short write means the
            // filesystem is full or over quota.
            return Err(io::Error::other(format!(
                "audit log {}: short write ({n} of {} bytes)",
                self.path.display(),
                line.len()
            )));
        }
        Ok(())
    }
}

/// Who and where: the fields every record of a session shares.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    /// `login-command` (`-c`), `interactive`, `script` (commands on
    /// standard input) or `run`.
    pub face: &'static str,
    pub user: String,
    pub uid: u32,
    /// agent-rsh's process id; it ties the records of one session together.
    pub session: u32,
    /// The terminal on standard input, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tty: Option<String>,
    /// `SSH_CONNECTION` as sshd set it (client address and port, server
    /// address and port), when the session came over ssh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
}

impl Origin {
    /// The origin of the current process.
    pub fn current(face: &'static str, user: String, uid: u32) -> Origin {
        // SAFETY: ttyname on fd 0; the result is copied before any other call.
        let tty = unsafe {
            let p = libc::ttyname(0);
            (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        Origin {
            face,
            user,
            uid,
            session: std::process::id(),
            tty,
            ssh: std::env::var("SSH_CONNECTION")
                .ok()
                .filter(|s| !s.is_empty()),
        }
    }
}

/// One line of the log.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record<'a> {
    pub schema: &'static str,
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// `command`, `session-start` or `session-end`.
    pub event: &'static str,
    #[serde(flatten)]
    pub origin: &'a Origin,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `allow`, `deny` or `notFound`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<&'static str>,
    /// The rule that refused, for denials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The RunResult's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Names of per-call variables (`run --env`); never their values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
    /// Why a session ended, or where its policy came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Refusals so far in the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusals: Option<u32>,
    /// `HOST:PORT` the network proxy refused the command.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_refused: Vec<String>,
}

impl<'a> Record<'a> {
    pub fn new(event: &'static str, origin: &'a Origin) -> Record<'a> {
        Record {
            schema: "agent-rsh.audit/1",
            time: rfc3339_now(),
            event,
            origin,
            cwd: None,
            command: None,
            verdict: None,
            rule: None,
            status: None,
            exit_code: None,
            duration_ms: None,
            env_names: Vec::new(),
            detail: None,
            refusals: None,
            network_refused: Vec::new(),
        }
    }

    /// The record of one command's decision and outcome.
    pub fn command(origin: &'a Origin, cwd: Option<String>, r: &RunResult) -> Record<'a> {
        let mut rec = Record::new("command", origin);
        rec.cwd = cwd.or_else(|| r.cwd.clone());
        rec.command = Some(r.command.clone());
        rec.verdict = Some(match r.status {
            Status::Denied => "deny",
            Status::NotFound => "notFound",
            _ => "allow",
        });
        rec.rule = r.denial.as_ref().map(|d| d.rule.clone());
        rec.status = Some(r.status);
        rec.exit_code = Some(r.exit_code());
        rec.duration_ms = Some(r.duration_ms);
        rec.network_refused = r
            .network
            .iter()
            .flat_map(|n| &n.refused)
            .map(|c| format!("{}:{}", c.host, c.port))
            .collect();
        rec
    }
}

/// Opens the log for `agent-rsh run` when the policy asks for it.
pub fn open_for_agent(policy: &Policy) -> io::Result<Option<AuditLog>> {
    if !policy.audit.agent {
        return Ok(None);
    }
    AuditLog::open(&policy.audit.path).map(Some)
}

/// Records one `agent-rsh run`: variable names from `--env`, not values.
pub fn record_agent_run(log: &AuditLog, env: &[String], r: &RunResult) -> io::Result<()> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let user = nix::unistd::User::from_uid(uid.into())
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    let origin = Origin::current("run", user, uid);
    let mut rec = Record::command(&origin, None, r);
    rec.env_names = env
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map_or(kv.as_str(), |(k, _)| k)
                .to_string()
        })
        .collect();
    log.append(&rec)
}

/// Now as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}

fn rfc3339(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_374_245, 999), "2026-11-22T19:04:05.999Z");
    }

    #[test]
    fn concurrent_appends_leave_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let origin = Origin::current("run", "t".into(), 0);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (path, origin) = (&path, &origin);
                s.spawn(move || {
                    let log = AuditLog::open(path).unwrap();
                    for i in 0..200 {
                        let mut rec = Record::new("command", origin);
                        rec.command = Some(format!("{t}:{i}:{}", "x".repeat(5000)));
                        log.append(&rec).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 800);
        for l in lines {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["command"].as_str().unwrap().ends_with(&"x".repeat(5000)));
        }
    }
}
