//! Argument rules and guards: patterns over a normalized argv.
//!
//! One shape (`policy::rules::RuleSpec`) serves the built-in packs
//! (`packs/*.toml`, embedded) and the policy's own `[[rules]]`. A rule
//! fires when every condition it states holds; its severity and the
//! policy's `trust` decide deny or warn.

use super::args::{Normalized, Opt, name_matches};
use crate::policy::Trust;
use crate::policy::rules::OptName;
pub use crate::policy::rules::{RuleSpec, Severity};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Deny,
    Warn,
    /// Fired, but the trust level lets it pass silently (reported by check).
    Allow,
}

impl Severity {
    /// The trust table (README "Guard packs"):
    ///
    /// | severity | low  | medium | high  |
    /// |----------|------|--------|-------|
    /// | critical | deny | deny   | deny  |
    /// | high     | deny | deny   | warn  |
    /// | medium   | deny | warn   | warn  |
    /// | low      | warn | warn   | allow |
    pub fn verdict(self, trust: Trust) -> Verdict {
        use Severity::*;
        use Trust as T;
        match (self, trust) {
            (Critical, _) | (High, T::Low | T::Medium) | (Medium, T::Low) => Verdict::Deny,
            (Low, T::High) => Verdict::Allow,
            _ => Verdict::Warn,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Deny => "deny",
            Verdict::Warn => "warn",
            Verdict::Allow => "allow",
        })
    }
}

impl OptName {
    /// Does the option as read match? An unknown long option (no grammar)
    /// matches when it is a prefix of the name, as getopt would take it.
    fn matches(&self, o: &Opt) -> bool {
        match self {
            OptName::Short(c) => o.short == Some(*c),
            OptName::Long(l) => {
                o.short.is_none()
                    && (o.long.iter().any(|n| n == l)
                        || (o.long.is_empty() && !o.written.is_empty() && l.starts_with(o.written)))
            }
        }
    }
}

/// A path with `//`, `.` and `..` resolved without touching the disk: what
/// it names if no component is a symlink. `..` at `/` stays `/`; leading
/// `..` of a relative path stay.
pub fn lexical_path(p: &str) -> String {
    let absolute = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            c => parts.push(c),
        }
    }
    let body = parts.join("/");
    match (absolute, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".to_string(),
        (false, false) => body,
    }
}

/// The first option in `n` named by any of `names` (`-S`, `--split-string`).
pub fn find_option<'n, 'a>(n: &'n Normalized<'a>, names: &[String]) -> Option<&'n Opt<'a>> {
    if names.is_empty() {
        return None;
    }
    let names: Vec<OptName> = names
        .iter()
        .filter_map(|s| OptName::parse(s).ok())
        .collect();
    n.options().find(|o| names.iter().any(|x| x.matches(o)))
}

/// A rule that fired, with what it saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// Index in the argv being judged (mapped to the caller's argv later).
    pub index: usize,
    /// The word(s) as the program reads them, e.g. `--checkpoint-action=exec=sh`.
    pub seen: String,
}

impl RuleSpec {
    pub fn applies_to(&self, program: &str) -> bool {
        self.commands.iter().any(|c| name_matches(c, program))
    }

    /// Does the rule fire on this reading? `words` is the argv judged.
    pub fn check(&self, n: &Normalized, words: &[&str]) -> Option<Hit> {
        let c = self.compiled().ok()?;
        let sub = n.subcommand;
        if !self.subcommand.is_empty()
            && !sub.is_some_and(|(s, _)| self.subcommand.iter().any(|x| x == s))
        {
            return None;
        }
        let has = |list: &[OptName]| n.options().any(|o| list.iter().any(|x| x.matches(o)));
        if has(&c.unless_option) {
            return None;
        }
        if !c.with_option.is_empty() && !has(&c.with_option) {
            return None;
        }
        if self
            .min_positionals
            .is_some_and(|min| n.positionals().nth(min.saturating_sub(1)).is_none() && min > 0)
        {
            return None;
        }
        let excepted = |s: &str| c.except.as_ref().is_some_and(|e| e.is_match(s));
        let mut hit: Option<Hit> = None;
        if !self.subcommand_not_in.is_empty() {
            let (s, i) = sub?;
            if self.subcommand_not_in.iter().any(|x| x == s) {
                return None;
            }
            hit = Some(Hit {
                index: i,
                seen: s.to_string(),
            });
        }
        if !c.option.is_empty() {
            let o = n.options().find(|o| {
                c.option.iter().any(|x| x.matches(o))
                    && match &c.value {
                        None => true,
                        Some(re) => o.value.is_some_and(|v| re.is_match(v) && !excepted(v)),
                    }
            })?;
            hit = Some(Hit {
                index: o.index,
                seen: o.display(),
            });
        }
        let as_path = |w: &'_ str| -> String {
            if self.paths {
                lexical_path(w)
            } else {
                w.to_string()
            }
        };
        if let Some(re) = &c.positional {
            let (w, i) = n
                .positionals()
                .enumerate()
                .filter(|(k, _)| self.positional_index.is_none_or(|want| want == *k))
                .map(|(_, p)| p)
                .find(|(w, _)| {
                    let w = as_path(w);
                    re.is_match(&w) && !excepted(&w)
                })?;
            hit = Some(Hit {
                index: i,
                seen: w.to_string(),
            });
        }
        if let Some(re) = &c.positional_not {
            let (w, i) = n.positionals().find(|(w, _)| {
                let w = as_path(w);
                !re.is_match(&w) && !excepted(&w)
            })?;
            hit = Some(Hit {
                index: i,
                seen: w.to_string(),
            });
        }
        if let Some(re) = &c.word {
            let (i, w) = words
                .iter()
                .enumerate()
                .skip(1)
                .find(|(_, w)| re.is_match(w) && !excepted(w))?;
            hit = Some(Hit {
                index: i,
                seen: w.to_string(),
            });
        }
        Some(hit.unwrap_or_else(|| match sub {
            Some((s, i)) if !self.subcommand.is_empty() => Hit {
                index: i,
                seen: s.to_string(),
            },
            _ => Hit {
                index: 0,
                seen: words.first().unwrap_or(&"").to_string(),
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::args::{Grammar, Grammars, normalize};

    /// `prog` knows `-o VALUE`; everything else is read as plain getopt.
    struct Prog(Grammar);
    impl Grammars for Prog {
        fn grammar(&self, program: &str, _: Option<&str>) -> Option<&Grammar> {
            (program == "prog").then_some(&self.0)
        }
    }

    fn rule(text: &str) -> RuleSpec {
        let r: RuleSpec = toml::from_str(text).unwrap();
        r.validate().unwrap();
        r
    }

    fn fires(r: &RuleSpec, cmd: &str) -> Option<Hit> {
        let argv: Vec<&str> = cmd.split(' ').collect();
        let g = Prog(Grammar {
            short_arg: "o".into(),
            ..Grammar::default()
        });
        let n = normalize(&g, argv[0], &argv);
        r.check(&n, &argv)
    }

    #[test]
    fn trust_table() {
        use Severity::*;
        let row = |s: Severity| [Trust::Low, Trust::Medium, Trust::High].map(|t| s.verdict(t));
        assert_eq!(row(Critical), [Verdict::Deny; 3]);
        assert_eq!(row(High), [Verdict::Deny, Verdict::Deny, Verdict::Warn]);
        assert_eq!(row(Medium), [Verdict::Deny, Verdict::Warn, Verdict::Warn]);
        assert_eq!(row(Low), [Verdict::Warn, Verdict::Warn, Verdict::Allow]);
    }

    #[test]
    fn unknown_long_prefix_matches_like_getopt() {
        let r = rule(
            r#"id = "x.y.z"
            commands = ["prog"]
            option = ["--dangerous-thing"]
            reason = "r"
            hint = "h""#,
        );
        assert!(fires(&r, "prog --dangerous-thing").is_some());
        assert!(fires(&r, "prog --danger=1").is_some());
        assert!(fires(&r, "prog --dangerous-things").is_none());
        assert!(fires(&r, "prog -- --dangerous-thing").is_none());
    }

    #[test]
    fn value_except_and_outside() {
        let r = rule(
            r#"id = "x.y.out"
            commands = ["prog"]
            option = ["-o"]
            value = "@OUTSIDE@"
            except = "^/dev/null$"
            reason = "r"
            hint = "h""#,
        );
        assert_eq!(fires(&r, "prog -xo/etc/passwd").map(|h| h.index), Some(1));
        assert!(fires(&r, "prog -o ../x").is_some());
        assert!(fires(&r, "prog -o .git/hooks/pre-commit").is_some());
        assert!(fires(&r, "prog -o out.txt").is_none());
        assert!(fires(&r, "prog -o /dev/null").is_none());
        assert!(fires(&r, "prog -o ..foo").is_none());
    }

    /// Reads `cmd` with the built-in grammars (npm has subcommands).
    fn fires_builtin(r: &RuleSpec, cmd: &str) -> Option<Hit> {
        let argv: Vec<&str> = cmd.split(' ').collect();
        let n = normalize(crate::check::packs::builtin(), argv[0], &argv);
        r.check(&n, &argv)
    }

    #[test]
    fn subcommand_kinds_and_positional_shapes() {
        let only = rule(
            r#"id = "local.npm.only"
            commands = ["npm"]
            subcommand_not_in = ["ci", "test", "run"]
            reason = "r"
            hint = "h""#,
        );
        assert_eq!(fires_builtin(&only, "npm exec x").map(|h| h.index), Some(1));
        assert_eq!(
            fires_builtin(&only, "npm --global install x").map(|h| h.index),
            Some(2)
        );
        assert!(fires_builtin(&only, "npm run build").is_none());
        assert!(fires_builtin(&only, "npm --silent test").is_none());
        assert!(fires_builtin(&only, "npm").is_none());

        let relative = rule(
            r#"id = "local.cat.relative"
            commands = ["cat"]
            positional_not = '^[^/]'
            reason = "r"
            hint = "h""#,
        );
        assert_eq!(
            fires(&relative, "cat a /etc/passwd").map(|h| h.index),
            Some(2)
        );
        assert!(fires(&relative, "cat a b").is_none());
        assert_eq!(fires(&relative, "cat -- /x").map(|h| h.index), Some(2));

        let two = rule(
            r#"id = "local.cp.two"
            commands = ["cp"]
            positional = '^dst$'
            min_positionals = 3
            reason = "r"
            hint = "h""#,
        );
        assert!(fires(&two, "cp a dst").is_none());
        assert!(fires(&two, "cp a b dst").is_some());

        let word = rule(
            r#"id = "local.zip.tt"
            commands = ["zip"]
            word = '^-[a-z]*TT'
            except = '^-xTT$'
            reason = "r"
            hint = "h""#,
        );
        assert_eq!(fires(&word, "zip a.zip -rTT sh").map(|h| h.index), Some(2));
        assert!(fires(&word, "zip a.zip -xTT").is_none());
    }

    #[test]
    fn paths_are_compared_lexically() {
        for (p, want) in [
            ("/", "/"),
            ("//", "/"),
            ("/usr/../", "/"),
            ("/../..", "/"),
            ("/usr/./lib/", "/usr/lib"),
            (".", "."),
            ("./", "."),
            ("./.", "."),
            ("build/..", "."),
            ("build/../..", ".."),
            ("../a/../..", "../.."),
            ("./build", "build"),
            ("a//b/", "a/b"),
        ] {
            assert_eq!(lexical_path(p), want, "{p}");
        }
    }

    #[test]
    fn malformed_rules_are_refused() {
        for bad in [
            r#"id = "a" commands = [] reason = "r" hint = "h""#,
            r#"id = "a" commands = ["x"] reason = "r" hint = """#,
            r#"id = "a" commands = ["x"] value = "y" reason = "r" hint = "h""#,
            r#"id = "a" commands = ["x"] option = ["-exec"] reason = "r" hint = "h""#,
            r#"id = "a" commands = ["x"] positional = "(" reason = "r" hint = "h""#,
        ] {
            let text = bad.replace("\" ", "\"\n").replace("] ", "]\n");
            let r: RuleSpec = toml::from_str(&text).unwrap();
            assert!(r.validate().is_err(), "{bad}");
        }
    }
}
