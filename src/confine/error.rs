//! Why a run cannot be confined as its policy asks. Each message says what
//! failed and, where the policy or the host can change it, what to do, once.

use std::path::PathBuf;

/// What to change when the run's cgroup is missing and nothing else
/// bounds root's processes, unless the cause names something closer.
const RESOURCES_FIX: &str =
    "make a cgroup hierarchy with the memory and pids controllers writable for root";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfineError {
    /// A layer confinement = "required" needs is not available here.
    #[error(
        "{layer} is not available: {why}; confinement = \"required\" refuses to run without it (set confinement = \"best-effort\" in the policy to run with the layers this kernel has; `agent-rsh doctor` shows them)"
    )]
    Required { layer: &'static str, why: String },

    /// The seccomp program could not be compiled.
    #[error("cannot compile the seccomp filter: {why}")]
    SeccompCompile { why: String },

    /// The Landlock rule set could not be created or filled.
    #[error("cannot build the Landlock rule set: {why}")]
    LandlockRuleset { why: String },

    /// The kernel reports a Landlock ABI but no rule set could be created.
    #[error("Landlock is not available on this kernel")]
    LandlockUnavailable,

    /// The workspace could not be opened for its Landlock rule.
    #[error("cannot open the workspace {} for its Landlock rule", .path.display())]
    LandlockWorkspace { path: PathBuf },

    /// The workspace's path names another directory than the one opened
    /// and checked for this run (a component was replaced meanwhile).
    #[error(
        "the workspace {} was replaced while the run was being prepared (it no longer names the directory that was checked); nothing ran, try again",
        .path.display()
    )]
    WorkspaceReplaced { path: PathBuf },

    /// The mount view would need more binds than the guardian holds.
    #[error(
        "the policy's scopes need {needed} mounts in the run's view, more than {max}; name fewer, wider scopes"
    )]
    ViewTooManyMounts { needed: usize, max: usize },

    /// A path of the mount view cannot be handed to the kernel.
    #[error("cannot plan the run's mount view: {} contains NUL", .path.display())]
    ViewPath { path: PathBuf },

    /// No cgroup of the run's own, and root's processes bound by nothing
    /// else: "required" refuses. `why` says why the cgroup is missing;
    /// `fix` replaces the general advice when the cause names a closer one.
    #[error(
        "the run's cgroup is not available ({why}), and root's processes are bound neither by RLIMIT_NPROC nor by the pids.max of a cgroup agent-rsh runs in, so one run could exhaust the host's processes; confinement = \"required\" refuses to run ({}, start agent-rsh in a cgroup with a pids limit such as a container's --pids-limit, run it as an account other than root, or set confinement = \"best-effort\"; `agent-rsh doctor` shows what holds)",
        .fix.unwrap_or(RESOURCES_FIX)
    )]
    ResourcesUnbounded {
        why: String,
        fix: Option<&'static str>,
    },

    /// agent-rsh's own binary, which a compound command executes as its
    /// interpreter, lies where the run can write.
    #[error(
        "agent-rsh's own binary {} lies in {}, which the run can write; compound commands run agent-rsh's interpreter, so install agent-rsh outside the workspace and the write scopes (or set syntax = \"simple\")",
        .program.display(),
        .writable.display()
    )]
    InterpreterWritable { program: PathBuf, writable: PathBuf },

    /// The job a nested shell reads could not be written.
    #[error("cannot prepare the run's nested shells: {why}")]
    ShellJob { why: String },
}
