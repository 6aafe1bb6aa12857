//! agent-rsh against its peers: one run, one table.
//!
//! `cargo bench --bench peers` builds the release binary and prints a
//! Markdown table: every figure is a median with its spread (25th to 75th
//! percentile) and the target it is held to, with pass or miss. Options
//! after `--`: `--quick` (fewer rounds, smaller streams, for iteration) and
//! `--with-peers` (installs bubblewrap and firejail with apt first; without
//! it, peers that are not installed are left out and say so).
//!
//! The machine is shared and noisy, so absolute times are only context: the
//! targets are ratios, and every ratio is taken between runs of one round,
//! with the commands of a round interleaved (the starting command rotates
//! from round to round) so drift affects both sides alike.
//!
//! Sections:
//! 1. overhead: `agent-rsh run --json -- true` (embedded default policy,
//!    confinement required) against `/bin/true`, a minimal Rust binary built
//!    with the same release profile (the floor of `agent-rsh --version`),
//!    `bash -c true`,
//!    `timeout 10 true` and, when they work here, bwrap, firejail and a
//!    Python `subprocess.run` wrapper;
//! 2. lex + check per typical agent command, in process (`admit::admit`);
//! 3. streaming: N bytes from `head -c N /dev/zero` through `agent-rsh run`
//!    (text and `--json`), against the same through a pipe into `cat`;
//! 4. peak RSS (`wait4`, so it is the largest of agent-rsh, its guardian and
//!    the command) while the command prints 1 GiB and 10 GiB;
//! 5. 200 runs started at once: all complete, no process or workspace left.
//!
//! Exits non-zero when something failed to run or leaked; a missed target
//! is reported in the table, not as a failure (the machine may be busy).

use agent_rsh::admit::{self, Request};
use agent_rsh::check;
use agent_rsh::lex;
use agent_rsh::policy::Policy;
use std::ffi::OsString;
use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[path = "common/minimal.rs"]
mod minimal;
#[path = "common/stats.rs"]
mod stats;

/// The binary under test: this build's, or `AGENT_RSH_BENCH_BIN` to compare
/// another build in the same conditions.
fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("AGENT_RSH_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_agent-rsh").into())
    })
}
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

struct Options {
    quick: bool,
    with_peers: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Verdict {
    Pass,
    Miss,
    Info,
}

struct Row {
    what: String,
    median: String,
    spread: String,
    target: String,
    verdict: Verdict,
}

#[derive(Default)]
struct Table {
    sections: Vec<(String, Vec<Row>)>,
    notes: Vec<String>,
    failures: Vec<String>,
}

impl Table {
    fn section(&mut self, name: &str) {
        eprintln!("== {name}");
        self.sections.push((name.to_string(), Vec::new()));
    }

    fn row(
        &mut self,
        what: impl Into<String>,
        median: String,
        spread: String,
        target: &str,
        v: Verdict,
    ) {
        let row = Row {
            what: what.into(),
            median,
            spread,
            target: target.to_string(),
            verdict: v,
        };
        eprintln!(
            "   {} {} [{}] {}",
            row.what, row.median, row.spread, row.target
        );
        self.sections.last_mut().expect("a section").1.push(row);
    }

    fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        eprintln!("   note: {text}");
        self.notes.push(text);
    }

    fn fail(&mut self, text: impl Into<String>) {
        let text = text.into();
        eprintln!("   FAILED: {text}");
        self.failures.push(text);
    }

    fn print(&self) {
        println!("| measure | median | spread (p25–p75) | target | verdict |");
        println!("|---|---:|---:|---|---|");
        for (name, rows) in &self.sections {
            println!("| **{name}** | | | | |");
            for r in rows {
                let v = match r.verdict {
                    Verdict::Pass => "pass",
                    Verdict::Miss => "**miss**",
                    Verdict::Info => "",
                };
                println!(
                    "| {} | {} | {} | {} | {v} |",
                    r.what.replace('|', "\\|"),
                    r.median,
                    r.spread,
                    r.target
                );
            }
        }
        for n in &self.notes {
            println!("\n- {n}");
        }
        for f in &self.failures {
            println!("\n- FAILED: {f}");
        }
    }
}

fn verdict(ok: bool) -> Verdict {
    if ok { Verdict::Pass } else { Verdict::Miss }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = Options {
        quick: args.iter().any(|a| a == "--quick") || std::env::var_os("QUICK").is_some(),
        with_peers: args.iter().any(|a| a == "--with-peers"),
    };
    // SAFETY: single-threaded at this point; nothing else reads the environment.
    unsafe { std::env::remove_var("AGENT_RSH_POLICY") };
    if opts.with_peers {
        install_peers();
    }
    let started = Instant::now();
    let load_before = loadavg();
    let mut t = Table::default();
    overhead(&opts, &mut t);
    check_latency(&opts, &mut t);
    streaming(&opts, &mut t);
    memory(&opts, &mut t);
    concurrency(&opts, &mut t);

    println!();
    println!("{}", machine());
    println!(
        "mode: {}; load average {} at the start, {} at the end; {:.0} s\n",
        if opts.quick { "--quick" } else { "full" },
        load_before,
        loadavg(),
        started.elapsed().as_secs_f64()
    );
    t.print();
    if !t.failures.is_empty() {
        std::process::exit(1);
    }
}

fn install_peers() {
    let apt = |args: &[&str]| {
        let mut cmd = if nix_is_root() {
            Command::new("apt-get")
        } else {
            let mut c = Command::new("sudo");
            c.arg("apt-get");
            c
        };
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        eprintln!("--with-peers: {cmd:?}");
        matches!(cmd.status(), Ok(s) if s.success())
    };
    if !(apt(&["update", "-qq"])
        && apt(&[
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "bubblewrap",
            "firejail",
        ]))
    {
        eprintln!("--with-peers: apt-get failed; peers that are missing are left out");
    }
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("machine: {cores} cores ({cpu}), Linux {kernel}")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn quiet(argv: &[OsString]) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Wall time and CPU time (user + system of the process and everything it
/// reaped) of one run.
fn timed(argv: &[OsString]) -> (Duration, Duration, std::io::Result<ExitStatus>) {
    let before = stats::children_cpu();
    let t = Instant::now();
    let st = quiet(argv).status();
    (
        t.elapsed(),
        stats::children_cpu().saturating_sub(before),
        st,
    )
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

// ---------------------------------------------------------------- overhead

struct Contender {
    name: &'static str,
    argv: Vec<OsString>,
    /// Wall and CPU milliseconds per round.
    times: Vec<f64>,
    cpu: Vec<f64>,
    /// Part of agent-rsh's own cost, shown to say where the time goes.
    part: bool,
}

fn overhead(opts: &Options, t: &mut Table) {
    t.section("1. overhead per run of `true` (whole process, wall time)");
    let rounds = if opts.quick { 40 } else { 300 };
    let python = ["/usr/bin/python3", "python3"].into_iter().find_map(which);
    let mut candidates: Vec<(&'static str, Option<Vec<OsString>>)> = vec![
        (
            "agent-rsh run --json -- true",
            Some(os(&[bin(), "run", "--json", "--", "true"])),
        ),
        ("/bin/true", Some(os(&["/bin/true"]))),
        (
            "minimal Rust binary (same profile)",
            minimal::binary().map(|p| vec![p.into_os_string()]),
        ),
        (
            "bash -c true",
            which("bash").map(|_| os(&["bash", "-c", "true"])),
        ),
        (
            "timeout 10 true",
            which("timeout").map(|_| os(&["timeout", "10", "true"])),
        ),
        (
            "bwrap (ro /, new namespaces) true",
            which("bwrap").map(|_| {
                os(&[
                    "bwrap",
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                    "--unshare-all",
                    "--die-with-parent",
                    "--new-session",
                    "true",
                ])
            }),
        ),
        (
            "firejail --quiet true",
            which("firejail").map(|_| os(&["firejail", "--quiet", "true"])),
        ),
        (
            "python3 subprocess.run wrapper",
            python.map(|p| {
                let mut v = vec![p.into_os_string()];
                v.extend(os(&[
                    "-c",
                    "import subprocess,sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
                    "true",
                ]));
                v
            }),
        ),
    ];
    // Where agent-rsh's time goes: the bare binary, the string layer, and a
    // run without the kernel layer (no Landlock, seccomp or PID namespace).
    let dir = tempfile::tempdir().expect("temp dir");
    let off = dir.path().join("off.toml");
    std::fs::write(
        &off,
        "confinement = \"off\"\n[commands]\nallow = [\"true\"]\n",
    )
    .expect("write policy");
    let parts: Vec<(&'static str, Vec<OsString>)> = vec![
        ("agent-rsh --version", os(&[bin(), "--version"])),
        (
            "agent-rsh check -- true",
            os(&[bin(), "check", "--", "true"]),
        ),
        ("agent-rsh run --json (confinement off) -- true", {
            let mut v = os(&[bin(), "run", "--json", "--policy"]);
            v.push(off.clone().into_os_string());
            v.extend(os(&["--", "true"]));
            v
        }),
    ];
    let mut contenders = Vec::new();
    let all = candidates
        .drain(..)
        .map(|(n, a)| (n, a, false))
        .chain(parts.into_iter().map(|(n, a)| (n, Some(a), true)))
        .collect::<Vec<_>>();
    for (name, argv, part) in all {
        let Some(argv) = argv else {
            t.note(format!(
                "{name}: not installed, left out (`-- --with-peers` installs bwrap and firejail)"
            ));
            continue;
        };
        // Warm up (page cache, one-time probes) and make sure it works here.
        let mut ok = true;
        for _ in 0..3 {
            let out = quiet(&argv).stderr(Stdio::piped()).output();
            if !matches!(&out, Ok(o) if o.status.success()) {
                let why = match out {
                    Ok(o) => format!(
                        "{}: {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr)
                            .lines()
                            .next()
                            .unwrap_or("")
                    ),
                    Err(e) => e.to_string(),
                };
                if name.starts_with("agent-rsh") {
                    t.fail(format!("{name} does not run: {why}"));
                    return;
                }
                t.note(format!(
                    "{name}: does not work on this machine ({why}), left out"
                ));
                ok = false;
                break;
            }
        }
        if ok {
            contenders.push(Contender {
                name,
                argv,
                times: Vec::new(),
                cpu: Vec::new(),
                part,
            });
        }
    }
    let n = contenders.len();
    for round in 0..rounds {
        for k in 0..n {
            let c = &mut contenders[(round + k) % n];
            let (d, cpu, st) = timed(&c.argv);
            match st {
                Ok(s) if s.success() => {
                    c.times.push(d.as_secs_f64() * 1e3);
                    c.cpu.push(cpu.as_secs_f64() * 1e3);
                }
                other => {
                    t.fail(format!("{} failed in round {round}: {other:?}", c.name));
                    return;
                }
            }
        }
    }
    for c in &contenders {
        let (m, lo, hi) = stats::quartiles(&c.times);
        let (cpu, ..) = stats::quartiles(&c.cpu);
        t.row(
            format!("`{}`, wall ms (CPU ms)", c.name),
            format!("{m:.2} ({cpu:.2})"),
            format!("{lo:.2}–{hi:.2}"),
            "",
            Verdict::Info,
        );
    }
    let agent = &contenders[0].times;
    for c in contenders[1..].iter().filter(|c| !c.part) {
        let ratios: Vec<f64> = agent.iter().zip(&c.times).map(|(a, b)| a / b).collect();
        let (m, lo, hi) = stats::quartiles(&ratios);
        let (target, v) = match c.name {
            "timeout 10 true" => ("≤ 1.30×", verdict(m <= 1.3)),
            n if n.starts_with("bwrap") => ("≤ 0.60×", verdict(m <= 0.6)),
            _ => ("", Verdict::Info),
        };
        t.row(
            format!("agent-rsh ÷ `{}`", c.name),
            format!("{m:.2}×"),
            format!("{lo:.2}–{hi:.2}"),
            target,
            v,
        );
        if !target.is_empty() {
            // CPU time is less sensitive to a busy machine than wall time.
            let cpu: Vec<f64> = contenders[0]
                .cpu
                .iter()
                .zip(&c.cpu)
                .map(|(a, b)| a / b.max(1e-3))
                .collect();
            let (m, lo, hi) = stats::quartiles(&cpu);
            t.row(
                format!("agent-rsh ÷ `{}`, CPU time", c.name),
                format!("{m:.2}×"),
                format!("{lo:.2}–{hi:.2}"),
                "",
                Verdict::Info,
            );
        }
    }
    // Start-up: `--version` against a minimal Rust binary of the same
    // profile (both print one line and exit).
    let find = |name: &str| contenders.iter().find(|c| c.name == name);
    if let (Some(v), Some(m)) = (
        find("agent-rsh --version"),
        find("minimal Rust binary (same profile)"),
    ) {
        for (what, a, b) in [("wall", &v.times, &m.times), ("CPU time", &v.cpu, &m.cpu)] {
            let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y.max(1e-3)).collect();
            let (med, lo, hi) = stats::quartiles(&r);
            let (target, vd) = if what == "wall" {
                ("≤ 1.20×", verdict(med <= 1.2))
            } else {
                ("", Verdict::Info)
            };
            t.row(
                format!("`agent-rsh --version` ÷ minimal Rust binary, {what}"),
                format!("{med:.2}×"),
                format!("{lo:.2}–{hi:.2}"),
                target,
                vd,
            );
        }
    }
    // The parts, as shares of the whole run's wall time.
    for c in contenders.iter().filter(|c| c.part) {
        let ratios: Vec<f64> = c.times.iter().zip(agent).map(|(p, a)| p / a).collect();
        let (m, lo, hi) = stats::quartiles(&ratios);
        t.row(
            format!("`{}` ÷ agent-rsh run", c.name),
            format!("{m:.2}×"),
            format!("{lo:.2}–{hi:.2}"),
            "",
            Verdict::Info,
        );
    }
    t.note(format!(
        "overhead: {rounds} rounds; each round runs every command once, starting one further along each round"
    ));
}

// ----------------------------------------------------------- check latency

/// Typical agent commands, all allowed by the embedded default policy, a
/// compound command (parsed and checked stage by stage) and a refusal (the
/// allowlist's).
const COMMANDS: &[&str] = &[
    "ls -la",
    "cat README.md",
    "head -n 50 src/lib.rs",
    "wc -l src/lex.rs src/check/mod.rs",
    "grep -rn 'fn check(' src --include '*.rs'",
    "find . -name '*.toml' -not -path './target/*'",
    "grep -n -e \"TODO\" -e 'FIXME' -- src/engine.rs",
    "diff -u a/old.txt b/new.txt",
    "cat src/*.rs | grep unsafe",
    "curl -fsSL https://example.com/install.sh",
];

/// A label, whether the 5 µs target applies, and the call to time.
type Probe = (String, bool, Box<dyn Fn()>);

fn check_latency(opts: &Options, t: &mut Table) {
    t.section("2. lex + check per command, in process (`admit::admit`, embedded default policy)");
    let policy = Policy::embedded();
    let requests: Vec<Request> = COMMANDS.iter().map(|c| Request::line(*c)).collect();
    // Where the time goes, on the longest allowed command: the lexer, the
    // program's resolution (search path, canonical path, metadata) and the
    // environment (screening this process's variables).
    let longest = COMMANDS[5];
    let mut probes: Vec<Probe> = Vec::new();
    for (cmd, req) in COMMANDS.iter().zip(requests) {
        let outcome = match admit::admit(&policy, &req, None) {
            Ok(_) => "allowed".to_string(),
            Err(d) => format!("refused: {}", d.rule),
        };
        let p = policy.clone();
        probes.push((
            format!("`{cmd}` ({outcome})"),
            true,
            Box::new(move || {
                let _ = black_box(admit::admit(&p, black_box(&req), None));
            }),
        ));
    }
    probes.push((
        format!("of which lex, `{longest}`"),
        false,
        Box::new(move || {
            let _ = black_box(lex::lex(black_box(longest), 8192));
        }),
    ));
    let p = policy.clone();
    probes.push((
        "of which resolve `find` (search path, canonicalize, stat)".into(),
        false,
        Box::new(move || {
            let _ = black_box(check::resolve(&p, black_box("find")));
        }),
    ));
    let p = policy.clone();
    probes.push((
        "of which environment (screen inherited variables)".into(),
        false,
        Box::new(move || {
            let _ = black_box(check::env::build(&p, &[], &mut |name| {
                std::env::var_os(name)
            }));
        }),
    ));
    // Iterations per batch so one batch takes about 2 ms.
    let per_batch: Vec<u32> = probes
        .iter()
        .map(|(_, _, f)| {
            let t0 = Instant::now();
            let mut k = 0;
            while t0.elapsed() < Duration::from_millis(20) {
                f();
                k += 1;
            }
            (k / 10).max(1)
        })
        .collect();
    let batches = if opts.quick { 30 } else { 200 };
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); probes.len()];
    for b in 0..batches {
        for k in 0..probes.len() {
            let i = (b + k) % probes.len();
            let t0 = Instant::now();
            for _ in 0..per_batch[i] {
                (probes[i].2)();
            }
            us[i].push(t0.elapsed().as_secs_f64() * 1e6 / per_batch[i] as f64);
        }
    }
    for (i, (label, judged, _)) in probes.iter().enumerate() {
        let (m, lo, hi) = stats::quartiles(&us[i]);
        let (target, v) = match judged {
            true => ("≤ 5 µs", verdict(m <= 5.0)),
            false => ("", Verdict::Info),
        };
        t.row(
            format!("{label}, µs"),
            format!("{m:.2}"),
            format!("{lo:.2}–{hi:.2}"),
            target,
            v,
        );
    }
    t.note(format!(
        "check: {batches} batches per probe, probes interleaved; the environment of this process ({} variables) is screened on every check",
        std::env::vars_os().count()
    ));
}

// --------------------------------------------------------------- streaming

fn agent_stream(mode: Option<&str>, bytes: u64) -> Vec<OsString> {
    let mut v = os(&[bin(), "run"]);
    if let Some(m) = mode {
        v.push(m.into());
    }
    v.push("--".into());
    v.push(format!("head -c {bytes} /dev/zero").into());
    v
}

/// `head -c N /dev/zero | cat >/dev/null`, timed until both have exited.
fn cat_pipe(bytes: u64) -> std::io::Result<Duration> {
    let t0 = Instant::now();
    let mut head = Command::new("head")
        .args(["-c", &bytes.to_string(), "/dev/zero"])
        .stdout(Stdio::piped())
        .spawn()?;
    let pipe = head.stdout.take().expect("piped");
    let cat = Command::new("cat")
        .stdin(pipe)
        .stdout(Stdio::null())
        .status()?;
    let h = head.wait()?;
    if !cat.success() || !h.success() {
        return Err(std::io::Error::other(format!("cat {cat}, head {h}")));
    }
    Ok(t0.elapsed())
}

fn streaming(opts: &Options, t: &mut Table) {
    let (bytes, rounds) = if opts.quick { (256 * MIB, 2) } else { (GIB, 5) };
    t.section(&format!(
        "3. streaming {} MiB (`head -c N /dev/zero`) to /dev/null",
        bytes / MIB
    ));
    let text = agent_stream(None, bytes);
    let json = agent_stream(Some("--json"), bytes);
    let (mut cat, mut txt, mut jsn) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        for k in 0..3 {
            let d = match (round + k) % 3 {
                0 => cat_pipe(bytes).map(|d| (&mut cat, d)),
                1 => ok_time(&text).map(|d| (&mut txt, d)),
                _ => ok_time(&json).map(|d| (&mut jsn, d)),
            };
            match d {
                Ok((v, d)) => v.push(d.as_secs_f64()),
                Err(e) => {
                    t.fail(format!("streaming round {round}: {e}"));
                    return;
                }
            }
        }
    }
    let gibs = |v: &[f64]| {
        v.iter()
            .map(|s| bytes as f64 / GIB as f64 / s)
            .collect::<Vec<_>>()
    };
    for (name, v) in [
        ("cat through a pipe", &cat),
        ("agent-rsh run (text)", &txt),
        ("agent-rsh run --json", &jsn),
    ] {
        let (m, lo, hi) = stats::quartiles(&gibs(v));
        t.row(
            format!("{name}, GiB/s"),
            format!("{m:.2}"),
            format!("{lo:.2}–{hi:.2}"),
            "",
            Verdict::Info,
        );
    }
    for (name, v, target) in [("text", &txt, Some(0.8)), ("--json", &jsn, None)] {
        // Throughput ratio = time ratio inverted, per round.
        let r: Vec<f64> = cat.iter().zip(v.iter()).map(|(c, a)| c / a).collect();
        let (m, lo, hi) = stats::quartiles(&r);
        let (tg, vd) = match target {
            Some(x) => (format!("≥ {x:.2}×"), verdict(m >= x)),
            None => (String::new(), Verdict::Info),
        };
        t.row(
            format!("agent-rsh {name} ÷ cat, throughput"),
            format!("{m:.2}×"),
            format!("{lo:.2}–{hi:.2}"),
            &tg,
            vd,
        );
    }
}

fn ok_time(argv: &[OsString]) -> std::io::Result<Duration> {
    let (d, _, st) = timed(argv);
    let st = st?;
    if st.success() {
        Ok(d)
    } else {
        Err(std::io::Error::other(format!("{argv:?}: {st}")))
    }
}

// ------------------------------------------------------------------ memory

/// Runs agent-rsh to completion, reading its stdout, and returns its exit
/// status and peak RSS in KiB (wait4: the largest of it and the descendants
/// it reaped).
// Reaped with wait4 below, which std's Child does not know about.
#[allow(clippy::zombie_processes)]
fn peak_rss(argv: &[OsString]) -> std::io::Result<(i32, i64, Vec<u8>)> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().expect("piped");
    // Keep only the last 64 KiB (text mode prints everything).
    let reader = std::thread::spawn(move || {
        let mut keep = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    keep.extend_from_slice(&buf[..n]);
                    if keep.len() > 1 << 16 {
                        keep.drain(..keep.len() - (1 << 16));
                    }
                }
            }
        }
        keep
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter for wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as i32;
    // SAFETY: wait4 on our own child with valid out-pointers.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if got != pid {
        return Err(std::io::Error::last_os_error());
    }
    let tail = reader.join().unwrap_or_default();
    Ok((libc::WEXITSTATUS(status), usage.ru_maxrss, tail))
}

fn memory(opts: &Options, t: &mut Table) {
    t.section("4. peak RSS while the command prints (`wait4` ru_maxrss)");
    let cap = Policy::embedded().output.cap_bytes;
    let limit_kib = ((16 * MIB + cap as u64) / 1024) as i64;
    let sizes = if opts.quick {
        [256 * MIB, GIB]
    } else {
        [GIB, 10 * GIB]
    };
    let mut peaks = Vec::new();
    for (mode, bytes) in [
        (Some("--json"), sizes[0]),
        (Some("--json"), sizes[1]),
        (None, sizes[1]),
    ] {
        let label = format!(
            "agent-rsh run{} -- head -c {} GiB, MiB",
            mode.map(|m| format!(" {m}")).unwrap_or_default(),
            bytes as f64 / GIB as f64
        );
        match peak_rss(&agent_stream(mode, bytes)) {
            Ok((0, kib, tail)) => {
                if mode.is_some() {
                    let tail = String::from_utf8_lossy(&tail);
                    if !tail.contains(&format!("\"stdoutBytes\":{bytes}")) {
                        t.fail(format!(
                            "{label}: the RunResult does not count {bytes} bytes"
                        ));
                    }
                }
                peaks.push(kib);
                t.row(
                    label,
                    format!("{:.1}", kib as f64 / 1024.0),
                    "n=1".into(),
                    &format!("≤ {} MiB (16 MiB + cap)", limit_kib / 1024),
                    verdict(kib <= limit_kib),
                );
            }
            Ok((code, ..)) => t.fail(format!("{label}: exit {code}")),
            Err(e) => t.fail(format!("{label}: {e}")),
        }
    }
    if peaks.len() == 3 {
        let growth = (peaks[1] - peaks[0]) as f64 / 1024.0;
        t.row(
            format!(
                "growth from {} to {} GiB (--json), MiB",
                sizes[0] as f64 / GIB as f64,
                sizes[1] as f64 / GIB as f64
            ),
            format!("{growth:+.1}"),
            "n=1".into(),
            "≤ 1 MiB",
            verdict(growth <= 1.0),
        );
    }
}

// ------------------------------------------------------------- concurrency

fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

fn concurrency(opts: &Options, t: &mut Table) {
    let n = if opts.quick { 100 } else { 200 };
    t.section(&format!("5. {n} runs started at once"));
    let dir = tempfile::tempdir().expect("temp dir");
    let parent = dir.path().join("workspaces");
    std::fs::create_dir(&parent).expect("workspace parent");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[commands]\nallow = [\"sleep\"]\n[workspace]\nparent = \"{}\"\n",
            parent.display()
        ),
    )
    .expect("write policy");
    // A sleep duration no other process on this machine uses, so the
    // leftover scan sees only this benchmark's processes.
    let marker = format!("0.3{}", std::process::id());
    let t0 = Instant::now();
    let mut children = Vec::new();
    for _ in 0..n {
        let c = Command::new(bin())
            .args(["run", "--json", "--policy"])
            .arg(&policy)
            .arg("--")
            .arg(format!("sleep {marker}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        match c {
            Ok(c) => children.push(c),
            Err(e) => {
                t.fail(format!("spawn {}: {e}", children.len()));
                break;
            }
        }
    }
    let mut completed = 0;
    let mut problems = Vec::new();
    for c in children {
        match c.wait_with_output() {
            Ok(o)
                if o.status.success()
                    && String::from_utf8_lossy(&o.stdout).contains("\"status\":\"exited\"") =>
            {
                completed += 1
            }
            Ok(o) => problems.push(format!(
                "{}: {}",
                o.status,
                String::from_utf8_lossy(&o.stdout)
                    .chars()
                    .take(300)
                    .collect::<String>()
            )),
            Err(e) => problems.push(e.to_string()),
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let procs = processes_with(&format!("sleep {marker}"));
    let left: Vec<_> = std::fs::read_dir(&parent)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    t.row(
        format!("completed with exit 0 (`sleep {marker}` each)"),
        format!("{completed}/{n}"),
        "–".into(),
        "all",
        verdict(completed == n),
    );
    t.row(
        "processes left after the last run returned",
        procs.len().to_string(),
        "–".into(),
        "0",
        verdict(procs.is_empty()),
    );
    t.row(
        "workspaces left",
        left.len().to_string(),
        "–".into(),
        "0",
        verdict(left.is_empty()),
    );
    t.row(
        "wall time for all, s",
        format!("{wall:.2}"),
        "n=1".into(),
        "",
        Verdict::Info,
    );
    if let Some(p) = problems.first() {
        t.fail(format!(
            "{} of {n} concurrent runs failed; first: {p}",
            problems.len()
        ));
    }
    if !procs.is_empty() {
        t.fail(format!("leftover processes: {procs:?}"));
    }
    if !left.is_empty() {
        t.fail(format!("leftover workspaces: {left:?}"));
    }
}
