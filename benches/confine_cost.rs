//! Cost of kernel confinement per run: the same command (`true`) run with
//! confinement off and on, paired (alternating) so drift affects both alike.
//!
//! Two measurements: through the engine in one process (what the MCP server
//! and the job supervisor pay per run), and through the binary (what one
//! `agent-rsh run` pays, process start and one-time probes included).
//!
//! Through the binary, the layers that can be taken away one at a time
//! (the simulation seam) are paired too: the run's cgroup, and the mount
//! view (wall and CPU time: building the view is work in the guardian).
//!
//! `cargo bench --bench confine_cost` (N=... sets the number of pairs).

#[path = "common/stats.rs"]
mod stats;

use agent_rsh::admit::{CommandInput, Request};
use agent_rsh::engine::{self, RunOptions};
use agent_rsh::exec::Sink;
use agent_rsh::plan::StdinMode;
use agent_rsh::policy::{Policy, Source};
use agent_rsh::result::Stream;
use std::process::Command;
use std::time::{Duration, Instant};

struct Null;
impl Sink for Null {
    fn output(&mut self, _: Stream, _: &[u8]) {}
}

const BASE: &str = "[commands]\nallow = [\"true\"]\n";

fn policy_text(extra: &str) -> String {
    format!("{extra}\n{BASE}")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn report(label: &str, off: Vec<Duration>, on: Vec<Duration>) {
    let (a, b) = (median(off), median(on));
    println!(
        "{label:<44} off {:>8.1} us   on {:>8.1} us   ratio {:.3}   added {:+.1} us",
        a.as_secs_f64() * 1e6,
        b.as_secs_f64() * 1e6,
        b.as_secs_f64() / a.as_secs_f64(),
        (b.as_secs_f64() - a.as_secs_f64()) * 1e6
    );
}

fn main() {
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let req = Request {
        command: CommandInput::Line("true".into()),
        cwd: None,
        timeout_ms: None,
        env: Vec::new(),
        stdin: StdinMode::Null,
    };
    let opts = RunOptions::default();
    let parse = |t: &str| Policy::parse(t, Source::Embedded).expect("bench policy parses");
    let off = parse(&policy_text("confinement = \"off\""));
    let on = parse(&policy_text("confinement = \"required\""));
    let on_netns = parse(&policy_text(
        "confinement = \"required\"\nnetwork_namespace = true",
    ));

    let run = |p: &Policy| {
        let t = Instant::now();
        let r = engine::execute(p, &req, &opts, &mut Null);
        assert_eq!(r.exit_code, Some(0), "{}", r.to_json());
        t.elapsed()
    };
    // Warm up once-per-process work (probes, the seccomp program).
    run(&off);
    run(&on);
    run(&on_netns);
    println!("per-run wall time of `true`, median of {n} paired runs");
    let configs = if std::env::var_os("PREPARE_ONLY").is_some() {
        Vec::new()
    } else {
        vec![
            ("engine, confinement on (no netns)", &on),
            ("engine, confinement on + network namespace", &on_netns),
        ]
    };
    for (label, cfg) in configs {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..n {
            a.push(run(&off));
            b.push(run(cfg));
        }
        report(label, a, b);
    }
    // A domain list against network = "none" with its namespace: the
    // proxy's listener handed over and its threads started and joined.
    if std::env::var_os("PREPARE_ONLY").is_none() {
        let domains = parse(&policy_text(
            "confinement = \"required\"\nnetwork = { allow = [\"pypi.org\"] }",
        ));
        run(&domains);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..n {
            a.push(run(&on_netns));
            b.push(run(&domains));
        }
        println!("(\"off\" below is network = \"none\" with a namespace, \"on\" a domain list)");
        report("engine, network = { allow } vs none + netns", a, b);
    }

    // Where the added time goes: building the rule set and filter in the
    // parent, and the PID namespace the guardian gets (confinement "off"
    // runs without one).
    let plan = agent_rsh::admit::admit(&on, &req, None).expect("true is allowed");
    let ws = tempfile::tempdir().expect("temp dir");
    let t = Instant::now();
    for _ in 0..n {
        let c = agent_rsh::confine::Confinement::prepare(&on, &plan, ws.path(), None, true, None)
            .expect("prepare");
        drop(c);
    }
    println!(
        "  of which Confinement::prepare (rule set, filter, the run's cgroup): {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    if agent_rsh::confine::cgroup::probe().is_ok() {
        let l = &on.limits;
        let t = Instant::now();
        for _ in 0..n {
            let cg = agent_rsh::confine::cgroup::RunCgroup::create(l.memory_bytes, l.processes)
                .expect("a run cgroup");
            cg.remove().expect("removed");
        }
        println!(
            "  of which the run's cgroup (create + remove): {:.1} us",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }
    let default = Policy::embedded();
    let ls = Request {
        command: CommandInput::Line("ls".into()),
        ..req.clone()
    };
    let plan = agent_rsh::admit::admit(&default, &ls, None).expect("ls is allowed");
    let t = Instant::now();
    for _ in 0..n {
        let c =
            agent_rsh::confine::Confinement::prepare(&default, &plan, ws.path(), None, true, None)
                .expect("prepare");
        drop(c);
    }
    println!(
        "  Confinement::prepare, embedded default policy ({} programs): {:.1} us",
        default.commands.allow.len(),
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    if std::env::var_os("PREPARE_ONLY").is_some() {
        // For profiling the parent's share alone.
        return;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..n {
        a.push(agent_rsh::confine::probe::try_namespaces(0).1);
        b.push(agent_rsh::confine::probe::try_namespaces(libc::CLONE_NEWPID as libc::c_ulong).1);
    }
    report("  of which fork+exit vs in a new PID namespace", a, b);

    let bin = env!("CARGO_BIN_EXE_agent-rsh");
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write policy");
        p
    };
    let p_off = write("off.toml", &policy_text("confinement = \"off\""));
    let p_on = write("on.toml", &policy_text("confinement = \"required\""));
    let spawn_env = |p: &std::path::Path, simulate: &str| {
        let t = Instant::now();
        let st = Command::new(bin)
            .args(["run", "--policy"])
            .arg(p)
            .args(["--", "true"])
            .env(agent_rsh::confine::probe::SIMULATE_ENV, simulate)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("agent-rsh runs");
        assert!(st.success());
        t.elapsed()
    };
    let spawn = |p: &std::path::Path| spawn_env(p, "");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..n.min(100) {
        a.push(spawn(&p_off));
        b.push(spawn(&p_on));
    }
    report("binary, confinement on (no netns)", a, b);

    // The run's cgroup: the same run without it (the simulation seam,
    // best-effort so that root runs without one) and with it.
    if agent_rsh::confine::cgroup::probe().is_ok() {
        let p_be = write("be.toml", &policy_text("confinement = \"best-effort\""));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..n.min(100) {
            a.push(spawn_env(&p_be, "cgroup"));
            b.push(spawn_env(&p_be, ""));
        }
        report("binary, without vs with the run's cgroup", a, b);
    }

    // The mount view: the same required run without it (the seam, as a
    // container's profile takes it away) and with it; wall time, and the
    // CPU time of agent-rsh and everything it reaped.
    let timed = |simulate: &str| {
        let cpu = stats::children_cpu();
        let wall = spawn_env(&p_on, simulate);
        (wall, stats::children_cpu().saturating_sub(cpu))
    };
    let (mut a, mut b, mut ca, mut cb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n.min(100) {
        let (w, c) = timed("mountns");
        a.push(w);
        ca.push(c.as_secs_f64() * 1e6);
        let (w, c) = timed("");
        b.push(w);
        cb.push(c.as_secs_f64() * 1e6);
    }
    report("binary, without vs with the mount view", a, b);
    let ((ma, qa1, qa3), (mb, qb1, qb3)) = (stats::quartiles(&ca), stats::quartiles(&cb));
    println!(
        "  CPU time (agent-rsh and its children)      off {ma:>8.1} us   on {mb:>8.1} us   added {:+.1} us   (quartiles {qa1:.0}-{qa3:.0} / {qb1:.0}-{qb3:.0} us)",
        mb - ma
    );
}
