//! The login face: agent-rsh as a user's login shell.
//!
//! Invocations (decided before the subcommand parser sees the arguments):
//! - `agent-rsh -c CMD`: what sshd, su and CI runners call; one command,
//!   its exit status is agent-rsh's;
//! - `-agent-rsh` (argv[0] starting with `-`), `agent-rsh -l`, or
//!   `agent-rsh` with no arguments: an interactive restricted shell when
//!   standard input is a terminal, otherwise commands read from standard
//!   input one per line (`ssh box < script`).
//!
//! Every line goes through the same door as `agent-rsh run`: a `Request`
//! handed to `engine::execute`. The workspace is the user's home directory
//! (from the password database, never `$HOME`), and it persists.
//!
//! Policy: `/etc/agent-rsh/policy.toml`, with `[groups.NAME]` and
//! `[users.NAME]` sections merged over it (see `profile`). A missing or
//! unreadable system policy fails closed: the account gets no shell at all
//! rather than a policy the administrator did not write. `$AGENT_RSH_POLICY`
//! is honoured only when the effective system policy for this user says
//! `shell.allow_policy_env = true`; otherwise users could pick their own.

/// `eprintln!` without the panic: a hung-up terminal or a closed pipe must
/// not take the session down before it logs its end.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` without the panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod session;

use crate::audit::{AuditLog, Origin, Record};
pub use crate::policy::ShellPolicy;
use crate::policy::profile::Identity;
use crate::policy::{Invalid, Policy, PolicyError, Source};
use crate::result::code;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The system policy every login face reads.
pub const SYSTEM_POLICY: &str = "/etc/agent-rsh/policy.toml";

/// How agent-rsh was invoked as a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// `-c CMD`.
    Command { login: bool, command: String },
    /// No command: interactive on a terminal, else lines from stdin.
    Session { login: bool },
}

/// A login-shell invocation agent-rsh cannot take (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("as a login shell agent-rsh takes only `-c COMMAND` or `-l`")]
    LoginArgs,
    #[error("after -l agent-rsh takes only `-c COMMAND`, or nothing for a session")]
    AfterLogin,
    #[error("-c needs a command string: agent-rsh -c 'ls -la'")]
    NoCommand,
    #[error(
        "-c takes exactly one command string; arguments after it (sh's $0, $1, ...) are not supported"
    )]
    ExtraArgs,
    #[error("the -c command is not valid UTF-8")]
    NotUtf8,
}

/// Recognizes the login-shell invocations; `None` leaves the arguments to
/// the subcommand parser. `Some(Err)` is a usage error (exit 2).
pub fn detect(args: &[OsString]) -> Option<Result<Invocation, UsageError>> {
    let argv0 = args.first().map(|a| a.as_bytes()).unwrap_or(b"");
    let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or(argv0);
    let mut login = base.first() == Some(&b'-');
    let rest = args.get(1..).unwrap_or(&[]);
    let mut i = 0;
    let mut want_command = false;
    match rest.first().map(|a| a.as_bytes()) {
        None => return Some(Ok(Invocation::Session { login })),
        Some(b"-l") | Some(b"--login") => {
            login = true;
            i = 1;
        }
        Some(b"-lc") | Some(b"-cl") => {
            login = true;
            want_command = true;
            i = 1;
        }
        Some(b"-c") => {}
        Some(_) if login => return Some(Err(UsageError::LoginArgs)),
        Some(_) => return None,
    }
    if !want_command {
        match rest.get(i).map(|a| a.as_bytes()) {
            None => return Some(Ok(Invocation::Session { login })),
            Some(b"-c") => {
                want_command = true;
                i += 1;
            }
            Some(_) => return Some(Err(UsageError::AfterLogin)),
        }
    }
    debug_assert!(want_command);
    let Some(cmd) = rest.get(i) else {
        return Some(Err(UsageError::NoCommand));
    };
    if rest.len() > i + 1 {
        return Some(Err(UsageError::ExtraArgs));
    }
    match cmd.to_str() {
        Some(c) => Some(Ok(Invocation::Command {
            login,
            command: c.to_string(),
        })),
        None => Some(Err(UsageError::NotUtf8)),
    }
}

/// Runs a detected invocation; returns the exit code.
pub fn main(inv: Result<Invocation, UsageError>) -> i32 {
    let inv = match inv {
        Ok(i) => i,
        Err(e) => {
            say_err!("agent-rsh: {e}");
            return code::USAGE;
        }
    };
    let face = match &inv {
        Invocation::Command { .. } => "login-command",
        Invocation::Session { .. } if stdin_is_tty() => "interactive",
        Invocation::Session { .. } => "script",
    };
    let login = match Login::establish(face) {
        Ok(l) => l,
        Err(LoginError::Denied(d)) => {
            say_err!(
                "agent-rsh: denied ({}): {}; hint: {}; nothing was run",
                d.rule,
                d.reason,
                d.hint.as_deref().unwrap_or("ask an administrator")
            );
            return code::DENIED;
        }
        Err(e) => {
            say_err!("agent-rsh: {e}");
            say_err!("agent-rsh: nothing was run");
            return code::FAILED;
        }
    };
    if let Err(e) = crate::exec::install_signal_forwarding() {
        say_err!("agent-rsh: cannot install signal handlers: {e}");
        return code::FAILED;
    }
    let mut s = session::Session::new(login);
    match inv {
        Invocation::Command { command, .. } => s.run_command(&command),
        Invocation::Session { .. } if face == "interactive" => s.interactive(),
        Invocation::Session { .. } => s.script(),
    }
}

fn stdin_is_tty() -> bool {
    // SAFETY: isatty has no memory effects.
    unsafe { libc::isatty(0) == 1 }
}

/// Everything a login session stands on: who, where, under which policy.
pub struct Login {
    pub policy: Policy,
    pub identity: Identity,
    /// Canonical home directory: the persistent workspace.
    pub home: PathBuf,
    pub origin: Origin,
    pub audit: Option<AuditLog>,
}

/// Why a login face cannot start: nothing runs.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("cannot read the password database: {0}")]
    Passwd(nix::Error),
    #[error("uid {0} has no entry in the password database")]
    NoPasswdEntry(u32),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(
        "{0}; this account's shell needs a system policy (an administrator can start from `agent-rsh policy init`)"
    )]
    NoSystemPolicy(PolicyError),
    #[error("home directory {} of {user} cannot be used: {source}", .dir.display())]
    Home {
        dir: PathBuf,
        user: String,
        source: std::io::Error,
    },
    #[error("home {} is not a directory", .0.display())]
    HomeNotADirectory(PathBuf),
    #[error(
        "the policy looks up programs in {}, inside the home directory {} that commands may write; remove it from commands.search_path and commands.allow",
        .program.display(),
        .home.display()
    )]
    ProgramInHome { program: PathBuf, home: PathBuf },
    #[error("{0}; the policy asks for an audit log (audit.login), so nothing runs without one")]
    AuditOpen(std::io::Error),
    #[error("{0}")]
    AuditWrite(std::io::Error),
    /// The account's home is refused as a workspace (exit 126).
    #[error("{}", .0.reason)]
    Denied(crate::check::Denial),
}

impl Login {
    fn establish(face: &'static str) -> Result<Login, LoginError> {
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let user = nix::unistd::User::from_uid(uid.into())
            .map_err(LoginError::Passwd)?
            .ok_or(LoginError::NoPasswdEntry(uid))?;
        let identity = Identity {
            user: user.name.clone(),
            groups: group_names(user.gid),
        };
        let (policy, detail) = login_policy(&identity)?;
        let home = user.dir.canonicalize().map_err(|source| LoginError::Home {
            dir: user.dir.clone(),
            user: user.name.clone(),
            source,
        })?;
        if !home.is_dir() {
            return Err(LoginError::HomeNotADirectory(home));
        }
        // The home is every command's workspace (its write scope): `/`, a
        // system directory or one holding the policy cannot be one.
        crate::workspace::refuse_system(&user.dir, policy.origin.as_deref()).map_err(|d| {
            LoginError::Denied(crate::check::Denial {
                hint: Some(format!(
                    "the home directory of {} in the password database must be a directory of its own, such as /home/{}; ask an administrator to change it (usermod -d)",
                    user.name, user.name
                )),
                ..d
            })
        })?;
        // Commands may write anywhere in the home: a program found there
        // could be replaced by the user.
        let lookups = policy
            .commands
            .search_path
            .iter()
            .map(PathBuf::as_path)
            .chain(policy.commands.allow.iter().map(Path::new))
            .filter(|p| p.is_absolute());
        for p in lookups {
            let real = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            if real.starts_with(&home) {
                return Err(LoginError::ProgramInHome {
                    program: p.to_path_buf(),
                    home,
                });
            }
        }
        let origin = Origin::current(face, user.name, uid);
        let audit = if policy.audit.login {
            let log = AuditLog::open(&policy.audit.path).map_err(LoginError::AuditOpen)?;
            if face != "login-command" {
                let mut rec = Record::new("session-start", &origin);
                rec.detail = Some(detail);
                log.append(&rec).map_err(LoginError::AuditWrite)?;
            }
            Some(log)
        } else {
            None
        };
        Ok(Login {
            policy,
            identity,
            home,
            origin,
            audit,
        })
    }
}

/// The names of the process's groups (primary and supplementary).
fn group_names(primary: nix::unistd::Gid) -> Vec<String> {
    let mut gids = nix::unistd::getgroups().unwrap_or_default();
    gids.push(primary);
    gids.push(nix::unistd::getgid());
    gids.sort_unstable_by_key(|g| g.as_raw());
    gids.dedup();
    gids.into_iter()
        .filter_map(|g| nix::unistd::Group::from_gid(g).ok().flatten())
        .map(|g| g.name)
        .collect()
}

/// The system policy with this user's sections, or the policy named by
/// `$AGENT_RSH_POLICY` when the system policy allows that. Returns the
/// policy and a description of where it came from, for the audit log.
fn login_policy(who: &Identity) -> Result<(Policy, String), LoginError> {
    let system = Path::new(SYSTEM_POLICY);
    let base = Policy::load_file(system).map_err(LoginError::NoSystemPolicy)?;
    let (policy, sections) = with_sections(&base, who, Source::File(system.into()))?;
    let describe = |path: &Path, sections: &[String]| {
        if sections.is_empty() {
            format!("policy {}", path.display())
        } else {
            format!("policy {} [{}]", path.display(), sections.join("] ["))
        }
    };
    // The simulation seam takes confinement layers away; only an account
    // that may choose its whole policy may use it.
    if !policy.shell.allow_policy_env {
        if std::env::var_os(crate::confine::probe::SIMULATE_ENV).is_some_and(|v| !v.is_empty()) {
            say_err!(
                "agent-rsh: ignoring ${}: {SYSTEM_POLICY} does not let users choose their policy (shell.allow_policy_env)",
                crate::confine::probe::SIMULATE_ENV
            );
        }
        crate::confine::probe::close_seam();
    }
    let from_env = std::env::var_os("AGENT_RSH_POLICY").filter(|v| !v.is_empty());
    match from_env {
        Some(p) if policy.shell.allow_policy_env => {
            let path = PathBuf::from(p);
            let other = Policy::load_file(&path)?;
            let (policy, sections) = with_sections(&other, who, Source::File(path.clone()))?;
            Ok((policy, describe(&path, &sections)))
        }
        Some(_) => {
            say_err!(
                "agent-rsh: ignoring $AGENT_RSH_POLICY: {SYSTEM_POLICY} does not let users choose their policy (shell.allow_policy_env)"
            );
            Ok((policy, describe(system, &sections)))
        }
        None => Ok((policy, describe(system, &sections))),
    }
}

fn with_sections(
    base: &Policy,
    who: &Identity,
    source: Source,
) -> Result<(Policy, Vec<String>), PolicyError> {
    crate::policy::profile::effective(base, who, &source).map_err(|e| PolicyError {
        source,
        position: None,
        problem: Invalid::Section(e).into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn cmd(login: bool, c: &str) -> Option<Result<Invocation, UsageError>> {
        Some(Ok(Invocation::Command {
            login,
            command: c.into(),
        }))
    }

    #[test]
    fn login_invocations_are_recognized() {
        let session = |login| Some(Ok(Invocation::Session { login }));
        assert_eq!(detect(&args(&["agent-rsh"])), session(false));
        assert_eq!(detect(&args(&["-agent-rsh"])), session(true));
        assert_eq!(detect(&args(&["/usr/bin/agent-rsh", "-l"])), session(true));
        assert_eq!(detect(&args(&["agent-rsh", "-c", "ls"])), cmd(false, "ls"));
        assert_eq!(detect(&args(&["-agent-rsh", "-c", "ls"])), cmd(true, "ls"));
        assert_eq!(
            detect(&args(&["agent-rsh", "-l", "-c", "ls"])),
            cmd(true, "ls")
        );
        assert_eq!(detect(&args(&["agent-rsh", "-lc", "ls"])), cmd(true, "ls"));
    }

    #[test]
    fn subcommands_are_left_to_the_parser() {
        for a in [
            &["agent-rsh", "run", "ls"][..],
            &["agent-rsh", "--help"],
            &["agent-rsh", "--version"],
            &["agent-rsh", "check", "-c"],
        ] {
            assert_eq!(detect(&args(a)), None, "{a:?}");
        }
    }

    #[test]
    fn malformed_login_invocations_are_usage_errors() {
        for a in [
            &["agent-rsh", "-c"][..],
            &["agent-rsh", "-c", "ls", "extra"],
            &["-agent-rsh", "run", "ls"],
            &["agent-rsh", "-l", "ls"],
        ] {
            assert!(matches!(detect(&args(a)), Some(Err(_))), "{a:?}");
        }
    }
}
