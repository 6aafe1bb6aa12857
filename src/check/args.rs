//! Reading an argv the way the program's own option parser reads it.
//!
//! A guard that matches strings loses to getopt: `-rf` is `-r -f`,
//! `-ofile` is `-o file`, `--checkpoint-act=x` is `--checkpoint-action=x`,
//! and `--` ends the options. `normalize` applies a program's `Grammar`
//! (which short options take a value, which long options exist and whether
//! they take one) and yields what the program will actually see. Words keep
//! their argv index so a refusal can point at the word the caller wrote.

use serde::{Deserialize, Serialize};

/// How one program (or one subcommand of it) parses its arguments.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Grammar {
    /// Program names (basenames); a trailing `*` matches any suffix.
    pub commands: Vec<String>,
    /// This grammar is for one subcommand (`git push`), not the program.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subcommand: Option<String>,
    /// Short options that take a value, attached (`-ofile`) or next (`-o file`).
    pub short_arg: String,
    /// Short options whose value is optional and only attached (`-i.bak`).
    pub short_opt: String,
    /// Short options after which option parsing ends (python's `-c`, `-m`).
    pub short_stop: String,
    /// Long options (without `--`) that take a value (`--opt=v`, `--opt v`).
    pub long_arg: Vec<String>,
    /// Long options whose value is optional and only given with `=`.
    pub long_opt: Vec<String>,
    /// Long options without a value.
    pub long_flag: Vec<String>,
    /// Options end at the first positional (POSIX getopt, `+` optstring,
    /// wrappers, programs with subcommands).
    pub stop: bool,
    /// No getopt at all: every word is a positional (find's expression, dd).
    pub words: bool,
    /// The first positional is a subcommand with a grammar of its own.
    pub subcommands: bool,
    /// tar's old style: a first word without `-` is a bundle of short options
    /// whose values are the following words, in order (`tar cfI a.tar sh`).
    pub old_bundle: bool,
    /// A first word `+NAME` picks a toolchain and is not the subcommand
    /// (rustup's proxies: `cargo +nightly publish`).
    pub toolchain_word: bool,
}

impl Grammar {
    pub fn applies_to(&self, program: &str) -> bool {
        self.commands.iter().any(|c| name_matches(c, program))
    }

    fn takes_long(&self, name: &str) -> Option<Arity> {
        if self.long_arg.iter().any(|l| l == name) {
            Some(Arity::Required)
        } else if self.long_opt.iter().any(|l| l == name) {
            Some(Arity::Optional)
        } else if self.long_flag.iter().any(|l| l == name) {
            Some(Arity::None)
        } else {
            None
        }
    }

    fn all_longs(&self) -> impl Iterator<Item = &String> {
        self.long_arg
            .iter()
            .chain(&self.long_opt)
            .chain(&self.long_flag)
    }
}

/// A command name pattern: exact, or a prefix ending in `*` (`mkfs.*`).
pub fn name_matches(pattern: &str, program: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => program.starts_with(prefix),
        None => pattern == program,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    None,
    Optional,
    Required,
}

/// One option as the program reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt<'a> {
    /// argv index of the word holding the option.
    pub index: usize,
    /// `Some('o')` for a short option.
    pub short: Option<char>,
    /// Long option names it stands for, without `--`: one when exact or a
    /// unique prefix, several when the prefix is ambiguous (getopt would
    /// refuse it; a guard must assume any of them). Empty for a long
    /// option the grammar does not know.
    pub long: Vec<&'a str>,
    /// The long name as written (without `--` and `=value`).
    pub written: &'a str,
    pub value: Option<&'a str>,
    /// argv index of the word holding the value.
    pub value_index: usize,
    /// Byte offset of a short option's letter in its word.
    pub offset: usize,
}

impl Opt<'_> {
    /// How the program reads it, for reports: `--checkpoint-action=exec=sh`, `-o file`.
    pub fn display(&self) -> String {
        let name = match (self.short, self.long.as_slice()) {
            (Some(c), _) => format!("-{c}"),
            (None, [one]) => format!("--{one}"),
            (None, []) if self.written.starts_with('+') => self.written.to_string(),
            (None, []) => format!("--{}", self.written),
            (None, many) => format!("--{}", many.to_vec().join("|--")),
        };
        match (self.value, self.short) {
            (Some(v), Some(_)) => format!("{name} {v}"),
            (Some(v), None) => format!("{name}={v}"),
            (None, _) => name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item<'a> {
    Opt(Opt<'a>),
    /// A positional word and its argv index.
    Pos(&'a str, usize),
    /// `--`: options end here.
    End(usize),
}

/// An argv as the program will read it.
#[derive(Debug, Clone, Default)]
pub struct Normalized<'a> {
    pub items: Vec<Item<'a>>,
    /// The subcommand and its index, for programs with subcommands.
    pub subcommand: Option<(&'a str, usize)>,
}

impl<'a> Normalized<'a> {
    pub fn options(&self) -> impl Iterator<Item = &Opt<'a>> {
        self.items.iter().filter_map(|i| match i {
            Item::Opt(o) => Some(o),
            _ => None,
        })
    }

    /// Positionals, the subcommand word excluded.
    pub fn positionals(&self) -> impl Iterator<Item = (&'a str, usize)> + '_ {
        let sub = self.subcommand.map(|s| s.1);
        self.items.iter().filter_map(move |i| match i {
            Item::Pos(w, idx) if Some(*idx) != sub => Some((*w, *idx)),
            _ => None,
        })
    }

    /// Index of the first positional at or after argv index `from`.
    pub fn first_positional(&self) -> Option<(&'a str, usize)> {
        self.positionals().next()
    }

    /// The reading as words, for reports: `-r -f --output=x -- a`.
    pub fn display(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|i| match i {
                Item::Opt(o) => o.display(),
                Item::Pos(w, _) => w.to_string(),
                Item::End(_) => "--".to_string(),
            })
            .collect()
    }
}

/// The grammar for a program, or for one of its subcommands.
pub trait Grammars {
    fn grammar(&self, program: &str, subcommand: Option<&str>) -> Option<&Grammar>;
}

static PLAIN: Grammar = Grammar {
    commands: Vec::new(),
    subcommand: None,
    short_arg: String::new(),
    short_opt: String::new(),
    short_stop: String::new(),
    long_arg: Vec::new(),
    long_opt: Vec::new(),
    long_flag: Vec::new(),
    stop: false,
    words: false,
    subcommands: false,
    old_bundle: false,
    toolchain_word: false,
};

/// Reads `argv` (argv[0] is the program) as `program`'s parser does.
/// A program without a grammar is read as plain GNU getopt that knows no
/// option: short bundles are flags, `--opt=value` is split.
pub fn normalize<'a>(
    grammars: &'a dyn Grammars,
    program: &str,
    argv: &[&'a str],
) -> Normalized<'a> {
    let top = grammars.grammar(program, None).unwrap_or(&PLAIN);
    let mut out = Normalized::default();
    let mut i = 1;
    if top.old_bundle && argv.len() > 1 && !argv[1].starts_with('-') && !argv[1].is_empty() {
        i = old_bundle(top, argv, &mut out.items);
    }
    if top.toolchain_word
        && argv
            .get(1)
            .is_some_and(|w| w.len() > 1 && w.starts_with('+'))
    {
        out.items.push(Item::Opt(Opt {
            index: 1,
            short: None,
            long: Vec::new(),
            written: argv[1],
            value: None,
            value_index: 1,
            offset: 0,
        }));
        i = 2;
    }
    let rest = parse(top, argv, i, &mut out.items);
    if let Some(at) = rest.filter(|_| top.subcommands) {
        let sub = argv[at];
        out.subcommand = Some((sub, at));
        out.items.push(Item::Pos(sub, at));
        let g = grammars.grammar(program, Some(sub)).unwrap_or(&PLAIN);
        if let Some(end) = parse(g, argv, at + 1, &mut out.items) {
            positionals_from(argv, end, &mut out.items);
        }
    } else if let Some(at) = rest {
        positionals_from(argv, at, &mut out.items);
    }
    out
}

fn positionals_from<'a>(argv: &[&'a str], from: usize, items: &mut Vec<Item<'a>>) {
    for (k, w) in argv.iter().enumerate().skip(from) {
        items.push(Item::Pos(w, k));
    }
}

/// tar's `tar cvfC a.tar dir ...`: letters of the first word, values from
/// the following words. Returns where ordinary parsing resumes.
fn old_bundle<'a>(g: &'a Grammar, argv: &[&'a str], items: &mut Vec<Item<'a>>) -> usize {
    let word = argv[1];
    let mut next = 2;
    for (off, c) in word.char_indices() {
        let mut opt = short(1, c, off);
        if g.short_arg.contains(c) && next < argv.len() {
            opt.value = Some(argv[next]);
            opt.value_index = next;
            next += 1;
        }
        items.push(Item::Opt(opt));
    }
    next
}

fn short<'a>(index: usize, c: char, offset: usize) -> Opt<'a> {
    Opt {
        index,
        short: Some(c),
        long: Vec::new(),
        written: "",
        value: None,
        value_index: index,
        offset,
    }
}

/// Parses options from `argv[start..]` into `items`. Returns the index where
/// positionals begin when the grammar stops at the first one (or where the
/// rest must be taken verbatim), `None` when everything was consumed.
fn parse<'a>(
    g: &'a Grammar,
    argv: &[&'a str],
    start: usize,
    items: &mut Vec<Item<'a>>,
) -> Option<usize> {
    if g.words {
        return Some(start);
    }
    let mut i = start;
    while i < argv.len() {
        let word = argv[i];
        if word == "--" {
            items.push(Item::End(i));
            return Some(i + 1).filter(|&n| n < argv.len());
        }
        if let Some(body) = word.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let (long, arity) = resolve_long(g, name);
            let mut opt = Opt {
                index: i,
                short: None,
                long,
                written: name,
                value,
                value_index: i,
                offset: 0,
            };
            if value.is_none() && arity == Arity::Required && i + 1 < argv.len() {
                opt.value = Some(argv[i + 1]);
                opt.value_index = i + 1;
                i += 1;
            }
            items.push(Item::Opt(opt));
            i += 1;
            continue;
        }
        if word.len() > 1 && word.starts_with('-') {
            let mut stop_after = false;
            for (off, c) in word.char_indices().skip(1) {
                let mut opt = short(i, c, off);
                let rest = &word[off + c.len_utf8()..];
                if g.short_arg.contains(c) {
                    if !rest.is_empty() {
                        opt.value = Some(rest);
                    } else if i + 1 < argv.len() {
                        opt.value = Some(argv[i + 1]);
                        opt.value_index = i + 1;
                    }
                    stop_after = g.short_stop.contains(c);
                    let consumed_next = opt.value_index != i;
                    items.push(Item::Opt(opt));
                    if consumed_next {
                        i += 1;
                    }
                    break;
                }
                if g.short_opt.contains(c) {
                    if !rest.is_empty() {
                        opt.value = Some(rest);
                    }
                    items.push(Item::Opt(opt));
                    break;
                }
                items.push(Item::Opt(opt));
                if g.short_stop.contains(c) {
                    stop_after = true;
                }
            }
            i += 1;
            if stop_after {
                return Some(i).filter(|&n| n < argv.len());
            }
            continue;
        }
        // A positional (including `-` alone).
        if g.stop || g.subcommands {
            return Some(i);
        }
        items.push(Item::Pos(word, i));
        i += 1;
    }
    None
}

/// getopt_long's lookup: an exact name wins; otherwise every long option
/// the name is a prefix of. Ambiguous prefixes keep all candidates.
fn resolve_long<'a>(g: &'a Grammar, name: &str) -> (Vec<&'a str>, Arity) {
    if let Some(a) = g.takes_long(name) {
        let exact = g.all_longs().find(|l| *l == name).map(String::as_str);
        return (exact.into_iter().collect(), a);
    }
    if name.is_empty() {
        return (Vec::new(), Arity::None);
    }
    let mut found: Vec<&'a str> = Vec::new();
    let mut arity = Arity::None;
    for l in g.all_longs().filter(|l| l.starts_with(name)) {
        if !found.contains(&l.as_str()) {
            found.push(l);
        }
        // If any reading takes a value, assume the next word is it.
        match g.takes_long(l) {
            Some(Arity::Required) => arity = Arity::Required,
            Some(Arity::Optional) if arity == Arity::None => arity = Arity::Optional,
            _ => {}
        }
    }
    (found, arity)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Table(Vec<Grammar>);

    impl Grammars for Table {
        fn grammar(&self, program: &str, sub: Option<&str>) -> Option<&Grammar> {
            self.0
                .iter()
                .find(|g| g.applies_to(program) && g.subcommand.as_deref() == sub)
        }
    }

    fn table() -> Table {
        let g = |text: &str| -> Grammar { toml::from_str(text).unwrap() };
        Table(vec![
            g(r#"commands = ["tar"]
                short_arg = "fCIFbgHKLNTVX"
                long_arg = ["file", "directory", "checkpoint-action", "to-command", "use-compress-program"]
                long_opt = ["checkpoint"]
                long_flag = ["totals", "to-stdout", "touch", "extract", "list", "create"]
                old_bundle = true"#),
            g(r#"commands = ["sort"]
                short_arg = "kotST"
                long_arg = ["output", "compress-program", "key"]
                long_flag = ["numeric-sort"]"#),
            g(r#"commands = ["git"]
                short_arg = "Cc"
                long_arg = ["git-dir"]
                subcommands = true"#),
            g(r#"commands = ["git"]
                subcommand = "push"
                short_arg = "o"
                long_flag = ["force", "force-if-includes", "delete"]
                long_opt = ["force-with-lease"]"#),
            g(r#"commands = ["timeout"]
                short_arg = "ks"
                long_arg = ["kill-after", "signal"]
                long_flag = ["foreground", "preserve-status", "verbose"]
                stop = true"#),
            g(r#"commands = ["python*"]
                short_arg = "cmWX"
                short_stop = "cm"
                stop = true"#),
            g(r#"commands = ["find"]
                words = true"#),
            g(r#"commands = ["cargo"]
                short_arg = "CZ"
                subcommands = true
                toolchain_word = true"#),
        ])
    }

    /// (program argv, expected reading)
    const CASES: &[(&str, &str)] = &[
        ("sort -n f", "-n f"),
        ("sort -no out f", "-n -o out f"),
        ("sort -oout f", "-o out f"),
        ("sort f -o out", "f -o out"),
        ("sort --output=x f", "--output=x f"),
        ("sort --output x f", "--output=x f"),
        ("sort --out x f", "--output=x f"),
        ("sort --compress-prog=sh f", "--compress-program=sh f"),
        ("sort --compress-prog sh f", "--compress-program=sh f"),
        ("sort -- -o x", "-- -o x"),
        ("sort - f", "- f"),
        ("sort -k1o/x f", "-k 1o/x f"),
        ("sort --unknown=3 f", "--unknown=3 f"),
        ("sort -rZ f", "-r -Z f"),
        (
            "tar --checkpoint-act=exec=sh -cf a.tar x",
            "--checkpoint-action=exec=sh -c -f a.tar x",
        ),
        ("tar --checkpoint -cf a x", "--checkpoint -c -f a x"),
        ("tar --checkpoint=5 x", "--checkpoint=5 x"),
        ("tar --to x", "--to-command|--totals|--to-stdout|--touch=x"),
        ("tar -tf a.tar", "-t -f a.tar"),
        ("tar xvfC a.tar dir f", "-x -v -f a.tar -C dir f"),
        ("tar cfI a.tar sh x", "-c -f a.tar -I sh x"),
        ("tar -xf a.tar -C /", "-x -f a.tar -C /"),
        ("git -c core.pager=sh log", "-c core.pager=sh log"),
        ("git -ccore.pager=sh log", "-c core.pager=sh log"),
        (
            "git push --forc origin",
            "push --force-with-lease|--force|--force-if-includes origin",
        ),
        ("git push --force origin", "push --force origin"),
        (
            "git push --force-with origin",
            "push --force-with-lease origin",
        ),
        (
            "git push --force-w=x origin",
            "push --force-with-lease=x origin",
        ),
        ("git push origin -f", "push origin -f"),
        ("git push -- -f", "push -- -f"),
        ("git -C d push -fo x", "-C d push -f -o x"),
        ("timeout 5 rm -rf /", "5 rm -rf /"),
        ("timeout -s KILL 5 sh", "-s KILL 5 sh"),
        ("timeout --sig=KILL 5 sh", "--signal=KILL 5 sh"),
        ("python3 -c code -x y", "-c code -x y"),
        ("python3 -Ic code", "-I -c code"),
        ("python3 -m pip install -e .", "-m pip install -e ."),
        ("find . -exec id ;", ". -exec id ;"),
        ("unknown -rf --opt=v x", "-r -f --opt=v x"),
        (
            "cargo +nightly publish --dry-run",
            "+nightly publish --dry-run",
        ),
        ("cargo +1.80 -Zx publish", "+1.80 -Z x publish"),
        ("cargo -v +nightly", "-v +nightly"),
        ("cargo + publish", "+ publish"),
    ];

    #[test]
    fn readings_match_getopt() {
        let t = table();
        for (cmd, want) in CASES {
            let argv: Vec<&str> = cmd.split(' ').collect();
            let n = normalize(&t, argv[0], &argv);
            let got = n.display();
            // Render separately-given short values as in `display`.
            assert_eq!(got.join(" "), *want, "{cmd}");
        }
    }

    #[test]
    fn indices_point_at_the_written_word() {
        let t = table();
        let argv = ["sort", "-n", "-ofile", "x"];
        let n = normalize(&t, "sort", &argv);
        let o = n.options().find(|o| o.short == Some('o')).unwrap();
        assert_eq!((o.index, o.value_index, o.value), (2, 2, Some("file")));
        let argv = ["sort", "-o", "file", "x"];
        let n = normalize(&t, "sort", &argv);
        let o = n.options().find(|o| o.short == Some('o')).unwrap();
        assert_eq!((o.index, o.value_index), (1, 2));
        assert_eq!(n.first_positional(), Some(("x", 3)));
    }

    #[test]
    fn subcommand_is_found_after_global_options() {
        let t = table();
        let argv = ["git", "-C", "d", "push", "-f"];
        let n = normalize(&t, "git", &argv);
        assert_eq!(n.subcommand, Some(("push", 3)));
        assert_eq!(n.positionals().count(), 0);
        let argv = ["cargo", "+nightly", "publish"];
        let n = normalize(&t, "cargo", &argv);
        assert_eq!(n.subcommand, Some(("publish", 2)));
        let argv = ["cargo", "-v", "+nightly"];
        assert_eq!(
            normalize(&t, "cargo", &argv).subcommand,
            Some(("+nightly", 2))
        );
    }
}
