//! Cost of the per-run cgroup: create (mkdir, limits, open cgroup.procs),
//! join (a forked child writes "0"; compared with the same fork without
//! joining), events (reading the counters), remove (rmdir after the
//! child ended), report (a clone of the report). Medians over N runs.
//!
//! `cargo bench --bench cgroup_cost` as root (N=... sets the number of runs).

use agent_rsh::confine::cgroup::{self, RunCgroup};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn fork_wait(fds: &[i32]) {
    // SAFETY: the child makes raw system calls only.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = if cgroup::join_raw(fds).is_ok() { 0 } else { 1 };
        unsafe { libc::_exit(code) };
    }
    let mut st = 0;
    // SAFETY: waitpid on our child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    assert_eq!(st, 0, "the child could not join");
}

fn main() {
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    // What one `agent-rsh run` pays once: finding the hierarchy (mountinfo,
    // /proc/self/cgroup, the parent directories) and the leftover sweep.
    let t = Instant::now();
    let found = cgroup::layout();
    let discover = t.elapsed();
    let t2 = Instant::now();
    cgroup::gc();
    let sweep = t2.elapsed();
    let first = match found.and_then(|_| RunCgroup::create(1 << 30, 128)) {
        Ok(cg) => cg,
        Err(e) => {
            println!("no run cgroup here: {e}");
            return;
        }
    };
    let first_create = t.elapsed();
    let mechanism = first.mechanism();
    first.remove().expect("remove");
    let (mut create, mut join, mut plain, mut events, mut remove, mut report, mut total) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for _ in 0..n {
        let t0 = Instant::now();
        let cg = RunCgroup::create(1 << 30, 128).expect("create");
        let t1 = Instant::now();
        fork_wait(cg.join_fds());
        let t2 = Instant::now();
        fork_wait(&[]);
        let t3 = Instant::now();
        let ev = cg.events();
        let t4 = Instant::now();
        let r = cg.report().clone();
        let t5 = Instant::now();
        cg.remove().expect("remove");
        let t6 = Instant::now();
        std::hint::black_box((ev, r));
        create.push(t1 - t0);
        join.push(t2 - t1);
        plain.push(t3 - t2);
        events.push(t4 - t3);
        report.push(t5 - t4);
        remove.push(t6 - t5);
        total.push((t1 - t0) + (t2 - t1).saturating_sub(t3 - t2) + (t4 - t3) + (t6 - t5));
    }
    // A run is often the only cgroup migration for a while: the join after
    // an idle moment, through the run's join fds and through cgroup.procs
    // (whose global lock waits out an RCU grace period then).
    let idle = |use_procs: bool| {
        let cg = RunCgroup::create(1 << 30, 128).expect("create");
        let procs: Vec<std::fs::File> = cg
            .paths()
            .iter()
            .map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.procs"))
                    .expect("cgroup.procs")
            })
            .collect();
        let procs_fds: Vec<i32> = procs.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
        let mut v = Vec::new();
        for _ in 0..(n / 10).max(10) {
            std::thread::sleep(Duration::from_millis(20));
            let t = Instant::now();
            fork_wait(if use_procs { &procs_fds } else { cg.join_fds() });
            v.push(t.elapsed());
        }
        drop(procs);
        cg.remove().expect("remove");
        median(v)
    };
    let (idle_join, idle_procs) = (idle(false), idle(true));
    let (j, p) = (median(join), median(plain));
    println!("{mechanism}, {n} runs, medians:");
    println!(
        "  first create in a process   {:>8.1} us   (of which layout discovery {:.1} us, leftover sweep {:.1} us)",
        first_create.as_secs_f64() * 1e6,
        discover.as_secs_f64() * 1e6,
        sweep.as_secs_f64() * 1e6,
    );
    println!("  create                      {:>8.1} us", median(create));
    println!(
        "  fork+join+exit+wait         {j:>8.1} us   (fork+exit+wait alone {p:.1} us: join adds {:+.1} us)",
        j - p
    );
    println!(
        "  fork+join+exit+wait after 20 ms idle {idle_join:>8.1} us   (joining through cgroup.procs instead: {idle_procs:.1} us)"
    );
    println!("  events                      {:>8.1} us", median(events));
    println!("  report (clone)              {:>8.1} us", median(report));
    println!("  remove                      {:>8.1} us", median(remove));
    println!(
        "  per run (create+join+events+remove) {:>8.1} us",
        median(total)
    );
}
