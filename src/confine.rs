//! Kernel confinement of the child, prepared before fork and applied between
//! fork and exec with raw system calls only.
//!
//! `Confinement::prepare` does everything that allocates or can fail slowly
//! (building rule sets and filters) in the parent; `apply_in_child` runs in
//! the forked child and only makes system calls, so it is safe after fork in
//! a process that may have other threads.

use crate::plan::Plan;
use crate::policy::{ConfinementMode, Policy};
use serde::Serialize;
use std::path::Path;

/// What was asked for and what the kernel enforced, for the RunResult.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub mode: ConfinementMode,
    /// The child is PID 1's child in its own PID namespace: the whole tree
    /// dies with the run.
    pub pid_namespace: bool,
    pub no_new_privs: bool,
    pub limits: LimitsReport,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitsReport {
    pub cpu_seconds: u64,
    pub address_space_bytes: Option<u64>,
    pub file_size_bytes: u64,
    pub open_files: u64,
    pub processes: u64,
    pub core_bytes: u64,
}

/// Where in the child's setup a failure happened; reported by the child to
/// the parent over the exec-error pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    Stdio = 1,
    Chdir = 2,
    Rlimit = 3,
    NoNewPrivs = 4,
    Exec = 9,
}

impl Stage {
    pub fn from_u8(v: u8) -> Option<Stage> {
        Some(match v {
            1 => Stage::Stdio,
            2 => Stage::Chdir,
            3 => Stage::Rlimit,
            4 => Stage::NoNewPrivs,
            9 => Stage::Exec,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stage::Stdio => "setting up standard streams",
            Stage::Chdir => "entering the working directory",
            Stage::Rlimit => "setting resource limits",
            Stage::NoNewPrivs => "setting no_new_privs",
            Stage::Exec => "executing the program",
        }
    }
}

/// A confinement ready to apply in a forked child.
pub struct Confinement {
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    no_new_privs: bool,
    /// Ask exec for a PID namespace (the tree dies with its init).
    pub want_pid_namespace: bool,
    report: Report,
}

impl Confinement {
    /// Builds everything the child will apply. Fails (closed) when the
    /// policy requires a layer this kernel cannot provide.
    pub fn prepare(policy: &Policy, plan: &Plan, _workspace: &Path) -> Result<Confinement, String> {
        let l = &policy.limits;
        let cpu = if l.cpu_seconds > 0 {
            l.cpu_seconds
        } else {
            // CPU time cannot exceed wall time per core; one extra second so
            // the deadline, not RLIMIT_CPU, is what normally ends a run.
            plan.timeout.as_secs() * 2 + 1
        };
        let mut rlimits = vec![
            (libc::RLIMIT_CPU, cpu),
            (libc::RLIMIT_FSIZE, l.file_size_bytes),
            (libc::RLIMIT_NOFILE, l.open_files),
            (libc::RLIMIT_NPROC, l.processes),
            (libc::RLIMIT_CORE, 0),
        ];
        if l.address_space_bytes > 0 {
            rlimits.push((libc::RLIMIT_AS, l.address_space_bytes));
        }
        Ok(Confinement {
            rlimits,
            no_new_privs: true,
            // The PID namespace is what makes the tree kill exact, so it is
            // wanted even with confinement off (which then tolerates its
            // absence).
            want_pid_namespace: true,
            report: Report {
                mode: policy.confinement,
                pid_namespace: false,
                no_new_privs: true,
                limits: LimitsReport {
                    cpu_seconds: cpu,
                    address_space_bytes: (l.address_space_bytes > 0)
                        .then_some(l.address_space_bytes),
                    file_size_bytes: l.file_size_bytes,
                    open_files: l.open_files,
                    processes: l.processes,
                    core_bytes: 0,
                },
            },
        })
    }

    /// Records what exec obtained for the PID namespace.
    pub fn set_pid_namespace(&mut self, on: bool) {
        self.report.pid_namespace = on;
    }

    pub fn report(&self) -> &Report {
        &self.report
    }

    /// In the forked child, just before exec. Raw system calls only.
    pub fn apply_in_child(&self) -> Result<(), (Stage, i32)> {
        for &(res, val) in &self.rlimits {
            let lim = libc::rlimit {
                rlim_cur: val,
                rlim_max: val,
            };
            // SAFETY: setrlimit with a valid pointer to a stack value.
            if unsafe { libc::setrlimit(res, &lim) } != 0 {
                return Err((Stage::Rlimit, errno()));
            }
        }
        if self.no_new_privs {
            // SAFETY: prctl with integer arguments.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err((Stage::NoNewPrivs, errno()));
            }
        }
        Ok(())
    }
}

pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
