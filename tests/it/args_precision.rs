//! Precision: ordinary everyday commands across the packs' programs
//! (`tests/precision_corpus.toml`) stay allowed at the default trust. Every
//! command goes through the real lexer and the real judge under a policy
//! that allows each program named in the corpus; only program resolution
//! is simulated, so the test does not depend on what is installed.

use agent_rsh::check::judge::{self, Judgement};
use agent_rsh::check::rules::Verdict;
use agent_rsh::check::{Denial, resolve};
use agent_rsh::policy::{Policy, Trust};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// How many `quiet` commands the corpus holds at least (docs/policy.md states it).
const AT_LEAST: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Corpus {
    also_allowed: Vec<String>,
    quiet: Vec<String>,
    warned: Vec<String>,
}

fn corpus() -> Corpus {
    toml::from_str(include_str!("../precision_corpus.toml")).expect("corpus parses")
}

/// The default trust, every program of the corpus on the allowlist.
fn policy(c: &Corpus) -> Policy {
    let mut names: BTreeSet<String> = c.also_allowed.iter().cloned().collect();
    for cmd in c.quiet.iter().chain(&c.warned) {
        if let Ok(words) = agent_rsh::lex::lex(cmd, 8192) {
            names.insert(words[0].text.clone());
        }
    }
    let mut p = Policy::default();
    assert_eq!(p.trust, Trust::Medium, "the default trust is medium");
    p.commands.allow = names.into_iter().collect();
    p
}

fn judged(p: &Policy, cmd: &str) -> Result<Judgement, Denial> {
    let argv: Vec<String> = agent_rsh::lex::lex(cmd, p.max_command_bytes)
        .map_err(Denial::from)?
        .into_iter()
        .map(|w| w.text)
        .collect();
    let mut fake = |name: &str| -> Result<PathBuf, Denial> {
        if p.commands.allow.iter().any(|a| a == name) {
            return Ok(PathBuf::from("/usr/bin").join(name));
        }
        resolve(p, name).map(|_| unreachable!("not on the allowlist"))
    };
    fake(&argv[0])?;
    let j = judge::judge(p, &argv, &mut fake, true);
    match &j.denial {
        Some(d) => Err(d.clone()),
        None => Ok(j),
    }
}

#[test]
fn everyday_commands_stay_allowed_and_quiet() {
    let c = corpus();
    let p = policy(&c);
    let mut seen = BTreeSet::new();
    let repeated: Vec<&String> = c.quiet.iter().filter(|q| !seen.insert(*q)).collect();
    assert!(repeated.is_empty(), "repeated in the corpus: {repeated:?}");
    assert!(
        c.quiet.len() >= AT_LEAST,
        "{} quiet commands, want at least {AT_LEAST}",
        c.quiet.len()
    );
    let mut failures = Vec::new();
    for cmd in &c.quiet {
        match judged(&p, cmd) {
            Ok(j) if j.findings.is_empty() => {}
            Ok(j) => failures.push(format!(
                "{cmd}: fired {:?}",
                j.findings
                    .iter()
                    .map(|f| (&f.rule, &f.seen))
                    .collect::<Vec<_>>()
            )),
            Err(d) => failures.push(format!("{cmd}: refused: {d}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} ordinary commands are not quietly allowed:\n{}",
        failures.len(),
        c.quiet.len(),
        failures.join("\n")
    );
    eprintln!("{} ordinary commands allowed, no rule fired", c.quiet.len());
}

#[test]
fn warned_commands_are_allowed_with_a_warning() {
    let c = corpus();
    let p = policy(&c);
    let mut failures = Vec::new();
    for cmd in &c.warned {
        match judged(&p, cmd) {
            Ok(j) if j.findings.iter().any(|f| f.verdict == Verdict::Warn) => {}
            Ok(j) => failures.push(format!("{cmd}: no warning: {:?}", j.findings)),
            Err(d) => failures.push(format!("{cmd}: refused: {d}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same commands at trust = "low": the warned ones are refused, which
/// shows the corpus exercises the trust table and not a switched-off rule.
#[test]
fn warned_commands_are_refused_at_trust_low() {
    let c = corpus();
    let mut p = policy(&c);
    p.trust = Trust::Low;
    let allowed: Vec<&String> = c
        .warned
        .iter()
        .filter(|cmd| judged(&p, cmd).is_ok())
        .collect();
    assert!(allowed.is_empty(), "allowed at trust low: {allowed:?}");
}
