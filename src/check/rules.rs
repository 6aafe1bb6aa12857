//! Argument rules and guards: patterns over a normalized argv.
//!
//! One shape (`policy::rules::RuleSpec`) serves the built-in packs
//! (`packs/*.toml`, embedded) and the policy's own `[[rules]]`. A rule
//! fires when every condition it states holds; its severity and the
//! policy's `trust` decide deny or warn.

use super::args::{Item, Normalized, Opt, name_matches};
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
    /// The trust table (docs/policy.md, "Trust"):
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
    find_options(n, names).next()
}

/// Every option in `n` named by any of `names`, in order.
pub fn find_options<'n, 'a>(
    n: &'n Normalized<'a>,
    names: &[String],
) -> impl Iterator<Item = &'n Opt<'a>> {
    let names: Vec<OptName> = names
        .iter()
        .filter_map(|s| OptName::parse(s).ok())
        .collect();
    n.options()
        .filter(move |o| names.iter().any(|x| x.matches(o)))
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
        self.check_fed(n, words, &[])
    }

    /// `check`, knowing the files the command's standard input reads
    /// (for `stdin` rules).
    pub fn check_fed(&self, n: &Normalized, words: &[&str], stdin: &[String]) -> Option<Hit> {
        let c = self.compiled().ok()?;
        let fed = match &c.stdin {
            None => None,
            Some(re) => Some(stdin.iter().find(|p| re.is_match(&lexical_path(p)))?),
        };
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
        if self
            .max_positionals
            .is_some_and(|max| n.positionals().nth(max).is_some())
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
            let global = |o: &Opt| sub.is_none_or(|(_, si)| o.index < si);
            let o = n.options().find(|o| {
                (!self.before_subcommand || global(o))
                    && c.option.iter().any(|x| x.matches(o))
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
            let want = match self.positional_index {
                Some(k) if k < 0 => Some(self.placed(n).count() as i64 + k),
                k => k,
            };
            let from = self.positional_from.unwrap_or(0);
            let mut places = self.placed(n).enumerate().peekable();
            let mut found = None;
            while let Some((k, (w, i))) = places.next() {
                if k < from || want.is_some_and(|x| x != k as i64) {
                    continue;
                }
                let p = as_path(w);
                if !re.is_match(&p) || excepted(&p) {
                    continue;
                }
                let seen = match &c.then {
                    None => w.to_string(),
                    Some(t) => {
                        let Some(&(_, (next, _))) = places.peek() else {
                            continue;
                        };
                        let np = as_path(next);
                        if !t.is_match(&np) || excepted(&np) {
                            continue;
                        }
                        format!("{w} {next}")
                    }
                };
                found = Some(Hit { index: i, seen });
                break;
            }
            hit = Some(found?);
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
        // What the input carries is the finding, whatever else had to hold.
        if let Some(p) = fed {
            hit = Some(Hit {
                index: 0,
                seen: format!("< {p}"),
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

    /// The positionals `positional` looks at: all of them, or the leading
    /// run (`leading`).
    fn placed<'n, 'a>(&self, n: &'n Normalized<'a>) -> impl Iterator<Item = (&'a str, usize)> + 'n {
        let sub = n.subcommand.map(|s| s.1);
        let leading = self.leading;
        let (mut started, mut stopped) = (false, false);
        n.items.iter().filter_map(move |item| match item {
            _ if stopped => None,
            Item::Pos(w, i) if Some(*i) != sub => {
                started = true;
                Some((*w, *i))
            }
            Item::Pos(..) => None,
            _ => {
                stopped = leading && started;
                None
            }
        })
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

        let none = rule(
            r#"id = "local.prog.all"
            commands = ["prog"]
            max_positionals = 0
            reason = "r"
            hint = "h""#,
        );
        assert!(fires(&none, "prog -o alice").is_some());
        assert!(fires(&none, "prog -o alice 42").is_none());

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
    fn positional_places_then_leading_and_global_options() {
        let last = rule(
            r#"id = "x.y.last"
            commands = ["prog"]
            positional = '^/'
            positional_index = -1
            reason = "r"
            hint = "h""#,
        );
        assert_eq!(fires(&last, "prog /a b /c").map(|h| h.index), Some(3));
        assert!(fires(&last, "prog /a b").is_none());
        assert!(fires(&last, "prog").is_none());

        let from = rule(
            r#"id = "x.y.from"
            commands = ["prog"]
            positional = '^/'
            positional_from = 1
            reason = "r"
            hint = "h""#,
        );
        assert!(fires(&from, "prog /script f").is_none());
        assert_eq!(
            fires(&from, "prog /script f /etc/x").map(|h| h.index),
            Some(3)
        );

        let then = rule(
            r#"id = "x.y.then"
            commands = ["find"]
            positional = '^-out$'
            then = '@OUTSIDE@'
            reason = "r"
            hint = "h""#,
        );
        let hit = fires_builtin(&then, "find x -out /tmp/f").unwrap();
        assert_eq!((hit.index, hit.seen.as_str()), (2, "-out /tmp/f"));
        assert!(fires_builtin(&then, "find x -out f").is_none());
        assert!(fires_builtin(&then, "find x -out").is_none());

        let leading = rule(
            r#"id = "x.y.leading"
            commands = ["prog"]
            positional = '^delete$'
            leading = true
            reason = "r"
            hint = "h""#,
        );
        assert!(fires(&leading, "prog -v group delete --yes").is_some());
        assert!(fires(&leading, "prog group show --name delete").is_none());

        let global = rule(
            r#"id = "x.y.global"
            commands = ["git"]
            option = ["--config-env"]
            before_subcommand = true
            reason = "r"
            hint = "h""#,
        );
        assert!(fires_builtin(&global, "git --config-env=a=b log").is_some());
        assert!(fires_builtin(&global, "git for-each-repo --config x fetch").is_none());
    }

    /// Does `args.awk.system` refuse `awk PROGRAM f` (or `gawk -e PROGRAM`)?
    fn awk_refused(argv: &[&str]) -> bool {
        let b = crate::check::packs::builtin();
        let n = normalize(b, argv[0], argv);
        b.rules_for(argv[0])
            .filter(|r| r.id == "args.awk.system")
            .any(|r| r.check(&n, argv).is_some())
    }

    /// awk programs as awk reads them: a pipe after print is a pipe unless
    /// it stands in a string, a regex literal or a comment, or is `||`; a
    /// `/` after an operand may be a division (both readings are tried).
    /// Multi-line programs are here because the corpus is lexed in simple
    /// syntax, which refuses newlines.
    const AWK: &[(&str, bool)] = &[
        (r#"{print gsub(/a|b/,"")}"#, false),
        (r#"{print ($0 ~ /a|b/)}"#, false),
        (r#"{print match($0,/foo|bar/)}"#, false),
        (r#"{print $1 ~ /^(GET|POST)$/}"#, false),
        (r#"{print $1 || $2}"#, false),
        (r#"{print /a|b/ ? "y" : "n"}"#, false),
        (r#"{print c ? "y" : /a|b/}"#, false),
        (r#"{print a[/x|y/]}"#, false),
        // Some awks end a regex at a `/` in brackets, others do not: an
        // unescaped `/` in brackets followed by `|` reads as a pipe.
        (r#"{print $1, /[/]|x/}"#, true),
        (r#"{print $1, /[\/]|x/}"#, false),
        (
            r#"{print $1 # a | b
        }"#,
            false,
        ),
        (r#"{print $1, /[[:alpha:]]|x/}"#, false),
        (r#"{print $1 / 2; print "|"}"#, false),
        (r#"{print | "sh"}"#, true),
        (r#"{print $1/2 | "sh"}"#, true),
        (r#"{print $1 /2/ 1 | "sh"}"#, true),
        (r#"{print x++ /a| "sh"; y = 1/}"#, true),
        (r#"{print length /a| "sh"; y = 1/}"#, true),
        (r#"{print (x) /a| "sh"; y = 1/}"#, true),
        (r#"{print x - /a| "sh"; y = 1/}"#, true),
        (r#"{print /[/]"/ | "sh"}"#, true),
        (r#"{print /[]/]"/ | "sh"}"#, true),
        (r#"{print /[[:alpha:]/]"/ | "sh"}"#, true),
        (r#"{print /a\/"/ | "sh"}"#, true),
        (r#"{print "a\"|" |& "sh"}"#, true),
        (r#"{print $1 ||| "sh"}"#, true),
        (
            r#"{print $1, # "
        "x" | "sh"}"#,
            true,
        ),
        (
            r#"{print "y" |\
        "sh"}"#,
            true,
        ),
        (
            r#"{print "y" \
        | "sh"}"#,
            true,
        ),
        (
            r#"{print "y",
        $1 | "sh"}"#,
            true,
        ),
        (r#"{print "y" > "f"; printf("%s", $1) | "sh"}"#, true),
        (r#"BEGIN{system("id")}"#, true),
        (
            r#"BEGIN{ system \
        ("id") }"#,
            true,
        ),
        (r#"BEGIN{"id" | getline x}"#, true),
        (
            r#"BEGIN{"id" |\
        getline x}"#,
            true,
        ),
        (r#"BEGIN{"id" |& getline x}"#, true),
        (r#"BEGIN{f="system"; @f("id")}"#, true),
        (r#"BEGIN{f="system"; @ f("id")}"#, true),
        (r#"BEGIN{f="system"; @awk::f("id")}"#, true),
        (r#"@ load "x"; BEGIN{}"#, true),
        (r#"{print "mail " $1 "@example.com"}"#, false),
    ];

    #[test]
    fn awk_pipes_are_read_as_awk_reads_them() {
        for (prog, refused) in AWK {
            assert_eq!(awk_refused(&["awk", prog, "f"]), *refused, "awk {prog}");
            assert_eq!(
                awk_refused(&["gawk", "-e", prog, "f"]),
                *refused,
                "gawk -e {prog}"
            );
        }
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
            r#"id = "a" commands = ["x"] then = "x" reason = "r" hint = "h""#,
            r#"id = "a" commands = ["x"] reason = "r" hint = "h" leading = true"#,
            r#"id = "a" commands = ["x"] reason = "r" hint = "h" before_subcommand = true"#,
        ] {
            let text = bad.replace("\" ", "\"\n").replace("] ", "]\n");
            let r: RuleSpec = toml::from_str(&text).unwrap();
            assert!(r.validate().is_err(), "{bad}");
        }
    }
}
