//! Where one run's time goes, phase by phase, as a one-shot process sees it.
//!
//! `cargo bench --bench phases` starts this program again N times with
//! `--one`; each such process does one run's work once, cold (no cache
//! warmed by an earlier call), timing every phase with the monotonic clock,
//! then the same work again, warm (what a long-lived server such as the MCP
//! face pays from its second call on). The parent prints medians with
//! their spread. Around them, process-level figures of the real binary
//! (`--version`, `check`, `run`) against a minimal Rust binary of the same
//! profile and `timeout 10 true`, interleaved round by round.
//!
//! Phases (engine::execute split up as it runs them):
//! - policy: the embedded default policy parsed;
//! - admit: lex and check of `true` (first call loads the packs, resolves);
//! - workspace: a fresh workspace created and removed;
//! - prepare: the confinement built (allowlist resolved, Landlock ruleset,
//!   seccomp filter, mount view plan);
//! - execute: the whole `engine::execute` of `true` after the above (its own
//!   check, workspace, prepare, then spawn chain, wait, teardown, report);
//! - json: the RunResult serialized.
//!
//! `spawn chain and teardown` is execute minus its warm parts (admit,
//! workspace, prepare): what exec::run costs from the first clone to the
//! last reap.
//!
//! Options after `--`: `--quick` (fewer rounds).

use agent_rsh::admit::{self, Request};
use agent_rsh::confine::Confinement;
use agent_rsh::engine::{self, RunOptions};
use agent_rsh::exec::Sink;
use agent_rsh::policy::Policy;
use agent_rsh::result::Stream;
use agent_rsh::workspace::Workspace;

#[path = "common/minimal.rs"]
mod minimal;
#[path = "common/stats.rs"]
mod stats;
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PHASES: &[&str] = &[
    "policy (embedded, parsed)",
    "admit `true` (lex, check, resolve)",
    "workspace create + remove",
    "confinement prepare",
    "engine::execute `true` (whole run)",
    "RunResult to JSON",
];

struct Quiet;

impl Sink for Quiet {
    fn output(&mut self, _: Stream, _: &[u8]) {}
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One process: every phase cold, then warm; prints two lines of
/// microseconds ("cold ..." and "warm ...").
fn one() {
    let line = |label: &str| {
        let mut v = Vec::new();
        let t = Instant::now();
        let policy = Policy::embedded();
        v.push(us(t.elapsed()));
        let req = Request::line("true");
        let t = Instant::now();
        let plan = admit::admit(&policy, &req, None).expect("`true` is allowed");
        v.push(us(t.elapsed()));
        let t = Instant::now();
        drop(Workspace::fresh(None).expect("workspace"));
        v.push(us(t.elapsed()));
        let ws = Workspace::fresh(None).expect("workspace");
        let t = Instant::now();
        let c =
            Confinement::prepare(&policy, &plan, ws.root(), None, true, None).expect("confinement");
        v.push(us(t.elapsed()));
        drop(c);
        drop(ws);
        let opts = RunOptions {
            capture: true,
            ..RunOptions::default()
        };
        let t = Instant::now();
        let r = engine::execute(&policy, &req, &opts, &mut Quiet);
        v.push(us(t.elapsed()));
        assert_eq!(r.exit_code, Some(0), "{}", r.to_json());
        let t = Instant::now();
        let json = r.to_json();
        v.push(us(t.elapsed()));
        std::hint::black_box(json);
        println!(
            "{label} {}",
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    };
    line("cold");
    line("warm");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // SAFETY: single-threaded at this point; nothing else reads the environment.
    unsafe { std::env::remove_var("AGENT_RSH_POLICY") };
    if args.iter().any(|a| a == "--one") {
        one();
        return;
    }
    let quick = args.iter().any(|a| a == "--quick") || std::env::var_os("QUICK").is_some();
    let rounds = if quick { 20 } else { 100 };
    let me = std::env::current_exe().expect("own path");
    let mut cold: Vec<Vec<f64>> = vec![Vec::new(); PHASES.len()];
    let mut warm: Vec<Vec<f64>> = vec![Vec::new(); PHASES.len()];

    // Process-level contenders, interleaved with the phase processes.
    let bin = std::env::var("AGENT_RSH_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_agent-rsh").into());
    let minimal = minimal::binary();
    let mut procs: Vec<(String, Vec<OsString>)> = Vec::new();
    if let Some(m) = &minimal {
        procs.push((
            "minimal Rust binary (same profile), prints a line".into(),
            vec![m.clone().into()],
        ));
    }
    for (name, argv) in [
        ("`timeout 10 true`", vec!["timeout", "10", "true"]),
        ("`agent-rsh --version`", vec![&bin, "--version"]),
        (
            "`agent-rsh check -- true`",
            vec![&bin, "check", "--", "true"],
        ),
        (
            "`agent-rsh run --json -- true`",
            vec![&bin, "run", "--json", "--", "true"],
        ),
    ] {
        procs.push((name.into(), argv.into_iter().map(OsString::from).collect()));
    }
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); procs.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); procs.len()];
    for round in 0..rounds {
        let n = procs.len() + 1;
        for k in 0..n {
            let i = (round + k) % n;
            if i == procs.len() {
                let out = Command::new(&me)
                    .arg("--one")
                    .stderr(Stdio::inherit())
                    .output()
                    .expect("run --one");
                assert!(out.status.success(), "--one failed: {}", out.status);
                for l in String::from_utf8_lossy(&out.stdout).lines() {
                    let mut w = l.split_whitespace();
                    let into = match w.next() {
                        Some("cold") => &mut cold,
                        Some("warm") => &mut warm,
                        _ => continue,
                    };
                    for (k, x) in w.enumerate() {
                        into[k].push(x.parse().expect("a number"));
                    }
                }
                continue;
            }
            let argv = &procs[i].1;
            let before = stats::children_cpu();
            let t = Instant::now();
            let st = Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("spawn");
            wall[i].push(t.elapsed().as_secs_f64() * 1e3);
            cpu[i].push(stats::children_cpu().saturating_sub(before).as_secs_f64() * 1e3);
            assert!(st.success(), "{:?}: {st}", procs[i].1);
        }
    }
    println!("| phase (in process) | cold µs | warm µs |");
    println!("|---|---:|---:|");
    for (k, name) in PHASES.iter().enumerate() {
        let (c, clo, chi) = stats::quartiles(&cold[k]);
        let (w, wlo, whi) = stats::quartiles(&warm[k]);
        println!("| {name} | {c:.0} ({clo:.0}–{chi:.0}) | {w:.0} ({wlo:.0}–{whi:.0}) |");
    }
    // The spawn chain: execute less its own warm check, workspace, prepare.
    let chain: Vec<f64> = (0..warm[0].len())
        .map(|i| warm[4][i] - warm[1][i] - warm[2][i] - warm[3][i])
        .collect();
    let (c, lo, hi) = stats::quartiles(&chain);
    println!("| of execute: spawn chain, wait, teardown (warm) | | {c:.0} ({lo:.0}–{hi:.0}) |");
    println!();
    println!("| process | wall ms | CPU ms | ÷ timeout (wall) | ÷ timeout (CPU) |");
    println!("|---|---:|---:|---:|---:|");
    let t_idx = procs.iter().position(|(n, _)| n.contains("timeout"));
    for (i, (name, _)) in procs.iter().enumerate() {
        let (w, ..) = stats::quartiles(&wall[i]);
        let (c, ..) = stats::quartiles(&cpu[i]);
        let ratio = |a: &[f64], b: &[f64]| {
            let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y.max(1e-3)).collect();
            stats::quartiles(&r).0
        };
        let (rw, rc) = match t_idx {
            Some(t) => (ratio(&wall[i], &wall[t]), ratio(&cpu[i], &cpu[t])),
            None => (f64::NAN, f64::NAN),
        };
        println!("| {name} | {w:.2} | {c:.2} | {rw:.2}× | {rc:.2}× |");
    }
    if let Some(m) = minimal.as_ref().and(procs.first()) {
        let v = procs.iter().position(|(n, _)| n.contains("--version"));
        if let Some(v) = v {
            let r: Vec<f64> = wall[v].iter().zip(&wall[0]).map(|(a, b)| a / b).collect();
            let c: Vec<f64> = cpu[v]
                .iter()
                .zip(&cpu[0])
                .map(|(a, b)| a / b.max(1e-3))
                .collect();
            println!(
                "\n`agent-rsh --version` ÷ {}: {:.2}× wall, {:.2}× CPU",
                m.0,
                stats::quartiles(&r).0,
                stats::quartiles(&c).0
            );
        }
    }
    println!("\n{rounds} rounds, phases and processes interleaved");
}
