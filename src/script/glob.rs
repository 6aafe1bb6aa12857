//! Patterns as bash matches them (`*`, `?`, `[...]`), for pathname
//! expansion, `case` and `${x#pattern}`; and the directory walk of
//! pathname expansion, done by the confined interpreter so it sees only
//! what Landlock lets it read.
//!
//! Bash's defaults in `bash -c`: no extglob, no nullglob, no dotglob,
//! `globskipdots` (`.` and `..` never match), `globasciiranges` (ranges by
//! code point). Results are sorted by bytes (bash with `LC_COLLATE=C`).

/// One element of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Char(char),
    Any,
    Star,
    Class {
        negated: bool,
        items: Vec<ClassItem>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ClassItem {
    Char(char),
    Range(char, char),
    Named(&'static str),
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    toks: Vec<Tok>,
}

/// Pattern text: each character with whether it is active (unquoted).
pub type PatText = [(char, bool)];

/// Whether the text holds an active `*`, `?` or `[` (the only characters
/// that make bash try pathname expansion).
pub fn has_magic(text: &PatText) -> bool {
    text.iter()
        .any(|&(c, active)| active && matches!(c, '*' | '?' | '['))
}

const CLASSES: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

fn class_matches(name: &str, c: char) -> bool {
    match name {
        "alnum" => c.is_alphanumeric(),
        "alpha" => c.is_alphabetic(),
        "ascii" => c.is_ascii(),
        "blank" => c == ' ' || c == '\t',
        "cntrl" => c.is_control(),
        "digit" => c.is_ascii_digit(),
        "graph" => !c.is_control() && !c.is_whitespace(),
        "lower" => c.is_lowercase(),
        "print" => !c.is_control(),
        "punct" => c.is_ascii_punctuation(),
        "space" => c.is_whitespace(),
        "upper" => c.is_uppercase(),
        "word" => c.is_alphanumeric() || c == '_',
        "xdigit" => c.is_ascii_hexdigit(),
        _ => false,
    }
}

impl Pattern {
    /// Compiles pattern text. A `[` without a closing `]` is a plain `[`;
    /// an active backslash quotes the next character (as in bash, where an
    /// unquoted backslash can reach a pattern only from an expansion).
    pub fn compile(text: &PatText) -> Pattern {
        let mut toks = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let (c, active) = text[i];
            if !active {
                toks.push(Tok::Char(c));
                i += 1;
                continue;
            }
            match c {
                '*' => {
                    if toks.last() != Some(&Tok::Star) {
                        toks.push(Tok::Star);
                    }
                    i += 1;
                }
                '?' => {
                    toks.push(Tok::Any);
                    i += 1;
                }
                '\\' if i + 1 < text.len() => {
                    toks.push(Tok::Char(text[i + 1].0));
                    i += 2;
                }
                '[' => match parse_class(text, i + 1) {
                    Some((tok, next)) => {
                        toks.push(tok);
                        i = next;
                    }
                    None => {
                        toks.push(Tok::Char('['));
                        i += 1;
                    }
                },
                _ => {
                    toks.push(Tok::Char(c));
                    i += 1;
                }
            }
        }
        Pattern { toks }
    }

    /// A pattern matching exactly this text.
    pub fn literal(s: &str) -> Pattern {
        Pattern {
            toks: s.chars().map(Tok::Char).collect(),
        }
    }

    /// Whether the whole of `s` matches.
    pub fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        match_from(&self.toks, &chars)
    }

    /// Whether it matches, with pathname rules: a leading `.` must be
    /// matched by a literal `.`, and `.`/`..` never match.
    pub fn matches_name(&self, name: &str) -> bool {
        if name == "." || name == ".." {
            return false;
        }
        if name.starts_with('.') && self.toks.first() != Some(&Tok::Char('.')) {
            return false;
        }
        self.matches(name)
    }

    fn starts_with_dot(&self) -> bool {
        self.toks.first() == Some(&Tok::Char('.'))
    }

    /// The byte length of the shortest or longest prefix of `s` that
    /// matches, if any.
    pub fn prefix_len(&self, s: &str, longest: bool) -> Option<usize> {
        let chars: Vec<(usize, char)> = s.char_indices().collect();
        let ends: Vec<usize> = (0..=chars.len()).collect();
        let pick = |k: usize| {
            if k == chars.len() {
                s.len()
            } else {
                chars[k].0
            }
        };
        let only: Vec<char> = chars.iter().map(|(_, c)| *c).collect();
        let try_k = |k: &usize| match_from(&self.toks, &only[..*k]);
        if longest {
            ends.iter().rev().find(|k| try_k(k)).map(|&k| pick(k))
        } else {
            ends.iter().find(|k| try_k(k)).map(|&k| pick(k))
        }
    }

    /// The byte offset where the shortest or longest matching suffix of
    /// `s` starts, if any.
    pub fn suffix_start(&self, s: &str, longest: bool) -> Option<usize> {
        let chars: Vec<(usize, char)> = s.char_indices().collect();
        let only: Vec<char> = chars.iter().map(|(_, c)| *c).collect();
        let pick = |k: usize| {
            if k == chars.len() {
                s.len()
            } else {
                chars[k].0
            }
        };
        let starts: Vec<usize> = (0..=chars.len()).collect();
        let try_k = |k: &usize| match_from(&self.toks, &only[*k..]);
        if longest {
            starts.iter().find(|k| try_k(k)).map(|&k| pick(k))
        } else {
            starts.iter().rev().find(|k| try_k(k)).map(|&k| pick(k))
        }
    }
}

fn parse_class(text: &PatText, mut i: usize) -> Option<(Tok, usize)> {
    let mut negated = false;
    if i < text.len() && text[i].1 && (text[i].0 == '!' || text[i].0 == '^') {
        negated = true;
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let &(c, active) = text.get(i)?;
        if c == ']' && active && !first {
            return Some((Tok::Class { negated, items }, i + 1));
        }
        first = false;
        if c == '[' && active && text.get(i + 1).map(|t| t.0) == Some(':') {
            // [:name:]
            let rest: String = text[i + 2..].iter().map(|t| t.0).collect();
            if let Some(end) = rest.find(":]") {
                let name = &rest[..end];
                if let Some(n) = CLASSES.iter().find(|n| **n == name) {
                    items.push(ClassItem::Named(n));
                    i += 2 + name.chars().count() + 2;
                    continue;
                }
            }
        }
        let (lo, next) = if c == '\\' && active && i + 1 < text.len() {
            (text[i + 1].0, i + 2)
        } else {
            (c, i + 1)
        };
        // A range `a-z` (a `-` before `]` is literal).
        if text.get(next).map(|t| t.0) == Some('-')
            && let Some(&(hi, hi_active)) = text.get(next + 1)
            && !(hi == ']' && hi_active)
        {
            let (hi, after) = if hi == '\\' && hi_active && next + 2 < text.len() {
                (text[next + 2].0, next + 3)
            } else {
                (hi, next + 2)
            };
            items.push(ClassItem::Range(lo, hi));
            i = after;
            continue;
        }
        items.push(ClassItem::Char(lo));
        i = next;
    }
}

fn class_has(items: &[ClassItem], c: char) -> bool {
    items.iter().any(|it| match *it {
        ClassItem::Char(x) => x == c,
        ClassItem::Range(lo, hi) => lo <= c && c <= hi,
        ClassItem::Named(n) => class_matches(n, c),
    })
}

/// Iterative matcher with single-star backtracking (linear in practice,
/// no exponential blow-up on `*a*a*a*b`).
fn match_from(toks: &[Tok], s: &[char]) -> bool {
    let (mut t, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if t < toks.len() {
            match &toks[t] {
                Tok::Star => {
                    star = Some((t, i));
                    t += 1;
                    continue;
                }
                Tok::Any if i < s.len() => {
                    t += 1;
                    i += 1;
                    continue;
                }
                Tok::Char(c) if i < s.len() && s[i] == *c => {
                    t += 1;
                    i += 1;
                    continue;
                }
                Tok::Class { negated, items }
                    if i < s.len() && class_has(items, s[i]) != *negated =>
                {
                    t += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        match star {
            Some((st, si)) if si < s.len() => {
                star = Some((st, si + 1));
                t = st + 1;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Reads a directory's entry names; errors read as "no entries", as bash
/// treats an unreadable directory during pathname expansion.
pub trait Dirs {
    fn list(&mut self, dir: &str) -> Vec<String>;
    fn exists(&mut self, path: &str) -> bool;
    fn is_dir(&mut self, path: &str) -> bool;
    /// A directory, not a symlink to one (`**` does not follow symlinks,
    /// as bash's since 4.3).
    fn is_real_dir(&mut self, path: &str) -> bool {
        self.is_dir(path)
    }
    /// `shopt -s globstar`: a component `**` matches any depth.
    fn globstar(&self) -> bool {
        false
    }
}

/// At most this many directories are walked for one `**` (a tree larger
/// than that is cut, the rest unmatched): expansion stays bounded.
const GLOBSTAR_MAX_DIRS: usize = 100_000;

/// The real file system, relative to `cwd` for relative patterns.
pub struct Fs {
    pub cwd: String,
    /// `shopt -s globstar`.
    pub globstar: bool,
}

impl Fs {
    fn full(&self, p: &str) -> String {
        if p.starts_with('/') {
            p.to_string()
        } else if p.is_empty() {
            self.cwd.clone()
        } else {
            format!("{}/{}", self.cwd, p)
        }
    }
}

impl Dirs for Fs {
    fn list(&mut self, dir: &str) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.full(dir)) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()
    }

    fn exists(&mut self, path: &str) -> bool {
        std::fs::symlink_metadata(self.full(path)).is_ok()
    }

    fn is_dir(&mut self, path: &str) -> bool {
        std::fs::metadata(self.full(path)).is_ok_and(|m| m.is_dir())
    }

    fn is_real_dir(&mut self, path: &str) -> bool {
        std::fs::symlink_metadata(self.full(path)).is_ok_and(|m| m.is_dir())
    }

    fn globstar(&self) -> bool {
        self.globstar
    }
}

/// `**` under globstar: every directory below `prefix` (not following
/// symlinks, not hidden ones), each with a trailing `/`; with `files` the
/// other entries too, and with `links` the symlinks to directories as
/// directories (bash lists them for a final `**/` without entering them);
/// sorted as bash sorts them.
fn descend(prefix: &str, files: bool, links: bool, fs: &mut dyn Dirs) -> Vec<String> {
    let mut out = Vec::new();
    let mut queue = vec![prefix.to_string()];
    let mut walked = 0;
    while let Some(p) = queue.pop() {
        walked += 1;
        if walked > GLOBSTAR_MAX_DIRS {
            break;
        }
        let dir = if p.is_empty() { "." } else { p.as_str() };
        for name in fs.list(dir) {
            if name.starts_with('.') {
                continue;
            }
            let path = format!("{p}{name}");
            if fs.is_real_dir(&path) {
                queue.push(format!("{path}/"));
                out.push(format!("{path}/"));
            } else if links && fs.is_dir(&path) {
                out.push(format!("{path}/"));
            } else if files {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Pathname expansion of one field; empty when nothing matches.
pub fn expand(text: &PatText, fs: &mut dyn Dirs) -> Vec<String> {
    // Components split on every `/`, quoted or not.
    let mut comps: Vec<Vec<(char, bool)>> = vec![Vec::new()];
    for &(c, a) in text {
        if c == '/' {
            comps.push(Vec::new());
        } else if let Some(last) = comps.last_mut() {
            last.push((c, a));
        }
    }
    let absolute = text.first().is_some_and(|t| t.0 == '/');
    let mut prefixes: Vec<String> = vec![if absolute { "/".into() } else { String::new() }];
    let start = usize::from(absolute);
    let n = comps.len();
    let mut any_magic = false;
    for (k, comp) in comps.iter().enumerate().skip(start) {
        let last = k + 1 == n;
        let mut next = Vec::new();
        if comp.is_empty() {
            // A trailing slash (or `//`): keep directories only.
            for p in prefixes {
                // The current directory itself (`**/` matching no
                // directory) is no match.
                if last && (p.is_empty() || !fs.is_dir(&p)) {
                    continue;
                }
                next.push(if p.ends_with('/') { p } else { format!("{p}/") });
            }
            prefixes = next;
            continue;
        }
        let starstar = comp.len() == 2 && comp.iter().all(|&(c, active)| c == '*' && active);
        if starstar && fs.globstar() {
            any_magic = true;
            // `**/` at the end lists directories only.
            let dirs_only = k + 2 == n && comps[k + 1].is_empty();
            for p in &prefixes {
                if last {
                    // `**` last: the directory itself (not the current
                    // one), then every file and directory below, without
                    // their trailing slashes.
                    if !p.is_empty() {
                        next.push(p.clone());
                    }
                    next.extend(
                        descend(p, true, false, fs)
                            .into_iter()
                            .map(|x| x.trim_end_matches('/').to_string()),
                    );
                } else {
                    // `**/`: this directory and every one below.
                    next.push(p.clone());
                    next.extend(descend(p, false, dirs_only, fs));
                }
            }
            next.dedup();
        } else if has_magic(comp) {
            any_magic = true;
            let pat = Pattern::compile(comp);
            let dot = pat.starts_with_dot();
            let _ = dot;
            for p in &prefixes {
                let dir = if p.is_empty() { "." } else { p.as_str() };
                let mut names: Vec<String> = fs
                    .list(dir)
                    .into_iter()
                    .filter(|name| pat.matches_name(name))
                    .collect();
                names.sort();
                for name in names {
                    let path = format!("{p}{name}");
                    if last || fs.is_dir(&path) {
                        next.push(if last { path } else { format!("{path}/") });
                    }
                }
            }
        } else {
            let lit: String = comp.iter().map(|t| t.0).collect();
            for p in &prefixes {
                let path = format!("{p}{lit}");
                if last {
                    if fs.exists(&path) {
                        next.push(path);
                    }
                } else {
                    next.push(format!("{path}/"));
                }
            }
        }
        prefixes = next;
        if prefixes.is_empty() {
            break;
        }
    }
    if !any_magic {
        return Vec::new();
    }
    prefixes.sort();
    prefixes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(s: &str) -> Vec<(char, bool)> {
        s.chars().map(|c| (c, true)).collect()
    }

    #[test]
    fn matching_follows_bash() {
        let table: &[(&str, &str, bool)] = &[
            ("*.rs", "main.rs", true),
            ("*.rs", "main.rc", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("[abc]x", "bx", true),
            ("[!abc]x", "bx", false),
            ("[^abc]x", "dx", true),
            ("[a-c]", "b", true),
            ("[a-c]", "B", false),
            ("[]]", "]", true),
            ("[a-]", "-", true),
            ("[[:digit:]]*", "1abc", true),
            ("[[:upper:]]", "a", false),
            ("[", "[", true),
            ("a[", "a[", true),
            (
                "*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac",
                false,
            ),
            ("**", "", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
        ];
        for (p, s, want) in table {
            assert_eq!(
                Pattern::compile(&act(p)).matches(s),
                *want,
                "{p:?} vs {s:?}"
            );
        }
        // Quoted characters are literal.
        let quoted: Vec<(char, bool)> = vec![('*', false), ('.', true)];
        assert!(!Pattern::compile(&quoted).matches("a."));
        assert!(Pattern::compile(&quoted).matches("*."));
    }

    #[test]
    fn names_hide_dotfiles() {
        let p = Pattern::compile(&act("*"));
        assert!(!p.matches_name(".git"));
        assert!(!p.matches_name("."));
        let p = Pattern::compile(&act(".*"));
        assert!(p.matches_name(".git"));
        assert!(!p.matches_name(".."));
    }

    #[test]
    fn trimming() {
        let p = Pattern::compile(&act("*/"));
        assert_eq!(p.prefix_len("a/b/c", false), Some(2));
        assert_eq!(p.prefix_len("a/b/c", true), Some(4));
        let p = Pattern::compile(&act(".*"));
        assert_eq!(p.suffix_start("f.tar.gz", false), Some(5));
        assert_eq!(p.suffix_start("f.tar.gz", true), Some(1));
        assert_eq!(Pattern::compile(&act("x")).prefix_len("abc", false), None);
    }

    struct Fake(Vec<&'static str>);

    impl Dirs for Fake {
        fn list(&mut self, dir: &str) -> Vec<String> {
            let d = dir.trim_end_matches('/');
            let d = if d == "." { "" } else { d };
            let mut out = Vec::new();
            for f in &self.0 {
                let rest = if d.is_empty() {
                    Some(*f)
                } else {
                    f.strip_prefix(d).and_then(|r| r.strip_prefix('/'))
                };
                if let Some(r) = rest {
                    let name = r.split('/').next().unwrap_or("");
                    if !name.is_empty() && !out.contains(&name.to_string()) {
                        out.push(name.to_string());
                    }
                }
            }
            out.reverse();
            out
        }
        fn exists(&mut self, path: &str) -> bool {
            let p = path.trim_end_matches('/');
            self.0
                .iter()
                .any(|f| *f == p || f.starts_with(&format!("{p}/")))
        }
        fn is_dir(&mut self, path: &str) -> bool {
            let p = path.trim_end_matches('/');
            self.0.iter().any(|f| f.starts_with(&format!("{p}/")))
        }
    }

    /// `Fake` under `shopt -s globstar`.
    struct Star(Fake);

    impl Dirs for Star {
        fn list(&mut self, dir: &str) -> Vec<String> {
            self.0.list(dir)
        }
        fn exists(&mut self, path: &str) -> bool {
            self.0.exists(path)
        }
        fn is_dir(&mut self, path: &str) -> bool {
            self.0.is_dir(path)
        }
        fn globstar(&self) -> bool {
            true
        }
    }

    #[test]
    fn globstar_matches_any_depth_and_only_when_set() {
        let tree = || {
            Fake(vec![
                "a.txt",
                "d/x.txt",
                "d/y.rs",
                "d/sub/z.txt",
                "e/x.txt",
                ".h/q.txt",
            ])
        };
        assert_eq!(
            expand(&act("**/*.txt"), &mut Star(tree())),
            vec!["a.txt", "d/sub/z.txt", "d/x.txt", "e/x.txt"]
        );
        assert_eq!(
            expand(&act("**"), &mut Star(tree())),
            vec![
                "a.txt",
                "d",
                "d/sub",
                "d/sub/z.txt",
                "d/x.txt",
                "d/y.rs",
                "e",
                "e/x.txt"
            ]
        );
        assert_eq!(
            expand(&act("d/**"), &mut Star(tree())),
            vec!["d/", "d/sub", "d/sub/z.txt", "d/x.txt", "d/y.rs"]
        );
        assert_eq!(
            expand(&act("d/**/"), &mut Star(tree())),
            vec!["d/", "d/sub/"]
        );
        assert_eq!(
            expand(&act("**/"), &mut Star(tree())),
            vec!["d/", "d/sub/", "e/"]
        );
        // Without globstar `**` is `*`.
        assert_eq!(
            expand(&act("**/*.txt"), &mut tree()),
            vec!["d/x.txt", "e/x.txt"]
        );
        // Quoted, it is two literal stars.
        let quoted: Vec<(char, bool)> = vec![('*', false), ('*', false), ('/', true), ('*', true)];
        assert!(expand(&quoted, &mut Star(tree())).is_empty());
    }

    #[test]
    fn walks_directories() {
        let mut fs = Fake(vec![
            "a.txt", "b.txt", ".h.txt", "d/x.txt", "d/y.rs", "e/x.txt",
        ]);
        assert_eq!(expand(&act("*.txt"), &mut fs), vec!["a.txt", "b.txt"]);
        assert_eq!(expand(&act("*/x.txt"), &mut fs), vec!["d/x.txt", "e/x.txt"]);
        assert_eq!(expand(&act("*/"), &mut fs), vec!["d/", "e/"]);
        assert_eq!(expand(&act("d/*"), &mut fs), vec!["d/x.txt", "d/y.rs"]);
        assert!(expand(&act("*.none"), &mut fs).is_empty());
        assert!(expand(&act("plain"), &mut fs).is_empty());
    }
}
