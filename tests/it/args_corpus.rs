//! The argument-rule corpus (`tests/args_corpus.toml`): escape hatches and
//! destructive commands must fire the expected rule with the expected
//! verdict; lookalikes and ordinary agent commands must fire nothing.
//! Every case goes through the real lexer and the real judge; only program
//! resolution is simulated, so the corpus does not depend on what is
//! installed (the allowlist still applies: `sh` and `id` are not on it).

use agent_rsh::check::judge::{self, Judgement};
use agent_rsh::check::rules::Verdict;
use agent_rsh::check::{Denial, resolve};
use agent_rsh::policy::Policy;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Deserialize)]
struct Corpus {
    escape: Vec<(String, String, String)>,
    destructive: Vec<(String, String, String)>,
    lookalike: Vec<String>,
    ordinary: Vec<String>,
}

fn corpus() -> Corpus {
    toml::from_str(include_str!("../args_corpus.toml")).expect("corpus parses")
}

/// Every program the corpus starts with, except the ones that must stay
/// off the list.
fn policy(c: &Corpus) -> Policy {
    let mut names = BTreeSet::new();
    let all = c
        .escape
        .iter()
        .chain(&c.destructive)
        .map(|(cmd, _, _)| cmd)
        .chain(&c.lookalike)
        .chain(&c.ordinary);
    for cmd in all {
        let first = agent_rsh::lex::lex(cmd, 8192).map_or(String::new(), |w| w[0].text.clone());
        names.insert(first);
    }
    names.remove("sh");
    let mut p = Policy::default();
    p.commands.allow = names.into_iter().collect();
    p
}

/// Allowlist as the real check does it; resolution simulated.
fn fake_resolve(p: &Policy, name: &str) -> Result<PathBuf, Denial> {
    if p.commands.allow.iter().any(|a| a == name) {
        return Ok(PathBuf::from("/usr/bin").join(name));
    }
    resolve(p, name).map(|_| unreachable!("not on the allowlist"))
}

fn judged(p: &Policy, cmd: &str) -> Result<Judgement, Denial> {
    let argv: Vec<String> = agent_rsh::lex::lex(cmd, 8192)
        .map_err(Denial::from)?
        .into_iter()
        .map(|w| w.text)
        .collect();
    fake_resolve(p, &argv[0])?;
    Ok(judge::judge(p, &argv, &mut |n| fake_resolve(p, n), true))
}

fn expect_fires(p: &Policy, cases: &[(String, String, String)], failures: &mut Vec<String>) {
    for (cmd, verdict, rule) in cases {
        let j = match judged(p, cmd) {
            Ok(j) => j,
            Err(d) if d.rule == *rule && verdict == "deny" => continue,
            Err(d) => {
                failures.push(format!("{cmd}: refused before the rules: {d}"));
                continue;
            }
        };
        let want = if verdict == "deny" {
            Verdict::Deny
        } else {
            Verdict::Warn
        };
        let fired = j
            .findings
            .iter()
            .any(|f| f.rule == *rule && f.verdict == want);
        let denial = j.denial.as_ref().map(|d| d.rule.as_str());
        let ok = fired
            && match want {
                Verdict::Deny => denial == Some(rule.as_str()),
                _ => denial.is_none(),
            };
        if !ok {
            failures.push(format!(
                "{cmd}: want {rule} ({verdict}), got denial {denial:?}, findings {:?}, read as {:?}",
                j.findings.iter().map(|f| (&f.rule, f.verdict)).collect::<Vec<_>>(),
                j.levels.iter().map(|l| &l.normalized).collect::<Vec<_>>()
            ));
        }
    }
}

fn expect_quiet(p: &Policy, cases: &[String], failures: &mut Vec<String>) {
    for cmd in cases {
        match judged(p, cmd) {
            Ok(j) if j.findings.is_empty() => {}
            Ok(j) => failures.push(format!(
                "{cmd}: false positive {:?}",
                j.findings
                    .iter()
                    .map(|f| (&f.rule, &f.seen))
                    .collect::<Vec<_>>()
            )),
            Err(d) => failures.push(format!("{cmd}: refused: {d}")),
        }
    }
}

#[test]
fn corpus_is_large_enough() {
    let c = corpus();
    let total = c.escape.len() + c.destructive.len() + c.lookalike.len() + c.ordinary.len();
    assert!(total >= 300, "{total} cases");
    assert!(
        c.ordinary.len() >= 100,
        "{} ordinary commands",
        c.ordinary.len()
    );
}

#[test]
fn escape_hatches_are_denied() {
    let c = corpus();
    let p = policy(&c);
    let mut failures = Vec::new();
    expect_fires(&p, &c.escape, &mut failures);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn destructive_commands_are_guarded() {
    let c = corpus();
    let p = policy(&c);
    let mut failures = Vec::new();
    expect_fires(&p, &c.destructive, &mut failures);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn lookalikes_and_ordinary_commands_fire_nothing() {
    let c = corpus();
    let p = policy(&c);
    let mut failures = Vec::new();
    expect_quiet(&p, &c.lookalike, &mut failures);
    expect_quiet(&p, &c.ordinary, &mut failures);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_builtin_rule_has_a_corpus_case() {
    let c = corpus();
    // The guard packs by domain have their own table (guard_domains.toml).
    let domains: toml::Table =
        toml::from_str(include_str!("../guard_domains.toml")).expect("domains parse");
    let by_domain: Vec<String> = domains
        .values()
        .filter_map(|d| d.get("destructive")?.as_array())
        .flatten()
        .filter_map(|case| Some(case.as_array()?.get(2)?.as_str()?.to_string()))
        .collect();
    let covered: BTreeSet<&str> = c
        .escape
        .iter()
        .chain(&c.destructive)
        .map(|(_, _, r)| r.as_str())
        .chain(by_domain.iter().map(String::as_str))
        .collect();
    let missing: Vec<&str> = agent_rsh::check::packs::builtin()
        .rules
        .iter()
        .map(|r| r.id.as_str())
        .filter(|id| !covered.contains(id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}
