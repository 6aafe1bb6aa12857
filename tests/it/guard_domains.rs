//! Guard packs by domain (`tests/guard_domains.toml`): in every domain the
//! destructive commands are refused or warned, by the expected rule, with a
//! reason and a hint, and the read-only and dry-run forms of the same tools
//! pass with no finding. Every case goes through the real lexer and the
//! real judge under a policy that allows every program named (wrappers
//! included); only program resolution is simulated.

use agent_rsh::check::judge::{self, Judgement};
use agent_rsh::check::rules::Verdict;
use agent_rsh::check::{Denial, resolve};
use agent_rsh::policy::{Policy, Trust};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Domain {
    destructive: Vec<(String, String, String)>,
    safe: Vec<String>,
}

fn corpus() -> BTreeMap<String, Domain> {
    toml::from_str(include_str!("../guard_domains.toml")).expect("corpus parses")
}

/// Every program of the corpus, and the wrappers its commands go through.
fn policy(c: &BTreeMap<String, Domain>) -> Policy {
    let mut names: BTreeSet<String> = ["env", "sudo", "xargs"].map(String::from).into();
    for d in c.values() {
        let cmds = d.destructive.iter().map(|(c, _, _)| c).chain(&d.safe);
        for cmd in cmds {
            for w in agent_rsh::lex::lex(cmd, 8192).expect("corpus lexes") {
                // Inner programs of wrappers are corpus programs too.
                if w.text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                {
                    names.insert(w.text);
                }
            }
        }
    }
    let mut p = Policy::default();
    assert_eq!(p.trust, Trust::Medium, "the default trust is medium");
    p.commands.allow = names.into_iter().collect();
    p
}

fn judged(p: &Policy, cmd: &str) -> Result<Judgement, Denial> {
    let argv: Vec<String> = agent_rsh::lex::lex(cmd, 8192)
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
    Ok(judge::judge(p, &argv, &mut fake, true))
}

/// What went wrong with one destructive case, if anything.
fn destructive_failure(p: &Policy, cmd: &str, verdict: &str, rule: &str) -> Option<String> {
    let j = match judged(p, cmd) {
        Ok(j) => j,
        Err(d) => return Some(format!("{cmd}: refused before the rules: {d}")),
    };
    let want = match verdict {
        "deny" => Verdict::Deny,
        "warn" => Verdict::Warn,
        v => return Some(format!("{cmd}: unknown verdict {v}")),
    };
    let found = j
        .findings
        .iter()
        .find(|f| f.rule == rule && f.verdict == want);
    let denial = j.denial.as_ref().map(|d| d.rule.as_str());
    let ok = found.is_some()
        && match want {
            Verdict::Deny => denial == Some(rule),
            _ => denial.is_none(),
        };
    if !ok {
        return Some(format!(
            "{cmd}: want {rule} ({verdict}), got denial {denial:?}, findings {:?}, read as {:?}",
            j.findings
                .iter()
                .map(|f| (&f.rule, f.verdict))
                .collect::<Vec<_>>(),
            j.levels.iter().map(|l| &l.normalized).collect::<Vec<_>>()
        ));
    }
    let f = found.expect("checked");
    if f.reason.len() < 20 || f.hint.len() < 10 {
        return Some(format!("{cmd}: {rule} lacks a reason or a hint: {f:?}"));
    }
    if let Some(d) = &j.denial
        && (d.hint.as_deref().unwrap_or("").is_empty() || !d.reason.contains(&f.reason))
    {
        return Some(format!("{cmd}: the refusal does not explain itself: {d:?}"));
    }
    None
}

#[test]
fn every_domain_refuses_or_warns_its_destructive_commands() {
    let c = corpus();
    let p = policy(&c);
    let mut failures = Vec::new();
    let (mut denied, mut warned) = (0, 0);
    for (name, d) in &c {
        assert!(
            d.destructive.len() >= 4 && d.safe.len() >= 2,
            "domain {name}: {} destructive, {} safe; want at least 4 and 2",
            d.destructive.len(),
            d.safe.len()
        );
        for (cmd, verdict, rule) in &d.destructive {
            match destructive_failure(&p, cmd, verdict, rule) {
                Some(f) => failures.push(format!("[{name}] {f}")),
                None if verdict == "deny" => denied += 1,
                None => warned += 1,
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(denied + warned >= 80, "{denied} refused + {warned} warned");
    eprintln!(
        "{} domains: {denied} destructive commands refused, {warned} warned",
        c.len()
    );
}

#[test]
fn every_domain_passes_its_read_only_and_dry_run_forms() {
    let c = corpus();
    let p = policy(&c);
    let mut failures = Vec::new();
    let mut passed = 0;
    for (name, d) in &c {
        for cmd in &d.safe {
            match judged(&p, cmd) {
                Ok(j) if j.findings.is_empty() => passed += 1,
                Ok(j) => failures.push(format!(
                    "[{name}] {cmd}: fired {:?}",
                    j.findings
                        .iter()
                        .map(|f| (&f.rule, &f.seen))
                        .collect::<Vec<_>>()
                )),
                Err(d) => failures.push(format!("[{name}] {cmd}: refused: {d}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(passed >= 60, "{passed} safe commands");
    eprintln!("{passed} read-only and dry-run commands pass with no finding");
}

/// At trust = "high" the same commands run, each with a warning, except
/// the critical ones; at trust = "low" every warning is a refusal.
#[test]
fn trust_maps_each_domain_rule_to_deny_or_warn() {
    let c = corpus();
    for (trust, allowed_verdicts) in [
        (
            Trust::High,
            &[Verdict::Warn, Verdict::Deny, Verdict::Allow][..],
        ),
        (Trust::Low, &[Verdict::Deny, Verdict::Warn][..]),
    ] {
        let mut p = policy(&c);
        p.trust = trust;
        for d in c.values() {
            for (cmd, _, rule) in &d.destructive {
                let j = judged(&p, cmd).expect("allowed program");
                let f = j
                    .findings
                    .iter()
                    .find(|f| f.rule == *rule)
                    .unwrap_or_else(|| panic!("{cmd}: {rule} does not fire at {trust:?}"));
                assert_eq!(f.verdict, f.severity.verdict(trust), "{cmd}");
                assert!(allowed_verdicts.contains(&f.verdict), "{cmd}");
            }
        }
    }
}

/// Each domain's pack can be switched off as a whole.
#[test]
fn a_domain_pack_switches_off_whole() {
    let c = corpus();
    let mut p = policy(&c);
    p.packs.off = vec![
        "guard.hpc".into(),
        "guard.registry".into(),
        "guard.obfuscation".into(),
        "guard.bio".into(),
    ];
    for cmd in [
        "scancel -u alice",
        "npm publish",
        "cargo publish",
        "bash -s",
        "env GMX_MAXBACKUP=-1 gmx mdrun",
        "samtools merge -f out.bam a.bam",
        "irmtrash",
    ] {
        let j = judged(&p, cmd).expect("allowed");
        assert!(j.findings.is_empty(), "{cmd}: {:?}", j.findings);
    }
    let j = judged(&p, "terraform destroy").expect("allowed");
    assert!(j.denial.is_some());
}

/// `policy show --rules` lists every built-in guard rule in force with its
/// pack, which is its domain: every domain of the table is there, and each
/// rule the table names appears under the pack its id names.
#[test]
fn policy_show_rules_lists_every_domain_and_rule() {
    let out = crate::common::agent()
        .args(["policy", "show", "--rules"])
        .output()
        .expect("agent-rsh runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: BTreeSet<(&str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((f.next()?, f.next()?))
        })
        .collect();
    let packs: BTreeSet<&str> = rows.iter().map(|(p, _)| *p).collect();
    for domain in corpus().keys() {
        let pack = format!("guard.{domain}");
        assert!(packs.contains(pack.as_str()), "{pack} not listed:\n{text}");
    }
    for d in corpus().values() {
        for (_, _, rule) in &d.destructive {
            let pack = agent_rsh::policy::rules::pack_of(rule);
            assert!(
                rows.contains(&(pack, rule.as_str())),
                "{rule} not listed under {pack}"
            );
        }
    }
    for id in agent_rsh::policy::rules::builtin_rule_ids() {
        let pack = agent_rsh::policy::rules::pack_of(id);
        assert!(rows.contains(&(pack, id)), "{id} not listed under {pack}");
    }
}

/// A glob of every entry of the workspace root is judged by its pattern,
/// not by what it matches: it is refused in an empty workspace too, where
/// it would remove nothing. The pattern says what the command is for; the
/// contents are known only when it runs, and may have changed by then
/// (an earlier command of the same line may create them).
#[test]
fn a_glob_emptying_the_root_is_refused_by_its_pattern_even_in_an_empty_workspace() {
    let p = crate::common::policy("[commands]\nallow = [\"rm\", \"mkdir\"]\n");
    let ws = tempfile::tempdir().unwrap();
    let check = |cmd: &str| {
        crate::common::agent()
            .args(["check", "--json", "--policy"])
            .arg(&p.path)
            .arg("--workspace")
            .arg(ws.path())
            .arg(cmd)
            .output()
            .expect("agent-rsh runs")
    };
    for cmd in ["rm -rf *", "rm -rf ./*", "rm -rf */", "rm -r -f -- ./*/"] {
        let out = check(cmd);
        assert_eq!(out.status.code(), Some(126), "{cmd}: {out:?}");
        let v = crate::common::json(&out.stdout);
        assert_eq!(v["denial"]["rule"], "guard.fs.rm-root", "{cmd}: {v:#}");
        assert!(
            v["denial"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("a glob of every entry of a directory")),
            "{cmd}: {v:#}"
        );
    }
    assert_eq!(
        std::fs::read_dir(ws.path()).unwrap().count(),
        0,
        "check ran nothing"
    );
    // A subdirectory's contents may be emptied, empty or not.
    std::fs::create_dir(ws.path().join("build")).unwrap();
    let out = check("rm -rf build/*");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
