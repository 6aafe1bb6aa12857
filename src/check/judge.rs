//! Judging a whole argv: argument rules and guards on the normalized argv,
//! then the inner command of a wrapper, recursively, as a command in its
//! own right (allowlist, resolution, rules, guards).

use super::Denial;
use super::args::normalize;
use super::packs::{builtin, lazy};
use super::rules::{RuleSpec, Severity, Verdict};
use super::wrappers::{self, Inner, MAX_COMMANDS, MAX_DEPTH};
use crate::policy::Policy;
use serde::Serialize;
use std::borrow::Cow;
use std::path::PathBuf;

/// A rule that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub verdict: Verdict,
    pub reason: String,
    pub hint: String,
    /// Index in the caller's argv of the word at fault.
    pub arg_index: usize,
    /// What the program reads there (`--checkpoint-action=exec=sh`).
    pub seen: String,
    /// The program whose arguments these are (the inner one for wrappers).
    pub command: String,
    /// 0 for the command itself, 1 for a wrapper's inner command, ...
    pub depth: usize,
}

impl Finding {
    /// One line for warnings: rule, where, why, what instead.
    pub fn line(&self) -> String {
        format!(
            "{}: {} (argument {}: `{}`); {}",
            self.rule,
            self.reason,
            self.arg_index,
            shown(&self.seen),
            self.hint
        )
    }

    fn denial(&self) -> Denial {
        Denial::new(
            &self.rule,
            format!("{} (`{}`)", self.reason, shown(&self.seen)),
            &self.hint,
        )
        .at_arg(self.arg_index)
    }
}

/// How many characters of a word a one-line message quotes.
const SHOWN_CHARS: usize = 100;

/// `seen` as a message quotes it: a long word (inline code, an encoded
/// payload) is cut, so the line stays readable; the finding's `seen` field
/// keeps it whole.
fn shown(seen: &str) -> Cow<'_, str> {
    match seen.char_indices().nth(SHOWN_CHARS) {
        None => Cow::Borrowed(seen),
        Some((cut, _)) => Cow::Owned(format!(
            "{}… ({} more characters)",
            &seen[..cut],
            seen[cut..].chars().count()
        )),
    }
}

/// One command of the chain as it was read.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Level {
    pub depth: usize,
    pub command: String,
    /// Index in the caller's argv of its first word.
    pub arg_index: usize,
    /// The arguments as the program reads them.
    pub normalized: Vec<String>,
}

/// Everything the argument check saw and decided.
#[derive(Debug, Default)]
pub struct Judgement {
    pub findings: Vec<Finding>,
    pub levels: Vec<Level>,
    /// The first refusal, if any.
    pub denial: Option<Denial>,
}

impl Judgement {
    pub fn warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Warn)
            .map(Finding::line)
    }
}

/// A word and the index in the caller's argv it came from.
struct Word<'s> {
    text: Cow<'s, str>,
    at: usize,
}

struct Judge<'p, 'r> {
    policy: &'p Policy,
    /// Keep the normalized argv of each level (for `check`); the hot path
    /// of `run` skips it.
    explain: bool,
    resolve: &'r mut dyn FnMut(&str) -> Result<PathBuf, Denial>,
    out: Judgement,
    /// Commands judged so far (at most MAX_COMMANDS).
    judged: usize,
    /// The files the command's standard input reads, as far as the words
    /// of the script say (`< .env`, `cat .env |`); a wrapper's inner
    /// command reads the same input.
    stdin: &'r [String],
}

/// Judges `argv` (its program already resolved by the caller). `resolve`
/// resolves inner commands of wrappers as the first word is resolved.
/// `explain` keeps the normalized argv of every level in `levels`.
pub fn judge(
    policy: &Policy,
    argv: &[String],
    resolve: &mut dyn FnMut(&str) -> Result<PathBuf, Denial>,
    explain: bool,
) -> Judgement {
    judge_fed(policy, argv, &[], resolve, explain)
}

/// `judge`, knowing the files the command's standard input reads (the
/// rules with `stdin` look at them).
pub fn judge_fed(
    policy: &Policy,
    argv: &[String],
    stdin: &[String],
    resolve: &mut dyn FnMut(&str) -> Result<PathBuf, Denial>,
    explain: bool,
) -> Judgement {
    let words: Vec<Word> = argv
        .iter()
        .enumerate()
        .map(|(at, w)| Word {
            text: Cow::Borrowed(w.as_str()),
            at,
        })
        .collect();
    let mut j = Judge {
        policy,
        explain,
        resolve,
        out: Judgement::default(),
        judged: 0,
        stdin,
    };
    if !words.is_empty() {
        j.level(&words, 0, None);
    }
    j.out
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

impl Judge<'_, '_> {
    fn level(&mut self, words: &[Word], depth: usize, wrapper: Option<&str>) {
        let texts: Vec<&str> = words.iter().map(|w| w.text.as_ref()).collect();
        let program = basename(texts[0]);
        self.judged += 1;
        if self.judged > MAX_COMMANDS {
            if self.judged == MAX_COMMANDS + 1 {
                self.fire(Finding {
                    rule: "wrapper.depth".into(),
                    severity: Severity::Critical,
                    verdict: Verdict::Deny,
                    reason: format!(
                        "the line starts more than {MAX_COMMANDS} commands through wrappers"
                    ),
                    hint: "run fewer commands per call".into(),
                    arg_index: words[0].at,
                    seen: texts[0].to_string(),
                    command: program.to_string(),
                    depth,
                });
            }
            return;
        }
        // A shell a wrapper starts (`find -exec sh -c`, `xargs bash -c`)
        // need not be on the allowlist: it is agent-rsh's interpreter in the
        // run's mount view, which checks every command of its script when
        // it runs, and without the view the kernel lets it execute only when
        // the policy allows that shell. Its words are still judged below.
        let interpreted = self.policy.syntax == crate::policy::Syntax::Compound
            && self.policy.interprets_shell(texts[0]);
        if let Some(by) = wrapper
            && !interpreted
            && let Err(mut d) = (self.resolve)(texts[0])
        {
            d.reason = format!("{} (it would be started by `{by}`)", d.reason);
            d.arg_index = Some(words[0].at);
            self.deny(d, texts[0]);
            return;
        }
        let b = lazy();
        let n = normalize(b, program, &texts);
        if self.explain {
            self.out.levels.push(Level {
                depth,
                command: program.to_string(),
                arg_index: words[0].at,
                normalized: n.display(),
            });
        }
        let policy = self.policy;
        let rules = b
            .rules_for(program)
            .filter(|r| policy.packs.enabled(r))
            .map(|r| -> &RuleSpec { r })
            .chain(policy.rules.iter().filter(|r| r.applies_to(program)))
            .filter(|r| !(interpreted && r.unless_interpreted));
        for r in rules {
            if let Some(hit) = r.check_fed(&n, &texts, self.stdin) {
                self.fire(Finding {
                    rule: r.id.clone(),
                    severity: r.severity,
                    verdict: r.severity.verdict(policy.trust),
                    reason: r.reason.clone(),
                    hint: r.hint.clone(),
                    arg_index: words[hit.index].at,
                    seen: hit.seen,
                    command: program.to_string(),
                    depth,
                });
            }
        }
        let Some(w) = b.wrapper(program, n.subcommand.map(|(s, _)| s)) else {
            return;
        };
        if w.pack
            .as_ref()
            .is_some_and(|p| policy.packs.off.iter().any(|o| o == p))
        {
            return;
        }
        let owned = |new: Vec<(String, usize)>| -> Vec<Word> {
            new.into_iter()
                .map(|(text, k)| Word {
                    text: Cow::Owned(text),
                    at: words[k].at,
                })
                .collect()
        };
        let mut read_as = false;
        let inner: Vec<Vec<Word>> = match wrappers::inner(w, &n, &texts, policy) {
            Inner::Nothing => return,
            Inner::ReadAs(list) => {
                read_as = true;
                list.into_iter().map(owned).collect()
            }
            Inner::At(k) => vec![
                words[k..]
                    .iter()
                    .map(|w| Word {
                        text: Cow::Borrowed(w.text.as_ref()),
                        at: w.at,
                    })
                    .collect(),
            ],
            Inner::Words(new) => vec![owned(new)],
            Inner::Commands(list) => list.into_iter().map(owned).collect(),
            Inner::Finding(p) => {
                self.fire(Finding {
                    rule: p.rule.to_string(),
                    severity: p.severity,
                    verdict: p.severity.verdict(policy.trust),
                    reason: p.reason,
                    hint: p.hint,
                    arg_index: words[p.index].at,
                    seen: texts[p.index].to_string(),
                    command: program.to_string(),
                    depth,
                });
                return;
            }
        };
        for inner in inner.iter().filter(|c| !c.is_empty()) {
            if depth + 1 > MAX_DEPTH {
                self.fire(Finding {
                    rule: "wrapper.depth".into(),
                    severity: Severity::Critical,
                    verdict: Verdict::Deny,
                    reason: format!("wrappers nest more than {MAX_DEPTH} deep"),
                    hint: "run the innermost command directly".into(),
                    arg_index: inner[0].at,
                    seen: inner[0].text.to_string(),
                    command: program.to_string(),
                    depth,
                });
                return;
            }
            // A program read as another (`python3 -m pip`) is itself
            // what runs: it was resolved; the name it is read as is not.
            let by = (!read_as).then_some(program);
            self.level(inner, depth + 1, by);
        }
    }

    fn fire(&mut self, f: Finding) {
        if f.verdict == Verdict::Deny && self.out.denial.is_none() {
            self.out.denial = Some(f.denial());
        }
        self.out.findings.push(f);
    }

    fn deny(&mut self, d: Denial, word: &str) {
        self.out.findings.push(Finding {
            rule: d.rule.clone(),
            severity: Severity::Critical,
            verdict: Verdict::Deny,
            reason: d.reason.clone(),
            hint: d.hint.clone().unwrap_or_default(),
            arg_index: d.arg_index.unwrap_or(0),
            seen: word.to_string(),
            command: basename(word).to_string(),
            depth: 0,
        });
        if self.out.denial.is_none() {
            self.out.denial = Some(d);
        }
    }
}

/// For `agent-rsh check`: how each command of the chain was read and every
/// rule that fired, one per line.
pub fn findings_text(j: &Judgement) -> String {
    let mut out = String::new();
    for l in &j.levels {
        let pad = "  ".repeat(l.depth);
        out += &format!("  {pad}read as: {} {}\n", l.command, l.normalized.join(" "));
    }
    for f in &j.findings {
        out += &format!(
            "  fired: {} [{} -> {}] argument {} `{}`: {}\n",
            f.rule, f.severity, f.verdict, f.arg_index, f.seen, f.reason
        );
    }
    out
}

/// Which packs are on and off, appended to `policy show` as comments.
pub fn packs_summary(policy: &Policy) -> String {
    let b = builtin();
    let (off, on): (Vec<&str>, Vec<&str>) = b
        .packs()
        .into_iter()
        .partition(|p| policy.packs.off.iter().any(|o| o == p));
    let mut out = format!(
        "\n# built-in argument and guard packs in force: {}\n",
        on.join(", ")
    );
    if !off.is_empty() {
        out += &format!("# switched off: {}\n", off.join(", "));
    }
    out += &format!(
        "# {} built-in rules, {} from this policy; `agent-rsh policy show --rules` lists them\n",
        b.rules.iter().filter(|r| policy.packs.enabled(r)).count(),
        policy.rules.len()
    );
    out
}

/// `agent-rsh policy show --rules`: every rule in force, with what it does
/// at this policy's trust level.
pub fn rules_in_force(policy: &Policy, source: &str) -> String {
    let b = builtin();
    let mut out = format!(
        "# rules in force, from {source} (trust = {})\n# pack\trule\tseverity -> verdict\tcommands\treason\n",
        format!("{:?}", policy.trust).to_lowercase()
    );
    let mut seen = std::collections::BTreeSet::new();
    let rows = b
        .rules
        .iter()
        .filter(|r| policy.packs.enabled(r))
        .map(|r| (r.pack().to_string(), *r))
        .chain(policy.rules.iter().map(|r| ("policy".to_string(), r)));
    for (pack, r) in rows {
        if !seen.insert((pack.clone(), r.id.clone(), r.commands.clone())) {
            continue;
        }
        out += &format!(
            "{pack}\t{}\t{} -> {}\t{}\t{}\n",
            r.id,
            r.severity,
            r.severity.verdict(policy.trust),
            r.commands.join(","),
            r.reason
        );
    }
    let off: Vec<&str> = policy.packs.off.iter().map(String::as_str).collect();
    if !off.is_empty() {
        out += &format!("# packs switched off: {}\n", off.join(", "));
    }
    if !policy.packs.rules_off.is_empty() {
        out += &format!(
            "# rules switched off: {}\n",
            policy.packs.rules_off.join(", ")
        );
    }
    let names = |opaque: bool| {
        b.wrappers
            .iter()
            .filter(|w| w.opaque == opaque)
            .filter(|w| w.pack.as_ref().is_none_or(|p| !off.contains(&p.as_str())))
            .flat_map(|w| {
                w.commands
                    .iter()
                    .flat_map(|c| match w.subcommand.is_empty() {
                        true => vec![c.clone()],
                        false => w.subcommand.iter().map(|s| format!("{c} {s}")).collect(),
                    })
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    out += "# wrappers (inner command checked as a command in its own right, depth <= 5): ";
    out += &names(false);
    out += "\n# programs whose commands cannot be read (wrapper.opaque): ";
    out += &names(true);
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Trust;

    #[test]
    fn messages_quote_a_long_word_cut_and_the_finding_keeps_it_whole() {
        assert_eq!(shown("-c print(1)"), "-c print(1)");
        let exact = "é".repeat(SHOWN_CHARS);
        assert_eq!(shown(&exact), exact);
        let long = format!("{}{}", "é".repeat(SHOWN_CHARS), "x".repeat(2000));
        assert_eq!(
            shown(&long),
            format!("{}… (2000 more characters)", "é".repeat(SHOWN_CHARS))
        );
        let f = Finding {
            rule: "args.python.inline-code".into(),
            severity: Severity::Medium,
            verdict: Verdict::Warn,
            reason: "python -c runs code".into(),
            hint: "write the code to a file".into(),
            arg_index: 1,
            seen: long.clone(),
            command: "python3".into(),
            depth: 0,
        };
        assert!(f.line().contains("… (2000 more characters)`); write"));
        assert!(f.line().len() < 400);
        assert_eq!(f.seen, long);
    }

    fn judged(trust: Trust, cmd: &str) -> Judgement {
        judged_with(trust, &[], cmd)
    }

    fn judged_with(trust: Trust, packs_off: &[&str], cmd: &str) -> Judgement {
        let mut p = Policy {
            trust,
            ..Policy::default()
        };
        p.packs.off = packs_off.iter().map(|s| s.to_string()).collect();
        p.commands.allow = [
            "env", "bash", "sh", "rm", "true", "ionice", "taskset", "xargs", "timeout", "git",
            "nice", "su", "sudo", "watch", "flock", "split", "script", "screen", "at", "find",
            "parallel", "chmod", "sed",
        ]
        .map(String::from)
        .to_vec();
        let argv: Vec<String> = crate::lex::lex(cmd, 8192)
            .unwrap()
            .into_iter()
            .map(|w| w.text)
            .collect();
        let allow = p.commands.allow.clone();
        judge(
            &p,
            &argv,
            &mut |name: &str| {
                if allow.iter().any(|a| a == name) {
                    Ok(PathBuf::from(name))
                } else {
                    super::super::resolve(&Policy::default(), name)
                }
            },
            true,
        )
    }

    /// (command, rule of the denial or "", rules that only warn)
    const CASES: &[(&str, &str, &[&str])] = &[
        ("env -iS'rm -rf /'", "guard.fs.rm-root", &[]),
        ("env - rm -rf /", "guard.fs.rm-root", &[]),
        ("env x-y=1 A=b true", "", &[]),
        ("env -u HOME -- rm -rf /", "guard.fs.rm-root", &[]),
        ("env -S 'true $X'", "wrapper.env.split-string", &[]),
        // env's `\_` separates words: read as a shell reads it, this was
        // `rm -r -f -_ -. ...` and `env -u X_id`.
        ("env -S 'rm -rf\\_.git'", "wrapper.env.split-string", &[]),
        ("env -S 'env -uX\\_id'", "wrapper.env.split-string", &[]),
        ("env -S 'true\\ctrue'", "wrapper.env.split-string", &[]),
        ("env -S 'true x'", "", &[]),
        ("bash -c 'exec rm -rf /'", "guard.fs.rm-root", &[]),
        ("bash -c 'command rm -rf ..'", "guard.fs.rm-root", &[]),
        ("bash -c 'exit 1'", "", &["wrapper.shell.script"]),
        ("bash -c 'true | true'", "", &["wrapper.shell.script"]),
        ("bash script.sh", "", &["wrapper.shell.script-file"]),
        ("bash -c 'id'", "command.not-allowed", &[]),
        ("ionice -p 1", "", &[]),
        ("ionice -c 3 rm -rf /", "guard.fs.rm-root", &[]),
        ("taskset 0x1 rm -rf /", "guard.fs.rm-root", &[]),
        ("taskset -p 0x1 1", "", &[]),
        ("xargs", "", &[]),
        ("xargs -I'{}' rm -rf '{}'", "", &[]),
        ("timeout 5 git reset --hard", "guard.git.reset-hard", &[]),
        (
            "nice git branch -D x",
            "",
            &["guard.git.branch-force-delete"],
        ),
        // Programs that hand a script to `sh -c`: sh must be allowed, and
        // the script is judged as a shell's.
        ("su -c 'rm -rf /' root", "guard.fs.rm-root", &[]),
        ("su -c true -c 'rm -rf /' root", "guard.fs.rm-root", &[]),
        (
            "split --filter=true --filter='rm -rf /' f",
            "guard.fs.rm-root",
            &[],
        ),
        ("su - root -c 'true'", "", &[]),
        ("su -c 'true | true'", "", &["wrapper.shell.script"]),
        ("su root", "wrapper.opaque", &[]),
        ("su -s /bin/bash -c true", "wrapper.opaque", &[]),
        ("sudo su -", "wrapper.opaque", &[]),
        ("watch -n1 'rm -rf /'", "guard.fs.rm-root", &[]),
        ("watch git reset --hard", "guard.git.reset-hard", &[]),
        ("watch -x rm -rf /", "guard.fs.rm-root", &[]),
        ("watch -n 5 true", "", &[]),
        ("watch", "", &[]),
        ("flock l -c 'rm -rf /'", "guard.fs.rm-root", &[]),
        ("flock -w 1 l rm -rf /", "guard.fs.rm-root", &[]),
        ("flock 9", "", &[]),
        ("split --filter='rm -rf /' f", "guard.fs.rm-root", &[]),
        ("split -l 5 f rm", "", &[]),
        (
            "script -qc 'git reset --hard' log",
            "guard.git.reset-hard",
            &[],
        ),
        ("script -q log", "wrapper.opaque", &[]),
        ("screen -dmS s rm -rf /", "guard.fs.rm-root", &[]),
        ("screen -ls rm", "", &[]),
        ("screen -S -ls rm -rf /", "guard.fs.rm-root", &[]),
        ("screen -S s -X stuff x", "wrapper.opaque", &[]),
        ("at now", "wrapper.opaque", &[]),
        ("at -l", "", &[]),
        ("parallel rm ::: a", "wrapper.opaque", &[]),
        // find's actions, each judged; `{}` is a starting point outside.
        ("find . -exec true {} +", "", &[]),
        ("find . -exec rm -rf {} +", "guard.fs.rm-root", &[]),
        ("find . -name '*.o' -exec rm -rf {} +", "", &[]),
        ("find / -exec rm -rf {} +", "guard.fs.rm-root", &[]),
        (
            "find -L ../.. -name x -exec rm -rf {} \\;",
            "guard.fs.rm-root",
            &[],
        ),
        (
            "find . /etc -exec chmod -R 777 {} +",
            "guard.fs.chmod-root",
            &[],
        ),
        (
            "find . -exec true \\; -exec git push -f \\;",
            "guard.git.push-force",
            &[],
        ),
        (
            "find . -exec true {} + -delete",
            "",
            &["guard.fs.find-delete"],
        ),
        ("find . -exec sh -c 'rm -rf /' \\;", "guard.fs.rm-root", &[]),
        // git for-each-repo runs `git ARGS`: ARGS are a git command.
        (
            "git for-each-repo --config=x.repo -- reset --hard",
            "guard.git.reset-hard",
            &[],
        ),
        ("git for-each-repo --config x.repo gc", "", &[]),
        (
            "git for-each-repo --config=x.repo -c core.pager=id log",
            "wrapper.opaque",
            &[],
        ),
        // Options before the subcommand are git's own, not for-each-repo's.
        ("git -C sub for-each-repo --config x.repo gc", "", &[]),
    ];

    #[test]
    fn wrappers_unwrap_by_their_own_grammar() {
        for (cmd, denial, warns) in CASES {
            let j = judged(Trust::Medium, cmd);
            let got = j.denial.as_ref().map_or("", |d| d.rule.as_str());
            assert_eq!(got, *denial, "{cmd}: {:?}", j.findings);
            let w: Vec<&str> = j
                .findings
                .iter()
                .filter(|f| f.verdict == Verdict::Warn)
                .map(|f| f.rule.as_str())
                .collect();
            assert_eq!(w, *warns, "{cmd}");
        }
    }

    #[test]
    fn trust_high_warns_where_medium_denies() {
        let j = judged(Trust::High, "timeout 5 git reset --hard");
        assert!(j.denial.is_none());
        assert_eq!(j.warnings().count(), 1);
        let line = j.warnings().next().unwrap();
        assert!(
            line.starts_with("guard.git.reset-hard: ") && line.contains("argument 4"),
            "{line}"
        );
        // Critical stays denied at every trust level.
        let j = judged(Trust::High, "timeout 5 rm -rf /");
        assert_eq!(j.denial.unwrap().rule, "guard.fs.rm-root");
    }

    #[test]
    fn opaque_wrappers_warn_at_trust_high() {
        let j = judged(Trust::High, "su");
        assert!(j.denial.is_none(), "{:?}", j.denial);
        assert_eq!(j.findings[0].rule, "wrapper.opaque");
        assert_eq!(j.findings[0].verdict, Verdict::Warn);
        let j = judged(Trust::Low, "script -c 'true | true' log");
        assert_eq!(j.denial.unwrap().rule, "wrapper.shell.script");
    }

    #[test]
    fn find_actions_are_off_with_the_find_pack() {
        let j = judged_with(Trust::Medium, &["find"], "find / -exec rm -rf {} +");
        assert!(j.findings.is_empty(), "{:?}", j.findings);
        // ... but find's own guard still judges find.
        let j = judged_with(Trust::Medium, &["find"], "find / -delete");
        assert_eq!(j.findings[0].rule, "guard.fs.find-delete");
    }

    #[test]
    fn the_number_of_commands_judged_is_bounded() {
        // Each of 10 outside starting points gives a reading of the inner
        // find, whose 10 give 10 readings of `true` each: 111 commands.
        let starts: Vec<String> = (0..10).map(|i| format!("/d{i}")).collect();
        let cmd = format!(
            "find {0} -exec find {0} -exec true {{}} \\; \\;",
            starts.join(" ")
        );
        let j = judged(Trust::Medium, &cmd);
        let d = j.denial.expect("refused");
        assert_eq!(d.rule, "wrapper.depth", "{d:?}");
        assert!(d.reason.contains("more than 64 commands"), "{d:?}");
        // The same starting point twice is read once.
        let j = judged(Trust::Medium, "find / // /. -exec true {} +");
        assert_eq!(j.levels.len(), 2, "{:?}", j.levels);
    }

    #[test]
    fn each_find_action_is_a_level_of_its_own() {
        let j = judged(
            Trust::Medium,
            "find src -exec true {} \\; -execdir git status \\;",
        );
        let chain: Vec<(usize, &str, usize)> = j
            .levels
            .iter()
            .map(|l| (l.depth, l.command.as_str(), l.arg_index))
            .collect();
        assert_eq!(chain, [(0, "find", 0), (1, "true", 3), (1, "git", 7)]);
        assert!(j.denial.is_none());
    }

    #[test]
    fn git_for_each_repo_runs_git_again() {
        let j = judged(
            Trust::Medium,
            "git for-each-repo --config=r --keep-going -- -c alias.x=!id x",
        );
        let chain: Vec<(usize, &str, usize)> = j
            .levels
            .iter()
            .map(|l| (l.depth, l.command.as_str(), l.arg_index))
            .collect();
        assert_eq!(chain, [(0, "git", 0), (1, "git", 0)]);
        assert_eq!(j.levels[1].normalized, ["-c alias.x=!id", "x"]);
        let d = j.denial.expect("refused");
        assert_eq!(
            (d.rule.as_str(), d.arg_index),
            ("args.git.config-option", Some(5))
        );
    }

    #[test]
    fn levels_record_each_command_of_the_chain() {
        let j = judged(Trust::Medium, "nice timeout 5 env A=1 git push -fu origin");
        let chain: Vec<(usize, &str, usize)> = j
            .levels
            .iter()
            .map(|l| (l.depth, l.command.as_str(), l.arg_index))
            .collect();
        assert_eq!(
            chain,
            [
                (0, "nice", 0),
                (1, "timeout", 1),
                (2, "env", 3),
                (3, "git", 5)
            ]
        );
        assert_eq!(j.levels[3].normalized, ["push", "-f", "-u", "origin"]);
        assert_eq!(j.denial.unwrap().arg_index, Some(7));
    }

    /// A shell reading its commands from its input is agent-rsh's own
    /// interpreter unless the policy allows it by name: no finding then
    /// (each command is checked when it runs), a warning when the real
    /// shell would read them, and always for other languages' interpreters.
    #[test]
    fn a_shell_reading_its_input_is_warned_only_where_it_is_the_real_one() {
        let stdin_script = |j: &Judgement| {
            j.findings
                .iter()
                .filter(|f| f.rule == "guard.obfuscation.stdin-script")
                .map(|f| f.verdict)
                .collect::<Vec<_>>()
        };
        for cmd in ["sh", "bash -s", "env bash", "xargs -0 bash -s"] {
            let j = judged(Trust::Medium, cmd);
            assert_eq!(stdin_script(&j), [Verdict::Warn], "{cmd}: {:?}", j.findings);
            assert!(j.denial.is_none(), "{cmd}");
            let j = judged(Trust::Low, cmd);
            assert_eq!(
                j.denial.map(|d| d.rule),
                Some("guard.obfuscation.stdin-script".into())
            );
        }
        let mut p = Policy::default();
        p.commands.allow = ["env", "xargs"].map(String::from).to_vec();
        for cmd in ["env sh", "env bash -s", "xargs -0 bash -s"] {
            let argv: Vec<String> = cmd.split(' ').map(String::from).collect();
            let j = judge(&p, &argv, &mut |n: &str| Ok(PathBuf::from(n)), true);
            assert!(j.findings.is_empty(), "{cmd}: {:?}", j.findings);
        }
        // The words after -s are the script's arguments, not a file.
        let j = judged(Trust::Medium, "bash -s -- --prefix=/opt x.sh");
        assert_eq!(stdin_script(&j), [Verdict::Warn], "{:?}", j.findings);
        assert_eq!(j.findings.len(), 1, "{:?}", j.findings);
        for cmd in ["bash -c true", "bash -i", "sh --version"] {
            assert!(
                stdin_script(&judged(Trust::Medium, cmd)).is_empty(),
                "{cmd}"
            );
        }
    }
}
