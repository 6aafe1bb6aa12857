//! Command-line faces: flag parsing and rendering; the work is elsewhere.

use crate::admit::{self, CommandInput, Request};
use crate::check;
use crate::engine::{self, RunOptions, TextSink};
use crate::exec::Sink;
use crate::exit::{CliError, CliResult, exit_code};
use crate::flags::RequestArgs;
use crate::plan::StdinMode;
use crate::policy::{self, Policy};
use crate::result::{Encoding, Event, RunResult, Status, Stream, code};
use clap::{Args, Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "agent-rsh",
    version,
    about = "A restricted shell: runs one checked command under a TOML policy, confined by the kernel",
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Policy file (default: $AGENT_RSH_POLICY, else the embedded default).
    ///
    /// Given before or after the subcommand. The embedded default is the
    /// read-only inspection set; a policy that cannot be read or parsed
    /// fails closed (exit 125), naming file, line and column; so does a file
    /// larger than 1 MiB, one with more than 1,000 [[rules]],
    /// limits.timeout_ms or jobs.max_runtime_ms above 24 hours, or
    /// limits.kill_grace_ms above 60 seconds.
    #[arg(long, global = true, value_name = "FILE")]
    policy: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
#[command(defer = true)]
enum Cmd {
    /// Check a command against the policy and run it.
    Run(RunArgs),
    /// Check a command and print the verdict; nothing runs.
    Check(CheckArgs),
    /// Show, validate or create a policy.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// Show which kernel confinement works here and what a run would enforce.
    Doctor {
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve the checked, confined run as an MCP tool over stdio.
    Mcp(crate::mcp::McpArgs),
    #[command(flatten)]
    Jobs(crate::jobs::cli::JobCmd),
    /// Print a completion script for SHELL on stdout.
    ///
    /// bash: `agent-rsh completions bash > /etc/bash_completion.d/agent-rsh`;
    /// zsh: into a directory on $fpath as `_agent-rsh`; fish: into
    /// ~/.config/fish/completions/agent-rsh.fish.
    Completions {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
}

/// The shells `completions` writes scripts for.
#[derive(Clone, Copy, clap::ValueEnum)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// The whole command line as clap sees it (for the man page and the
/// completion scripts, which are generated from it).
///
/// Each subcommand's own flags are added only when clap builds that
/// subcommand (`defer`): a run parses its own subcommand's flags, not the
/// whole tree's, which is most of clap's start-up cost.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// An option of `agent-rsh SUB` written after the command's first word
/// without a `--` anywhere: clap gives the trailing words to the command
/// (`run "make test" --json` runs `make test --json`), which is never what
/// was meant. With `--` the words are the program's, as written.
fn misplaced_option(args: &[std::ffi::OsString], sub: &str, words: &[String]) -> Option<String> {
    if args.iter().any(|a| a == "--") {
        return None;
    }
    let root = expanded(command());
    let cmd = root.find_subcommand(sub)?;
    let longs: Vec<&str> = cmd
        .get_arguments()
        .chain(root.get_arguments())
        .filter_map(|a| a.get_long())
        .collect();
    words.iter().skip(1).find_map(|w| {
        let name = w.strip_prefix("--")?;
        let name = name.split_once('=').map_or(name, |(n, _)| n);
        longs.contains(&name).then(|| w.clone())
    })
}

/// [`command`] with every subcommand's flags in place before `--policy`
/// is inherited, in the order the completion scripts list them (a deferred
/// subcommand would receive the inherited `--policy` before its own flags).
fn expanded(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names.iter().fold(cmd, |cmd, name| {
        cmd.mut_subcommand(name, |sub| {
            if sub.has_subcommands() {
                return expanded(sub);
            }
            // Built alone, the subcommand has its own flags only.
            let mut alone = sub.clone().disable_help_flag(true);
            alone.build();
            let own: Vec<clap::Arg> = alone.get_arguments().cloned().collect();
            sub.defer(|sub| sub).args(own)
        })
    })
}

#[derive(Args)]
struct RunArgs {
    /// Print one JSON RunResult at the end instead of live output.
    #[arg(long, conflicts_with = "events")]
    json: bool,
    /// Print JSON lines: start, output chunks, exit.
    ///
    /// The last line is always the exit event, carrying the RunResult.
    /// Output events carry text as `data` (ANSI escapes stripped unless
    /// --color) and anything else, NUL and other control bytes included,
    /// as `data_b64`.
    #[arg(long)]
    events: bool,
    /// Keep the fresh workspace after the run and report its path.
    #[arg(long)]
    keep: bool,
    /// Pass agent-rsh's standard input to the command (default /dev/null),
    /// relayed through a pipe, or a pty of the run's own on a terminal.
    #[arg(long)]
    stdin: bool,
    /// Keep ANSI escape sequences in captured output.
    ///
    /// They are stripped by default (output.strip_ansi).
    #[arg(long)]
    color: bool,
    /// Encode captured output and output events as base64.
    #[arg(long)]
    base64: bool,
    /// Output kept in the JSON result, both streams together: head and
    /// tail at line boundaries, the middle elided and counted (at most
    /// output.cap_bytes per stream are captured).
    #[arg(long, value_name = "BYTES", default_value_t = crate::result::DEFAULT_MAX_OUTPUT as u64,
          value_parser = clap::value_parser!(u64).range(256..))]
    max_output: u64,
    /// The whole confinement report in the JSON result (paths, rules),
    /// not its summary.
    #[arg(long)]
    verbose: bool,
    #[command(flatten)]
    request: RequestArgs,
}

#[derive(Args)]
struct CheckArgs {
    /// Print the verdict as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    request: RequestArgs,
}

#[derive(Subcommand)]
#[command(defer = true)]
enum PolicyCmd {
    /// Print the effective policy with every default filled in.
    Show {
        /// List the argument rules and guards in force instead.
        #[arg(long)]
        rules: bool,
    },
    /// Validate a policy file.
    Check {
        /// The policy file.
        file: PathBuf,
    },
    /// Write the commented example policy, or a profile, to FILE
    /// (default: stdout).
    Init {
        /// Where to write it; refuses to overwrite an existing file.
        file: Option<PathBuf>,
        /// A ready policy instead of the example: inspect (read-only),
        /// coding (an agent builds and tests a project), ci (a CI script,
        /// network allowed).
        #[arg(long, value_name = "NAME")]
        profile: Option<crate::policy::profiles::Profile>,
    },
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> ExitCode {
    sanitize_std_fds();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::script::INTERPRETER_ARG)
    {
        return exit_code(crate::script::interp::main(&args));
    }
    if let Some(st) = crate::script::interp::nested_main(&args) {
        return exit_code(st);
    }
    if let Some(inv) = crate::shell::detect(&args) {
        if args.len() == 1
            && inv == Ok(crate::shell::Invocation::Session { login: false })
            && !std::path::Path::new(crate::shell::SYSTEM_POLICY).exists()
        {
            // Typed in a terminal, not started as a login shell, and no
            // system policy for a session: what the user needs is usage.
            let mut cmd = <Cli as clap::CommandFactory>::command();
            eprintln!(
                "agent-rsh: no command given (an interactive session needs the system policy {}, which does not exist)\n",
                crate::shell::SYSTEM_POLICY
            );
            let _ = cmd.write_help(&mut std::io::stderr());
            eprintln!("\nTry: agent-rsh run -- ls -la");
            return exit_code(code::USAGE);
        }
        return exit_code(crate::shell::main(inv));
    }
    if args.len() == 2 && args[1] == crate::jobs::SUPERVISE {
        return exit_code(crate::jobs::cli::supervise());
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            if e.kind() == clap::error::ErrorKind::InvalidSubcommand {
                suggest_run(&args);
            }
            return exit_code(if e.use_stderr() { code::USAGE } else { 0 });
        }
    };
    let words = match &cli.cmd {
        Cmd::Run(a) => Some(("run", a.request.words())),
        Cmd::Check(a) => Some(("check", a.request.words())),
        Cmd::Jobs(crate::jobs::cli::JobCmd::Spawn(a)) => Some(("spawn", a.request().words())),
        _ => None,
    };
    if let Some((sub, words)) = words
        && let Some(word) = misplaced_option(&args, sub, words)
    {
        eprintln!(
            "agent-rsh: `{word}` after the command is an option of `agent-rsh {sub}`, not a word of the command: put options before the command (agent-rsh {sub} {word} ... 'CMD'), or write `--` before the command to give the program every word after it"
        );
        return exit_code(code::USAGE);
    }
    if matches!(
        cli.cmd,
        Cmd::Check(_) | Cmd::Policy(_) | Cmd::Doctor { .. } | Cmd::Completions { .. }
    ) {
        // Report-only commands end quietly when their reader goes away
        // (`agent-rsh policy show | head`), as other Unix filters do, instead
        // of panicking on EPIPE. `run` keeps SIGPIPE ignored: a closed stdout
        // must not end the command it is running.
        // SAFETY: signal(2) before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let policy = cli.policy.as_deref();
    let r = match cli.cmd {
        Cmd::Run(a) => cmd_run(policy, a),
        Cmd::Check(a) => cmd_check(policy, a),
        Cmd::Policy(p) => cmd_policy(policy, p),
        Cmd::Doctor { json } => Policy::locate(policy)
            .map_err(|e| CliError::policy(&e, "nothing was run"))
            .map(|(p, source)| exit_code(crate::doctor::doctor(&p, &source.to_string(), json))),
        Cmd::Mcp(a) => crate::mcp::main(policy, a),
        Cmd::Jobs(c) => crate::jobs::cli::main(policy, c),
        Cmd::Completions { shell } => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(
                shell,
                &mut expanded(command()),
                "agent-rsh",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    r.unwrap_or_else(|e| e.print())
}

/// `agent-rsh ls -la`: when the unknown subcommand is a program the policy
/// (`--policy` is not read here: `$AGENT_RSH_POLICY`, else the embedded
/// default) allows, says how to run it.
fn suggest_run(args: &[std::ffi::OsString]) {
    let Some(name) = args.get(1).and_then(|a| a.to_str()) else {
        return;
    };
    let Ok((policy, _)) = Policy::locate(None) else {
        return;
    };
    if policy.commands.allow.iter().any(|a| a == name) {
        let words: Vec<String> = args[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        eprintln!(
            "\nagent-rsh: `{name}` is a program the policy allows; to run it: agent-rsh run -- {}",
            words.join(" ")
        );
    }
}

/// Fds 0-2 must be open, or the child's pipes could land on them.
fn sanitize_std_fds() {
    for fd in 0..3 {
        // SAFETY: fcntl probe and open of /dev/null; no memory effects.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) < 0 {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}

fn load_policy(path: Option<&Path>) -> Result<Policy, CliError> {
    Policy::locate(path)
        .map(|(p, _)| p)
        .map_err(|e| CliError::policy(&e, "nothing was run"))
}

fn cmd_run(policy: Option<&Path>, a: RunArgs) -> CliResult {
    let req = a.request.request(if a.stdin {
        StdinMode::Inherit
    } else {
        StdinMode::Null
    });
    let policy = match load_policy(policy) {
        // The engine refuses a policy the command could rewrite.
        Ok(p) => p,
        Err(e) if a.json || a.events => {
            let r = RunResult::failed(req.display(), "policy cannot be loaded".into());
            return Err(e.with_stdout(json_result(&r, a.events)));
        }
        Err(e) => return Err(e),
    };
    crate::exec::install_signal_forwarding()
        .map_err(|e| CliError::new(code::FAILED, format!("cannot install signal handlers: {e}")))?;
    let audit = crate::audit::open_for_agent(&policy).map_err(|e| {
        CliError::new(
            code::FAILED,
            format!("{e}; nothing was run (the policy asks for audit.agent)"),
        )
    })?;
    let encoding = if a.base64 {
        Encoding::Base64
    } else {
        Encoding::Text
    };
    let opts = RunOptions {
        capture: a.json || a.events,
        encoding,
        color: a.color,
        workspace: a.request.workspace.clone(),
        keep: a.keep,
        cancel: None,
        max_output: Some(usize::try_from(a.max_output).unwrap_or(usize::MAX)),
        verbose: a.verbose,
    };
    let r = if a.events {
        let strip = policy.output.strip_ansi && !a.color;
        let mut sink = EventSink::new(&req, encoding, strip);
        let r = engine::execute(&policy, &req, &opts, &mut sink);
        sink.finish();
        r
    } else if a.json {
        engine::execute(&policy, &req, &opts, &mut NullSink)
    } else {
        engine::execute(&policy, &req, &opts, &mut TextSink)
    };
    if let Some(log) = &audit
        && let Err(e) = crate::audit::record_agent_run(log, &req.env, &r)
    {
        eprintln!("agent-rsh: warning: {e}");
    }
    if a.json || a.events {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", json_result(&r, a.events));
        let _ = out.flush();
    } else {
        report_text(&r);
    }
    Ok(exit_code(r.exit_code()))
}

/// The RunResult as one JSON line (an `exit` event with --events).
fn json_result(r: &RunResult, as_event: bool) -> String {
    if as_event {
        serde_json::to_string(&Event::Exit(r)).expect("event serializes")
    } else {
        r.to_json()
    }
}

/// Text mode's closing words, on stderr so stdout stays the command's.
fn report_text(r: &RunResult) {
    let mut err = std::io::stderr().lock();
    for w in &r.warnings {
        let _ = writeln!(err, "agent-rsh: warning: {w}");
    }
    match r.status {
        Status::Denied | Status::NotFound => {
            if let Some(d) = &r.denial {
                let what = if r.status == Status::Denied {
                    "denied"
                } else {
                    "not found"
                };
                let _ = write!(err, "agent-rsh: {what}: {}: {}", d.rule, d.reason);
                if let Some(at) = d.location() {
                    let _ = write!(err, " ({at})");
                }
                let _ = writeln!(err);
                if let Some(h) = &d.hint {
                    let _ = writeln!(err, "agent-rsh: hint: {h}");
                }
            }
        }
        _ => {
            if let Some(line) = r.ending_line() {
                let _ = writeln!(err, "{line}");
            }
        }
    }
    if let Some(ws) = &r.workspace {
        let _ = writeln!(err, "agent-rsh: workspace kept at {ws}");
    }
}

fn cmd_check(policy: Option<&Path>, a: CheckArgs) -> CliResult {
    let policy = load_policy(policy)?;
    let req = a.request.request(StdinMode::Null);
    if let CommandInput::Line(line) = &req.command
        && let Some(code) =
            check_script(&policy, &req, line, a.request.workspace.as_deref(), a.json)
    {
        return Ok(exit_code(code));
    }
    let (verdict, judged) = admit::admit_explained(&policy, &req, a.request.workspace.as_deref());
    if a.json {
        let mut v = match &verdict {
            Ok(plan) => serde_json::json!({
                "verdict": "allow",
                "command": req.display(),
                "argv": plan.argv,
                "program": plan.program,
                "warnings": plan.warnings,
            }),
            Err(d) => serde_json::json!({
                "verdict": if d.kind == check::DenialKind::Denied { "deny" } else { "notFound" },
                "command": req.display(),
                "denial": d,
            }),
        };
        v["findings"] = serde_json::json!(judged.findings);
        v["normalized"] = serde_json::json!(judged.levels);
        println!("{v}");
    } else {
        match &verdict {
            Ok(plan) => {
                println!(
                    "allow: {} ({})",
                    shell_words(&plan.argv),
                    plan.program.display()
                );
                for w in &plan.warnings {
                    println!("warning: {w}");
                }
            }
            Err(d) => println!("deny: {d}"),
        }
        // A closed stdout (`| head`) must not turn into a panic.
        let _ = std::io::stdout().write_all(check::judge::findings_text(&judged).as_bytes());
    }
    Ok(exit_code(match verdict {
        Ok(_) => 0,
        Err(d) if d.kind == check::DenialKind::NotFound => code::NOT_FOUND,
        Err(_) => code::DENIED,
    }))
}

/// `check` of a compound command: the parsed structure and every stage's
/// verdict. None when the line is a simple command (the usual report).
fn check_script(
    policy: &Policy,
    req: &Request,
    line: &str,
    workspace: Option<&Path>,
    json: bool,
) -> Option<i32> {
    if policy.syntax != policy::Syntax::Compound {
        return None;
    }
    let simple = crate::lex::lex(line, policy.max_command_bytes)
        .ok()
        .filter(|w| !crate::script::runs_as_builtin(policy, &w[0].text));
    if simple.is_some() {
        return None;
    }
    // The whole verdict (cwd, env and timeout included), as `run` decides.
    let verdict = admit::admit(policy, req, workspace);
    let cwd = check::confine_cwd(req.cwd.as_deref()).unwrap_or_default();
    let sp = crate::script::plan(policy, line, &cwd, workspace, true).ok();
    let (word, code) = match &verdict {
        Ok(_) => ("allow", 0),
        Err(d) if d.kind == check::DenialKind::NotFound => ("notFound", code::NOT_FOUND),
        Err(_) => ("deny", code::DENIED),
    };
    if json {
        let mut v = serde_json::json!({
            "verdict": if word == "allow" { "allow" } else if word == "deny" { "deny" } else { "notFound" },
            "command": req.display(),
            "syntax": "compound",
        });
        match &verdict {
            Ok(plan) => v["warnings"] = serde_json::json!(plan.warnings),
            Err(d) => v["denial"] = serde_json::json!(d),
        }
        if let Some(sp) = &sp {
            v["script"] = serde_json::json!(sp.script);
            v["stages"] = serde_json::json!(sp.verified.stages);
        }
        println!("{v}");
        return Some(code);
    }
    let mut out = String::new();
    match &verdict {
        Ok(_) => out.push_str(&format!(
            "allow: compound command, {} simple commands\n",
            sp.as_ref().map_or(0, |s| s.script.simple_commands)
        )),
        Err(d) => out.push_str(&format!("{word}: {d}\n")),
    }
    if let Some(sp) = &sp {
        let mut stages: Vec<_> = sp.verified.stages.iter().collect();
        stages.sort_by_key(|s| s.offset);
        for st in stages {
            let what = match (&st.argv, &st.program) {
                (Some(argv), Some(p)) => format!("{} ({})", shell_words(argv), p.display()),
                (Some(argv), None) => shell_words(argv),
                (None, Some(p)) => format!("{} (arguments known at run time)", p.display()),
                (None, None) => "words known at run time".to_string(),
            };
            out.push_str(&format!(
                "  {:<9} byte {:<5} {:<10} {what}\n",
                st.verdict, st.offset, st.kind
            ));
            if let Some(d) = &st.denial {
                out.push_str(&format!("            {d}\n"));
            }
            for w in &st.warnings {
                out.push_str(&format!("            warning: {w}\n"));
            }
        }
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
    Some(code)
}

/// argv rendered with single quotes where needed, for humans.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn cmd_policy(path: Option<&Path>, p: PolicyCmd) -> CliResult {
    match p {
        PolicyCmd::Show { rules } => {
            let (policy, source) =
                Policy::locate(path).map_err(|e| CliError::policy(&e, "nothing was run"))?;
            if rules {
                print!(
                    "{}",
                    check::judge::rules_in_force(&policy, &source.to_string())
                );
            } else {
                println!("# effective policy, from {source}");
                print!("{}", policy.to_toml());
                print!("{}", check::judge::packs_summary(&policy));
            }
            Ok(ExitCode::SUCCESS)
        }
        PolicyCmd::Check { file } => {
            Policy::load_file(&file).map_err(|e| CliError::new(code::FAILED, e))?;
            println!("{}: ok", file.display());
            Ok(ExitCode::SUCCESS)
        }
        PolicyCmd::Init {
            file: None,
            profile,
        } => {
            print!("{}", policy::profiles::text(profile));
            Ok(ExitCode::SUCCESS)
        }
        PolicyCmd::Init {
            file: Some(path),
            profile,
        } => {
            let text = policy::profiles::text(profile);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(|e| {
                    CliError::new(
                        code::FAILED,
                        format!(
                            "cannot write {}: {e} (it is never overwritten; choose a new path)",
                            path.display()
                        ),
                    )
                })?;
            eprintln!("agent-rsh: wrote {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

struct NullSink;

impl Sink for NullSink {
    fn output(&mut self, _: Stream, _: &[u8]) {}
}

/// JSON lines: `start`, `output`, and (printed by the caller) `exit`.
/// Each chunk's lines are written with one write.
struct EventSink {
    command: String,
    encoder: crate::result::EventEncoder,
    line: Vec<u8>,
}

impl EventSink {
    fn new(req: &Request, encoding: Encoding, strip: bool) -> EventSink {
        EventSink {
            command: req.display(),
            encoder: crate::result::EventEncoder::new(encoding, strip),
            line: Vec::new(),
        }
    }

    fn emit(event: &Event) {
        let mut out = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut out, event);
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }

    fn write_lines(&mut self) {
        if !self.line.is_empty() {
            let _ = crate::sys::write_all(std::io::stdout(), &self.line);
            self.line.clear();
        }
    }

    /// Flushes incomplete UTF-8 left at the end of each stream.
    fn finish(&mut self) {
        self.encoder.finish(&mut self.line);
        self.write_lines();
    }
}

impl Sink for EventSink {
    fn started(&mut self, pid: i32, argv: &[String], cwd: &std::path::Path) {
        EventSink::emit(&Event::Start {
            command: &self.command,
            argv,
            cwd: &cwd.display().to_string(),
            pid,
        });
    }

    fn output(&mut self, stream: Stream, data: &[u8]) {
        self.encoder.output(stream, data, &mut self.line);
        self.write_lines();
    }
}
