//! agent-rsh's side of a compound command's run: the job handed to the
//! interpreter in a memfd, and the interpreter's reports read back from
//! the same memfd after the run (`interp` describes the layout).
//!
//! A memfd needs no reader while the run goes on: nothing can block, and
//! no thread is involved. The interpreter caps its own report lines.

use super::ScriptPlan;
use super::interp::{Job, MAGIC};
use crate::check::Denial;
use crate::policy::Policy;
use crate::result::{CommandRecord, MAX_REFUSALS, ScriptRefusal};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Commands listed in a RunResult at most; the rest are counted.
pub const MAX_LISTED: usize = 1000;

/// Bytes of reports read back at most.
const MAX_REPORT_BYTES: usize = 16 << 20;

pub struct ScriptJob {
    fd: OwnedFd,
    reports_at: u64,
}

/// What the interpreter reported.
#[derive(Debug, Default)]
pub struct Outcome {
    pub commands: Vec<CommandRecord>,
    /// A refusal at run time (a command whose words came from expansions).
    pub denial: Option<Denial>,
    pub warnings: Vec<String>,
    pub refusals: Vec<ScriptRefusal>,
}

impl ScriptJob {
    /// Writes the job for `plan`, run in `workspace` (absolute).
    pub fn create(policy: &Policy, plan: &ScriptPlan, workspace: &Path) -> io::Result<ScriptJob> {
        let job = Job {
            script: plan.source.clone(),
            max_bytes: policy.max_command_bytes,
            policy: policy.clone(),
            workspace: workspace.to_path_buf(),
            resolved: plan.verified.resolved.clone(),
        };
        let body = serde_json::to_vec(&job).map_err(io::Error::other)?;
        // SAFETY: memfd_create with a NUL-terminated name.
        let raw = unsafe { libc::memfd_create(c"agent-rsh-script".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut all = Vec::with_capacity(8 + body.len());
        all.extend_from_slice(MAGIC);
        all.extend_from_slice(&(body.len() as u32).to_le_bytes());
        all.extend_from_slice(&body);
        let mut f = std::fs::File::from(fd.try_clone()?);
        io::Write::write_all(&mut f, &all)?;
        Ok(ScriptJob {
            fd,
            reports_at: all.len() as u64,
        })
    }

    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Reads the reports after the run.
    pub fn collect(&self) -> Outcome {
        let mut out = Outcome::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut data = Vec::new();
        let mut at = self.reports_at;
        while data.len() < MAX_REPORT_BYTES {
            // SAFETY: pread into our buffer.
            let n = unsafe {
                libc::pread(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    at as libc::off_t,
                )
            };
            if n <= 0 {
                break;
            }
            data.extend_from_slice(&buf[..n as usize]);
            at += n as u64;
        }
        let mut open: HashMap<i64, usize> = HashMap::new();
        // When each listed command started (fork time), for the order.
        let mut started: Vec<u64> = Vec::new();
        let mut unlisted = 0usize;
        for line in data.split(|b| *b == b'\n') {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(pid) = v.get("s").and_then(|p| p.as_i64()) {
                if out.commands.len() >= MAX_LISTED {
                    unlisted += 1;
                    continue;
                }
                open.insert(pid, out.commands.len());
                started.push(v["t"].as_u64().unwrap_or(0));
                out.commands.push(CommandRecord {
                    argv: strings(&v["a"]),
                    offset: v["o"].as_u64().unwrap_or(0) as usize,
                    exit_code: None,
                    signal: None,
                    duration_ms: 0,
                    builtin: false,
                });
            } else if let Some(pid) = v.get("e").and_then(|p| p.as_i64()) {
                if let Some(i) = open.remove(&pid) {
                    let st = v["x"].as_i64().unwrap_or(0) as i32;
                    let c = &mut out.commands[i];
                    if libc::WIFEXITED(st) {
                        c.exit_code = Some(libc::WEXITSTATUS(st));
                    } else if libc::WIFSIGNALED(st) {
                        c.signal = Some(libc::WTERMSIG(st));
                    }
                    c.duration_ms = v["d"].as_u64().unwrap_or(0);
                }
            } else if v.get("b").is_some() {
                if out.commands.len() >= MAX_LISTED {
                    unlisted += 1;
                    continue;
                }
                started.push(v["t"].as_u64().unwrap_or(0));
                out.commands.push(CommandRecord {
                    argv: strings(&v["b"]),
                    offset: v["o"].as_u64().unwrap_or(0) as usize,
                    exit_code: v["c"].as_i64().map(|c| c as i32),
                    signal: None,
                    duration_ms: 0,
                    builtin: true,
                });
            } else if let Some(d) = v.get("r") {
                let r = ScriptRefusal {
                    file: v["f"].as_str().unwrap_or_default().to_string(),
                    line: v["l"].as_u64().unwrap_or(0) as usize,
                    rule: d["rule"].as_str().unwrap_or_default().to_string(),
                    reason: d["reason"].as_str().unwrap_or_default().to_string(),
                    hint: d["hint"].as_str().map(String::from),
                };
                let seen = out
                    .refusals
                    .iter()
                    .any(|x| (&x.file, x.line, &x.rule) == (&r.file, r.line, &r.rule));
                if !seen && out.refusals.len() < MAX_REFUSALS {
                    out.refusals.push(r);
                }
            } else if let Some(d) = v.get("denial") {
                if out.denial.is_none() {
                    out.denial = denial_of(d);
                }
            } else if let Some(w) = v.get("w").and_then(|w| w.as_str())
                && !out.warnings.iter().any(|x| x == w)
            {
                out.warnings.push(w.to_string());
            }
        }
        // Start order: the stages of a pipeline in the order they were
        // forked, whichever reported first.
        let mut order: Vec<usize> = (0..out.commands.len()).collect();
        order.sort_by_key(|&i| started[i]);
        let mut cmds: Vec<Option<CommandRecord>> = std::mem::take(&mut out.commands)
            .into_iter()
            .map(Some)
            .collect();
        out.commands = order.into_iter().filter_map(|i| cmds[i].take()).collect();
        if unlisted > 0 {
            out.warnings.push(format!(
                "the script ran {unlisted} more commands than the {MAX_LISTED} listed in `commands`"
            ));
        }
        out
    }
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn denial_of(v: &serde_json::Value) -> Option<Denial> {
    let mut d = Denial::new(
        v.get("rule")?.as_str()?,
        v.get("reason")?.as_str()?,
        v.get("hint").and_then(|h| h.as_str()).unwrap_or(""),
    );
    if v.get("hint").is_none() {
        d.hint = None;
    }
    d.offset = v.get("offset").and_then(|o| o.as_u64()).map(|o| o as usize);
    d.arg_index = v
        .get("argIndex")
        .and_then(|o| o.as_u64())
        .map(|o| o as usize);
    Some(d)
}
