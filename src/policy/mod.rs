//! The policy: what may run, with which environment, limits and scopes.
//!
//! Loaded from TOML with unknown keys refused (a typo in a security policy
//! must not silently turn a rule off). Every field has a default so a policy
//! file only states what it changes; the embedded default policy is the
//! read-only inspection set in `policy/default.toml`.

pub mod audit;
pub mod env;
pub mod jobs;
pub mod mcp;
pub mod network;
pub mod profile;
pub mod profiles;
pub mod rules;
pub mod sed;
pub mod shell;
pub mod toolchains;

pub use audit::AuditPolicy;
pub use jobs::JobsPolicy;
pub use mcp::McpPolicy;
pub use network::{Domains, NetworkSetting, PROXY_PORT};
pub use rules::{PackSwitches, RuleSpec};
pub use shell::ShellPolicy;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The embedded default policy, used when neither `--policy` nor
/// `$AGENT_RSH_POLICY` names one.
pub const DEFAULT_POLICY: &str = include_str!("../../policy/default.toml");
/// `DEFAULT_POLICY` converted to JSON at build time: parsing it costs a
/// fraction of the TOML, and every process without a policy file pays it.
const DEFAULT_POLICY_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/default_policy.json"));
/// The commented example written by `agent-rsh policy init`.
pub const EXAMPLE_POLICY: &str = include_str!("../../policy.example.toml");

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Longest command string accepted, in bytes.
    pub max_command_bytes: usize,
    /// How command strings are read: `compound` (agent-rsh is the shell:
    /// lists, pipelines, redirections, expansions, each command checked)
    /// or `simple` (one simple command with literal words; every
    /// unquoted metacharacter, glob and expansion refused).
    pub syntax: Syntax,
    /// How guard findings map to deny or warn.
    pub trust: Trust,
    /// What to do when the kernel cannot enforce the confinement.
    pub confinement: ConfinementMode,
    /// Network access of the child: a level, or the domains it may reach
    /// through agent-rsh's proxy (`network::NetworkSetting`).
    pub network: NetworkSetting,
    /// With `network = "none"`, also give the run its own network namespace
    /// (no interface up) where the kernel allows. On by default: without
    /// it the run reads the host's socket tables (`/proc/self/net/tcp`,
    /// `unix`: every UNIX socket path of the host) and reaches the host's
    /// abstract UNIX sockets where Landlock cannot scope them. `false`
    /// saves the namespace's cost (about 1.5 ms per run on some kernels);
    /// seccomp and Landlock still refuse inet sockets.
    pub network_namespace: bool,
    pub commands: Commands,
    pub env: EnvPolicy,
    pub limits: Limits,
    pub output: OutputPolicy,
    pub workspace: WorkspacePolicy,
    pub scopes: Scopes,
    /// The file this policy was read from (none for the embedded default):
    /// the engine refuses to run a command that could rewrite it.
    #[serde(skip)]
    pub origin: Option<PathBuf>,
    /// The MCP server face (`agent-rsh mcp`).
    pub mcp: McpPolicy,
    /// Background jobs (`spawn` and friends).
    pub jobs: JobsPolicy,
    /// The interactive shell and the login contract (`[shell]`).
    pub shell: ShellPolicy,
    /// The audit log (`[audit]`).
    pub audit: AuditPolicy,
    /// Per-user sections merged over the policy (`[users.NAME]`).
    #[serde(skip_serializing_if = "profile::Sections::is_empty")]
    pub users: profile::Sections,
    /// Per-group sections merged over the policy (`[groups.NAME]`).
    #[serde(skip_serializing_if = "profile::Sections::is_empty")]
    pub groups: profile::Sections,
    /// Built-in argument and guard packs switched off: `[packs]`.
    pub packs: PackSwitches,
    /// The policy's own argument rules and guards: `[[rules]]`.
    pub rules: Vec<RuleSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Syntax {
    #[default]
    Compound,
    Simple,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Trust {
    Low,
    #[default]
    Medium,
    High,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ConfinementMode {
    /// Refuse to run when any confinement layer is unavailable.
    #[default]
    Required,
    /// Apply what the kernel supports and report the rest.
    BestEffort,
    /// No kernel confinement (string checks, limits and tree kill only).
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// No network: UNIX sockets only.
    #[default]
    None,
    /// 127.0.0.1 and ::1 only: the run's own network namespace, whose
    /// loopback interface is up and which has no other interface.
    Loopback,
    /// The host's network.
    Allow,
    /// Listed domains only, through agent-rsh's proxy: the run's own
    /// network namespace, whose one way out is the proxy's port on its
    /// loopback interface (`network = { allow = [...] }`).
    Domains,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Commands {
    /// Bare program names (or exact absolute paths) that may be the first word.
    pub allow: Vec<String>,
    /// Directories searched, in order, for allowed bare names. The caller's
    /// PATH is never used.
    pub search_path: Vec<PathBuf>,
    /// The project's own programs run: a path to a file in the workspace
    /// (`./a.out`, `target/debug/app`), or a name found in a directory of
    /// the shell's PATH that lies in the workspace (`node_modules/.bin`,
    /// `.venv/bin`). The workspace becomes executable for the kernel; every
    /// other confinement holds (scopes, network, no setuid, the deadline).
    pub workspace: bool,
}

impl Default for Commands {
    fn default() -> Self {
        Commands {
            allow: Vec::new(),
            search_path: ["/usr/local/bin", "/usr/bin", "/bin"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            workspace: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvPolicy {
    /// Variables copied from agent-rsh's own environment when present.
    pub pass: Vec<String>,
    /// Variables set by the policy; they override the built-in
    /// non-interactive defaults (PAGER=cat, ...).
    pub set: BTreeMap<String, String>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy {
            pass: ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "TMPDIR"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            set: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Maximum wall time of a run; a call may ask for less, never more.
    /// At most 24 hours.
    #[serde(deserialize_with = "timeout_ms")]
    pub timeout_ms: u64,
    /// Time between SIGTERM and SIGKILL at the deadline. At most 60 s.
    #[serde(deserialize_with = "kill_grace_ms")]
    pub kill_grace_ms: u64,
    /// CPU seconds (RLIMIT_CPU); 0 means "the deadline, rounded up".
    pub cpu_seconds: u64,
    /// Address space per process (RLIMIT_AS), bytes; 0 means unlimited.
    pub address_space_bytes: u64,
    /// Largest file the child may write (RLIMIT_FSIZE), bytes.
    pub file_size_bytes: u64,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: u64,
    /// Processes and threads of the whole run at once, root's included: a
    /// per-run cgroup (`pids.max`) where agent-rsh can create one, and
    /// RLIMIT_NPROC (counted per user by the kernel, not binding root).
    /// 0 means not bounded by agent-rsh: no `pids.max`, and RLIMIT_NPROC
    /// left as inherited (not "no forks": the guardian is a task of the
    /// run too, and RLIMIT_NPROC = 0 would not bind root).
    pub processes: u64,
    /// Memory of the whole run, every process together, in bytes (a per-run
    /// cgroup; swap does not extend it). Default: half of the physical
    /// memory, computed when the policy is loaded; 0 means unbounded.
    pub memory_bytes: u64,
    /// Size of a fresh workspace (a tmpfs in the run's mount view), bytes;
    /// 0 leaves a fresh workspace on the disk of `workspace.parent`.
    pub workspace_bytes: u64,
}

/// Longest `limits.timeout_ms` a policy may set: 24 hours.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest `limits.kill_grace_ms` a policy may set: 60 seconds.
pub const MAX_KILL_GRACE_MS: u64 = 60_000;
/// Largest policy file agent-rsh reads.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;
/// Most `[[rules]]` a policy may hold.
pub const MAX_RULES: usize = 1000;

/// Half of the physical memory: the default `limits.memory_bytes`.
pub fn default_memory_bytes() -> u64 {
    // SAFETY: sysconf takes an integer and has no memory effects.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || size <= 0 {
        // Unknown (never on Linux): no bound rather than a guess.
        return 0;
    }
    (pages as u64).saturating_mul(size as u64) / 2
}

/// A u64 no larger than `max`; the error is raised while the value is
/// read, so toml places it at the value's line and column.
fn bounded<'de, D: serde::Deserializer<'de>>(
    d: D,
    key: &str,
    max: u64,
    max_text: &str,
    hint: &str,
) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if v > max {
        return Err(serde::de::Error::custom(format!(
            "{key} = {v} is above the maximum of {max} ({max_text}); {hint}"
        )));
    }
    Ok(v)
}

fn timeout_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(
        d,
        "limits.timeout_ms",
        MAX_TIMEOUT_MS,
        "24 hours",
        "give a deadline of at most 86400000",
    )
}

/// `jobs.max_runtime_ms` replaces `limits.timeout_ms` for background jobs:
/// the same maximum.
pub(crate) fn job_runtime_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(
        d,
        "jobs.max_runtime_ms",
        MAX_TIMEOUT_MS,
        "24 hours",
        "give a deadline of at most 86400000",
    )
}

fn kill_grace_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(
        d,
        "limits.kill_grace_ms",
        MAX_KILL_GRACE_MS,
        "60 seconds",
        "give at most 60000: the grace only delays SIGKILL for a command that ignores SIGTERM",
    )
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 60_000,
            kill_grace_ms: 2_000,
            cpu_seconds: 0,
            address_space_bytes: 16 << 30,
            file_size_bytes: 1 << 30,
            open_files: 1024,
            processes: 512,
            memory_bytes: default_memory_bytes(),
            workspace_bytes: 4 << 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputPolicy {
    /// Captured bytes kept per stream (head and tail); the rest is counted.
    pub cap_bytes: usize,
    /// Remove ANSI escape sequences from captured output.
    pub strip_ansi: bool,
}

impl Default for OutputPolicy {
    fn default() -> Self {
        OutputPolicy {
            cap_bytes: 1 << 20,
            strip_ansi: true,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkspacePolicy {
    /// Where fresh per-run workspaces are created (default: /tmp).
    pub parent: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scopes {
    /// Paths the child may read (the workspace is always readable).
    pub read: Vec<PathBuf>,
    /// Paths the child may write besides the workspace.
    pub write: Vec<PathBuf>,
    /// Extra paths the child may execute besides the allowed commands and
    /// the ELF loader (e.g. git's libexec dir).
    pub exec: Vec<PathBuf>,
}

impl Default for Scopes {
    fn default() -> Self {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<PathBuf>>();
        // Libraries and data, not directories of programs: the ELF loader
        // maps whatever it may read, so `/usr/lib` as a whole (git-core,
        // gcc's cc1, llvm's lli: hundreds of programs on a Debian host)
        // would let `ld.so /usr/lib/git-core/git` run git under a policy
        // that does not allow it. The shared libraries live in the
        // multiarch directory (and /usr/lib64 elsewhere); Python's standard
        // library and packages, locales, terminfo, the magic database and
        // npm (which node runs as a script) in their own. A program that
        // needs more of /usr/lib gets it through its own entry in
        // `scopes.read` or `scopes.exec`, as git's exec path does.
        let arch = std::env::consts::ARCH;
        let mut read = vec![
            PathBuf::from(format!("/usr/lib/{arch}-linux-gnu")),
            PathBuf::from(format!("/lib/{arch}-linux-gnu")),
        ];
        read.extend(p(&[
            "/usr/lib64",
            "/lib64",
            "/usr/lib/locale",
            "/usr/lib/terminfo",
            "/usr/lib/file",
            "/usr/lib/mime",
            "/usr/lib/ssl",
            "/usr/lib/os-release",
            "/usr/lib/node_modules",
            "/usr/lib/python3",
        ]));
        // Only the versions this host has, so `policy show` stays short.
        // Debian's /usr/lib/python3.X/sitecustomize.py links into
        // /etc/python3.X: without it Python prints an error at every start
        // where no mount view hides the link.
        read.extend(
            (6..=20)
                .flat_map(|minor| {
                    [
                        PathBuf::from(format!("/usr/lib/python3.{minor}")),
                        PathBuf::from(format!("/etc/python3.{minor}")),
                    ]
                })
                .filter(|d| d.is_dir()),
        );
        read.extend(p(&[
            "/usr/share",
            "/etc/ld.so.cache",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d",
            "/etc/localtime",
            "/etc/passwd",
            "/etc/group",
            "/etc/nsswitch.conf",
            "/etc/hosts",
            "/etc/resolv.conf",
            "/etc/ssl",
            "/etc/ca-certificates",
            "/etc/gitconfig",
            "/etc/magic",
            "/etc/mime.types",
        ]));
        Scopes {
            read,
            write: Vec::new(),
            exec: Vec::new(),
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_command_bytes: 1 << 20,
            syntax: Syntax::default(),
            trust: Trust::default(),
            confinement: ConfinementMode::default(),
            network: NetworkSetting::default(),
            network_namespace: true,
            commands: Commands::default(),
            env: EnvPolicy::default(),
            limits: Limits::default(),
            output: OutputPolicy::default(),
            workspace: WorkspacePolicy::default(),
            scopes: Scopes::default(),
            origin: None,
            mcp: McpPolicy::default(),
            jobs: JobsPolicy::default(),
            shell: Default::default(),
            audit: Default::default(),
            users: Default::default(),
            groups: Default::default(),
            packs: Default::default(),
            rules: Vec::new(),
        }
    }
}

/// Where the effective policy came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Embedded,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Embedded => f.write_str("<embedded default policy>"),
        }
    }
}

/// A policy that cannot be used. Always fatal: agent-rsh fails closed.
#[derive(Debug)]
pub struct PolicyError {
    pub source: Source,
    /// 1-based line and column, when the error has a position.
    pub position: Option<(usize, usize)>,
    pub problem: Problem,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((l, c)) => write!(f, "policy {}:{l}:{c}: {}", self.source, self.problem),
            None => write!(f, "policy {}: {}", self.source, self.problem),
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.problem)
    }
}

/// What is wrong with a policy.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// TOML syntax, an unknown key, a value of the wrong type or out of
    /// range: the parser's message (the position is the `PolicyError`'s).
    #[error("{}", .0.message().trim())]
    Toml(Box<toml::de::Error>),
    #[error(
        "more than {MAX_RULES} [[rules]]; a policy may hold at most {MAX_RULES} (fold rules for the same command into one with several patterns)"
    )]
    TooManyRules,
    #[error(
        "the file is larger than {MAX_POLICY_BYTES} bytes (1 MiB), the most a policy may be; a policy states what it allows in a few kilobytes (fold repeated rules into one with a wider pattern)"
    )]
    TooLarge,
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    #[error("cannot read: the file is not valid UTF-8")]
    NotUtf8,
    #[error(transparent)]
    Invalid(#[from] Invalid),
}

/// A policy that parses but does not make sense: the checks serde cannot
/// express.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error(transparent)]
    Mcp(#[from] mcp::McpError),
    #[error(transparent)]
    Jobs(#[from] jobs::JobsError),
    #[error(transparent)]
    Packs(rules::RuleError),
    #[error("[[rules]]: {0}")]
    Rules(rules::RuleError),
    #[error("max_command_bytes must be at least 1")]
    MaxCommandBytes,
    #[error("limits.timeout_ms must be at least 1")]
    Timeout,
    #[error("commands.allow entry {0:?} must be a bare program name or an absolute path")]
    AllowEntry(String),
    #[error("commands.search_path entry {0:?} must be an absolute directory")]
    SearchPath(PathBuf),
    #[error("env name {0:?} is not a valid variable name")]
    EnvName(String),
    #[error(
        "env.pass must not pass {name}: {why}; set a fixed value in env.set if it is really needed"
    )]
    DangerousPass { name: String, why: &'static str },
    #[error(transparent)]
    Section(#[from] profile::SectionError),
    #[error(transparent)]
    Network(#[from] network::NetworkError),
}

impl Policy {
    /// Whether a run under this policy gets a `/tmp` of its own when its
    /// mount view is built (the view, not the policy, decides at run time:
    /// `PRIVATE_TMP` in the view says so). Not with confinement off (no
    /// view), nor when a scope names `/tmp` or a directory above it: the
    /// policy then asked for the host's `/tmp`, and the run sees that.
    pub fn private_tmp(&self) -> bool {
        let tmp = Path::new("/tmp");
        self.confinement != ConfinementMode::Off
            && !self
                .scopes
                .read
                .iter()
                .chain(&self.scopes.write)
                .chain(&self.scopes.exec)
                .any(|s| tmp.starts_with(s))
    }

    /// Parses policy text; `source` names it in errors.
    pub fn parse(text: &str, source: Source) -> Result<Policy, PolicyError> {
        // Before the parser: the number of rules is what makes a policy
        // expensive to load.
        if let Some(offset) = nth_rules_header(text, MAX_RULES + 1) {
            return Err(PolicyError {
                position: Some(line_col(text, offset)),
                problem: Problem::TooManyRules,
                source,
            });
        }
        let mut policy: Policy = toml::from_str(text).map_err(|e| PolicyError {
            position: e.span().map(|s| line_col(text, s.start)),
            problem: Problem::Toml(Box::new(e)),
            source: source.clone(),
        })?;
        if let Source::File(path) = &source {
            policy.origin = Some(path.clone());
        }
        // Rules written as an inline array escape the header count.
        if policy.rules.len() > MAX_RULES {
            return Err(PolicyError {
                source,
                position: None,
                problem: Problem::TooManyRules,
            });
        }
        policy.validate().map_err(|e| PolicyError {
            source,
            position: None,
            problem: e.into(),
        })?;
        Ok(policy)
    }

    /// Reads and parses a policy file; one larger than 1 MiB is refused
    /// without being read further.
    pub fn load_file(path: &Path) -> Result<Policy, PolicyError> {
        let text = read_capped(path, MAX_POLICY_BYTES).map_err(|problem| PolicyError {
            source: Source::File(path.to_path_buf()),
            position: None,
            problem,
        })?;
        Policy::parse(&text, Source::File(path.to_path_buf()))
    }

    /// The embedded default policy: `DEFAULT_POLICY`, read from its JSON
    /// form (build.rs), with the same checks as a policy file.
    pub fn embedded() -> Policy {
        let mut policy: Policy =
            serde_json::from_str(DEFAULT_POLICY_JSON).expect("embedded policy parses");
        policy.origin = None;
        policy.validate().expect("embedded policy is valid");
        policy
    }

    /// Lookup order: explicit path, then `$AGENT_RSH_POLICY`, then embedded.
    pub fn locate(explicit: Option<&Path>) -> Result<(Policy, Source), PolicyError> {
        let from_env = std::env::var_os("AGENT_RSH_POLICY").filter(|v| !v.is_empty());
        match explicit
            .map(Path::to_path_buf)
            .or_else(|| from_env.map(PathBuf::from))
        {
            Some(path) => Ok((Policy::load_file(&path)?, Source::File(path))),
            None => Ok((Policy::embedded(), Source::Embedded)),
        }
    }

    /// Semantic checks serde cannot express.
    fn validate(&self) -> Result<(), Invalid> {
        self.mcp.validate()?;
        self.jobs.validate()?;
        self.packs.validate().map_err(Invalid::Packs)?;
        rules::validate_policy_rules(&self.rules).map_err(Invalid::Rules)?;
        if self.max_command_bytes == 0 {
            return Err(Invalid::MaxCommandBytes);
        }
        if self.limits.timeout_ms == 0 {
            return Err(Invalid::Timeout);
        }
        for name in &self.commands.allow {
            if name.is_empty() || (name.contains('/') && !name.starts_with('/')) {
                return Err(Invalid::AllowEntry(name.clone()));
            }
        }
        for dir in &self.commands.search_path {
            if !dir.is_absolute() {
                return Err(Invalid::SearchPath(dir.clone()));
            }
        }
        for name in self.env.pass.iter().chain(self.env.set.keys()) {
            if !crate::lex::is_identifier(name) {
                return Err(Invalid::EnvName(name.clone()));
            }
        }
        // PATH, HOME and TMPDIR may be listed (they are pinned, never passed).
        for name in self
            .env
            .pass
            .iter()
            .filter(|n| !env::PINNED.contains(&n.as_str()))
        {
            if let Some(why) = env::dangerous(name) {
                return Err(Invalid::DangerousPass {
                    name: name.clone(),
                    why,
                });
            }
        }
        self.network.validate()?;
        profile::validate(self)?;
        Ok(())
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render policy: {e}\n"))
    }
}

/// The file's text when it holds at most `cap` bytes; reads no more than
/// `cap + 1` bytes whatever its size (a FIFO or /dev/zero included).
fn read_capped(path: &Path, cap: u64) -> Result<String, Problem> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(Problem::Read)?;
    let mut buf = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(Problem::Read)?;
    if buf.len() as u64 > cap {
        return Err(Problem::TooLarge);
    }
    String::from_utf8(buf).map_err(|_| Problem::NotUtf8)
}

/// Byte offset of the `n`th `[[rules]]` table header (1-based), spaces
/// inside the brackets allowed as TOML allows them.
fn nth_rules_header(text: &str, n: usize) -> Option<usize> {
    let mut seen = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let t = line.trim_start_matches([' ', '\t']);
        let Some(inner) = t.strip_prefix("[[") else {
            continue;
        };
        let Some(end) = inner.find("]]") else {
            continue;
        };
        if inner[..end].trim_matches([' ', '\t']) == "rules" {
            seen += 1;
            if seen == n {
                return Some(start + (line.len() - t.len()));
            }
        }
    }
    None
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses_and_allows_inspection_set() {
        let p = Policy::embedded();
        for c in ["ls", "cat", "grep", "find", "echo", "true", "false", "du"] {
            assert!(p.commands.allow.iter().any(|a| a == c), "{c} missing");
        }
        assert!(!p.commands.allow.iter().any(|a| a == "sh" || a == "bash"));
    }

    #[test]
    fn the_embedded_json_is_the_default_policy_text() {
        let from_toml = Policy::parse(DEFAULT_POLICY, Source::Embedded).unwrap();
        let from_json = Policy::embedded();
        assert_eq!(from_json.to_toml(), from_toml.to_toml());
        assert_eq!(
            serde_json::to_string(&from_json).unwrap(),
            serde_json::to_string(&from_toml).unwrap()
        );
    }

    #[test]
    fn example_parses() {
        Policy::parse(EXAMPLE_POLICY, Source::Embedded).unwrap();
    }

    #[test]
    fn unknown_key_has_line_and_column() {
        let e = Policy::parse("[commands]\nallow = []\nalow = 1\n", Source::Embedded).unwrap_err();
        assert_eq!(e.position, Some((3, 1)));
        assert!(e.problem.to_string().contains("alow"), "{}", e.problem);
    }

    #[test]
    fn syntax_error_has_position() {
        let e = Policy::parse("trust = \n", Source::Embedded).unwrap_err();
        assert_eq!(e.position.map(|p| p.0), Some(1));
    }

    #[test]
    fn dangerous_pass_is_refused() {
        let e = Policy::parse("[env]\npass = [\"LD_PRELOAD\"]\n", Source::Embedded).unwrap_err();
        assert!(e.problem.to_string().contains("LD_PRELOAD"));
    }

    #[test]
    fn limits_above_their_maximum_have_line_and_column() {
        let e = Policy::parse("[limits]\nkill_grace_ms = 60001\n", Source::Embedded).unwrap_err();
        assert_eq!(e.position, Some((2, 17)), "{e}");
        assert!(
            e.problem
                .to_string()
                .contains("limits.kill_grace_ms = 60001"),
            "{e}"
        );
        assert!(e.problem.to_string().contains("60 seconds"), "{e}");
        let e = Policy::parse("limits.timeout_ms = 86400001\n", Source::Embedded).unwrap_err();
        assert_eq!(e.position, Some((1, 21)), "{e}");
        assert!(e.problem.to_string().contains("24 hours"), "{e}");
        let p = Policy::parse(
            "[limits]\nkill_grace_ms = 60000\ntimeout_ms = 86400000\n",
            Source::Embedded,
        )
        .unwrap();
        assert_eq!(p.limits.kill_grace_ms, 60_000);
        assert_eq!(p.limits.timeout_ms, MAX_TIMEOUT_MS);
        // Inside a user's section the bound holds as well.
        assert!(
            Policy::parse(
                "[users.a]\nlimits.kill_grace_ms = 100000\n",
                Source::Embedded
            )
            .is_err()
        );
    }

    #[test]
    fn memory_defaults_to_half_of_physical_memory() {
        let p = Policy::parse("", Source::Embedded).unwrap();
        let half = default_memory_bytes();
        assert!(half > 0);
        assert_eq!(p.limits.memory_bytes, half);
        assert_eq!(p.limits.workspace_bytes, 4 << 30);
        let p = Policy::parse("[limits]\nmemory_bytes = 0\n", Source::Embedded).unwrap();
        assert_eq!(p.limits.memory_bytes, 0);
    }

    #[test]
    fn too_many_rules_are_refused_at_the_first_one_too_many() {
        let rule = "[[rules]]\ncommand = \"git\"\ndeny = [\"x\"]\n";
        let text = format!("# head\n{}", rule.repeat(MAX_RULES + 1));
        let e = Policy::parse(&text, Source::Embedded).unwrap_err();
        assert_eq!(e.position, Some((2 + 3 * MAX_RULES, 1)), "{e}");
        assert!(e.problem.to_string().contains("at most 1000"), "{e}");
        assert_eq!(nth_rules_header("  [[ rules ]]\n", 1), Some(2));
        assert_eq!(nth_rules_header("[[rulesx]]\n[rules]\n", 1), None);
    }

    #[test]
    fn a_policy_file_over_1_mib_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        let mut text = "# padding\n".repeat((MAX_POLICY_BYTES as usize) / 10 + 1);
        text.push_str("trust = \"low\"\n");
        std::fs::write(&big, &text).unwrap();
        let e = Policy::load_file(&big).unwrap_err();
        assert!(
            e.problem.to_string().contains("larger than 1048576 bytes"),
            "{e}"
        );
        let exact = dir.path().join("exact.toml");
        let head = "trust = \"low\"\n#";
        let fill = "x".repeat(MAX_POLICY_BYTES as usize - head.len() - 1);
        std::fs::write(&exact, format!("{head}{fill}\n")).unwrap();
        assert_eq!(std::fs::metadata(&exact).unwrap().len(), MAX_POLICY_BYTES);
        Policy::load_file(&exact).unwrap();
    }

    #[test]
    fn relative_allow_entry_is_refused() {
        assert!(Policy::parse("[commands]\nallow = [\"./ls\"]\n", Source::Embedded).is_err());
    }
}
