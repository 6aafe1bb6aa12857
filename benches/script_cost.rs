//! Cost of compound commands.
//!
//! 1. `check` of a 20-command script, in process (`admit::admit` with the
//!    embedded default policy): parsing, the static check of every stage,
//!    the plan. Target: under 100 µs. Parsing alone is shown beside it.
//! 2. A pipeline of three stages through `agent-rsh run`, against the same
//!    three programs wired by pipes directly (std::process, no shell) and
//!    against `bash -c`; and `agent-rsh run -- true` (one run's fixed cost).
//!    The pipeline should cost the three execs plus one run's fixed cost
//!    plus the interpreter's start (agent-rsh exec'd once more in the
//!    confined process).
//!
//! `cargo bench --bench script_cost` (N=rounds, default 200).

use agent_rsh::admit::{self, Request};
use agent_rsh::policy::Policy;
use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::Instant;

const SCRIPT20: &str = "cd src && ls -la | grep rs | head -n 5; \
cat a.txt | sort | uniq | wc -l; \
find . -name '*.rs' | head -n 3 > out.txt 2>/dev/null || echo none; \
grep -rn TODO . | cut -d: -f1 | sort -u; \
echo done; pwd; diff a b || true; \
stat -c %s a.txt; basename x/y; dirname x/y; date; tail -n 2 a.txt";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn per_iter_us(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

fn ms(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn direct_pipeline() {
    let mut a = Command::new("printf")
        .arg("a\\nb\\nc\\n")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut b = Command::new("cat")
        .stdin(a.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let c = Command::new("wc")
        .arg("-l")
        .stdin(b.stdout.take().unwrap())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    a.wait().unwrap();
    b.wait().unwrap();
    assert!(c.success());
}

fn main() {
    let rounds: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let p = Policy::embedded();
    let req = Request::line(SCRIPT20);
    let stages = agent_rsh::script::parse(SCRIPT20, 8192)
        .unwrap()
        .simple_commands;
    assert!(stages >= 20, "{stages} commands");
    assert!(admit::admit(&p, &req, None).is_ok());
    let parse_us = per_iter_us(20_000, || {
        black_box(agent_rsh::script::parse(black_box(SCRIPT20), 8192).ok());
    });
    let check_us = per_iter_us(5_000, || {
        black_box(admit::admit(&p, black_box(&req), None).ok());
    });
    println!("| measure | median | target | verdict |");
    println!("|---|---:|---|---|");
    println!("| parse, {stages}-command script, µs | {parse_us:.1} | | |");
    println!(
        "| check (parse, every stage checked, plan), {stages}-command script, µs | {check_us:.1} | < 100 µs | {} |",
        if check_us < 100.0 { "pass" } else { "**miss**" }
    );

    let bin = env!("CARGO_BIN_EXE_agent-rsh");
    let run = |cmd: &str| {
        let st = Command::new(bin)
            .args(["run", "--", cmd])
            .env_remove("AGENT_RSH_POLICY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "{cmd}");
    };
    run("printf 'a\\nb\\nc\\n' | cat | wc -l");
    let (mut pipe_run, mut true_run, mut direct, mut bash) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        pipe_run.push(ms(|| run("printf 'a\\nb\\nc\\n' | cat | wc -l")));
        true_run.push(ms(|| run("true")));
        direct.push(ms(direct_pipeline));
        bash.push(ms(|| {
            let st = Command::new("bash")
                .args(["-c", "printf 'a\\nb\\nc\\n' | cat | wc -l"])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(st.success());
        }));
    }
    let (pr, tr, d, b) = (
        median(pipe_run),
        median(true_run),
        median(direct),
        median(bash),
    );
    println!(
        "| `agent-rsh run \"printf 'a\\\\nb\\\\nc\\\\n' \\| cat \\| wc -l\"`, ms | {pr:.2} | | |"
    );
    println!("| the three programs piped directly (no shell), ms | {d:.2} | | |");
    println!("| `bash -c` of the same, ms | {b:.2} | | |");
    println!("| `agent-rsh run true` (one run's fixed cost), ms | {tr:.2} | | |");
    let overhead = pr - d;
    let fixed = tr;
    println!(
        "| pipeline run − direct execs (agent-rsh's overhead), ms | {overhead:.2} | ≤ one run's fixed cost + 3 ms ({:.2}) | {} |",
        fixed + 3.0,
        if overhead <= fixed + 3.0 {
            "pass"
        } else {
            "**miss**"
        }
    );
}
