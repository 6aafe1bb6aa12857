//! Figures the benchmarks share: quartiles of a sample and CPU time from
//! getrusage. (Each benchmark uses the part it needs.)
#![allow(dead_code)]

use std::time::Duration;

/// Median and the 25th and 75th percentiles.
pub fn quartiles(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = q * (s.len() - 1) as f64;
        let (lo, hi) = (i.floor() as usize, i.ceil() as usize);
        s[lo] + (s[hi] - s[lo]) * (i - lo as f64)
    };
    (at(0.5), at(0.25), at(0.75))
}

/// CPU time of this process (user + system, every thread).
pub fn self_cpu() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// CPU time of this process's reaped children (user + system).
pub fn children_cpu() -> Duration {
    rusage(libc::RUSAGE_CHILDREN)
}

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage with a valid pointer.
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}
