//! Word expansion in bash's order: brace expansion; tilde, parameter and
//! command substitution (left to right); word splitting of unquoted
//! results on space, tab and newline; pathname expansion; quote removal.
//!
//! Pure over the `Shell` trait: variables, `$?`, command substitution and
//! the directory listing come from the caller (the interpreter at run
//! time; nothing at check time, where only words without expansions are
//! taken as known).

use super::ShellError;
use super::ast::*;
use super::glob::{self, Pattern};

/// At most this many words from one brace expansion.
pub const MAX_BRACE_WORDS: usize = 100_000;
/// At most this many characters in all the words one brace expansion
/// builds, its intermediate lists included: the word count alone does not
/// bound memory, since each of the 100,000 words may be long. 2 Mi is what
/// execve takes for a whole command line (ARG_MAX); `{1..100000}` fits.
pub const MAX_BRACE_CHARS: usize = 1 << 21;

/// Why an expansion stopped the script.
#[derive(Debug, Clone)]
pub enum ExpandError {
    /// bash's fatal expansion errors (unbound variable with `set -u`,
    /// `${x:?}`): the message, then the shell exits.
    Fatal(String),
    /// An arithmetic error in `$(( ))`: the message, then bash abandons
    /// the current top-level command (the line) with status 1.
    Arith(String),
    /// A refusal (a limit): the script stops with it.
    Denied(crate::check::Denial),
    /// A refusal already recorded (in a command substitution's process):
    /// the script stops.
    Stopped,
}

/// At most this many elements in one array.
pub const MAX_ARRAY_ELEMENTS: usize = 1 << 20;

/// A negative index that counts back past an array's first element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadSubscript;

/// An array's index, or an associative array's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Index(i64),
    Name(String),
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Index(i) => write!(f, "{i}"),
            Key::Name(n) => f.write_str(n),
        }
    }
}

/// What expansion needs from the shell.
pub trait Shell {
    /// A variable's value, None when unset.
    fn var(&self, name: &str) -> Option<String>;
    fn set_var(&mut self, name: &str, value: String) -> Result<(), ExpandError>;
    fn last_status(&self) -> i32;
    fn pid(&self) -> u32;
    /// `$!`: the last background job's pid, None before any.
    fn last_background(&self) -> Option<u32> {
        None
    }
    fn nounset(&self) -> bool;
    /// `set -f`: words are not pathname-expanded.
    fn noglob(&self) -> bool {
        false
    }
    /// `$0` then the positional parameters.
    fn positional(&self) -> &[String];
    /// Runs a command substitution; its standard output.
    fn command_output(&mut self, body: &List) -> Result<String, ExpandError>;
    /// Starts a process substitution: `body` runs beside the command
    /// with its standard output (`<(...)`) or input (`>(...)`, `output`)
    /// on a pipe. The path of the shell's end of it (`/dev/fd/N`).
    fn process_subst(&mut self, body: &List, output: bool) -> Result<String, ExpandError>;
    fn dirs(&mut self) -> &mut dyn glob::Dirs;
    /// Whether NAME is an associative array (its subscripts are keys).
    fn is_assoc(&self, _name: &str) -> bool {
        false
    }
    /// Element KEY of NAME (a scalar is element 0); a negative index
    /// counts from the end. Err: a negative index before the first.
    fn element(&self, name: &str, key: &Key) -> Result<Option<String>, BadSubscript> {
        Ok(match key {
            Key::Index(0) | Key::Index(-1) => self.var(name),
            _ => None,
        })
    }
    /// Every element of NAME with its index or key, in order (a scalar
    /// is element 0); None when unset.
    fn elements(&self, name: &str) -> Option<Vec<(Key, String)>> {
        self.var(name).map(|v| vec![(Key::Index(0), v)])
    }
    /// Sets element KEY of NAME (an arithmetic assignment `a[i] = 1`).
    fn set_element(&mut self, name: &str, key: Key, value: String) -> Result<(), ExpandError> {
        match key {
            Key::Index(0) => self.set_var(name, value),
            _ => Err(ExpandError::Arith(format!("{name}: not an array"))),
        }
    }
    /// A message bash prints without stopping (`a: bad array subscript`).
    fn warn(&mut self, _msg: &str) {}
    /// Assigns an arithmetic result (`$(( x = 1 ))`): the name is screened
    /// as any assignment is.
    fn set_number(&mut self, name: &str, value: i64) -> Result<(), super::arith::Error> {
        self.set_var(name, value.to_string())
            .map_err(|e| assign_error(name, e))
    }
}

/// Why an arithmetic assignment failed: a refusal stays one; a shell's
/// message (`x: readonly variable`, a bad subscript) is an error of the
/// expression, as in bash.
fn assign_error(name: &str, e: ExpandError) -> super::arith::Error {
    use super::arith::Error;
    match e {
        ExpandError::Denied(d) => Error::Denied(d),
        ExpandError::Arith(m) | ExpandError::Fatal(m) => Error::Eval(m),
        ExpandError::Stopped => Error::Denied(crate::check::Denial::new(
            "syntax.arithmetic",
            format!("cannot assign {name}"),
            "assign another name",
        )),
    }
}

/// The field separators: `$IFS`, or space, tab and newline when unset.
pub fn ifs(sh: &dyn Shell) -> String {
    sh.var("IFS").unwrap_or_else(|| " \t\n".into())
}

/// Evaluates an arithmetic expression with the shell's variables.
pub fn arith(text: &str, sh: &mut dyn Shell) -> Result<i64, super::arith::Error> {
    struct V<'a>(&'a mut dyn Shell);
    /// `NAME[KEY]` (the arithmetic evaluator names elements so).
    fn element_name<'n>(sh: &dyn Shell, name: &'n str) -> Option<(&'n str, Key)> {
        let (n, rest) = name.split_once('[')?;
        let k = rest.strip_suffix(']')?;
        Some(if sh.is_assoc(n) {
            (n, Key::Name(k.to_string()))
        } else {
            (n, Key::Index(k.parse().ok()?))
        })
    }
    impl super::arith::Vars for V<'_> {
        fn get(&mut self, name: &str) -> Option<String> {
            match element_name(self.0, name) {
                Some((n, k)) => match self.0.element(n, &k) {
                    Ok(v) => v,
                    Err(BadSubscript) => {
                        self.0.warn(&format!("{n}: bad array subscript"));
                        None
                    }
                },
                None => self.0.var(name),
            }
        }
        fn set(&mut self, name: &str, value: i64) -> Result<(), super::arith::Error> {
            match element_name(self.0, name) {
                // Screened as an assignment of the name.
                Some((n, k)) => self
                    .0
                    .set_element(n, k, value.to_string())
                    .map_err(|e| assign_error(name, e)),
                None => self.0.set_number(name, value),
            }
        }
        fn nounset(&self) -> bool {
            self.0.nounset()
        }
        fn is_assoc(&self, name: &str) -> bool {
            self.0.is_assoc(name)
        }
    }
    super::arith::eval(text, &mut V(sh))
}

#[derive(Debug, Clone)]
struct Seg {
    text: String,
    quoted: bool,
    /// From an unquoted expansion: split on IFS and globbed.
    split: bool,
    /// Ends the field before it, even an empty one (between the
    /// positional parameters of `$@`).
    brk: bool,
}

/// One field being built: characters with whether they are active for
/// pathname expansion, and whether any part was quoted (which keeps an
/// empty field).
#[derive(Debug, Default)]
struct Field {
    chars: Vec<(char, bool)>,
    quoted: bool,
}

// ---- brace expansion ----

#[derive(Debug, Clone)]
enum Unit<'a> {
    C(char),
    Atom(&'a Part),
}

fn units(w: &Word) -> Vec<Unit<'_>> {
    let mut out = Vec::new();
    for p in &w.parts {
        match p {
            Part::Lit(t) => out.extend(t.chars().map(Unit::C)),
            other => out.push(Unit::Atom(other)),
        }
    }
    out
}

fn from_units(offset: usize, end: usize, us: &[Unit]) -> Word {
    let mut parts: Vec<Part> = Vec::new();
    for u in us {
        match u {
            Unit::C(c) => {
                if let Some(Part::Lit(t)) = parts.last_mut() {
                    t.push(*c);
                } else {
                    parts.push(Part::Lit(c.to_string()));
                }
            }
            Unit::Atom(p) => parts.push((*p).clone()),
        }
    }
    Word { offset, end, parts }
}

/// Whether brace expansion could apply (an unquoted `{`).
pub fn has_braces(w: &Word) -> bool {
    w.parts
        .iter()
        .any(|p| matches!(p, Part::Lit(t) if t.contains('{')))
}

/// Brace expansion of one word into words.
pub fn braces(w: &Word) -> Result<Vec<Word>, ShellError> {
    if !has_braces(w) {
        return Ok(vec![w.clone()]);
    }
    let us = units(w);
    let mut out = Vec::new();
    let mut budget = MAX_BRACE_CHARS;
    brace_expand(&us, &mut out, 0, &mut budget)?;
    Ok(out.iter().map(|u| from_units(w.offset, w.end, u)).collect())
}

fn is_c(u: &Unit, c: char) -> bool {
    matches!(u, Unit::C(x) if *x == c)
}

fn brace_expand<'a>(
    us: &[Unit<'a>],
    out: &mut Vec<Vec<Unit<'a>>>,
    depth: usize,
    budget: &mut usize,
) -> Result<(), ShellError> {
    if depth > 64 {
        return Err("brace expansion nested too deeply".into());
    }
    let mut i = 0;
    while i < us.len() {
        if !is_c(&us[i], '{') {
            i += 1;
            continue;
        }
        // Find the matching close brace and the top-level commas.
        let mut d = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (j, u) in us.iter().enumerate().skip(i + 1) {
            if is_c(u, '{') {
                d += 1;
            } else if is_c(u, '}') {
                if d == 0 {
                    close = Some(j);
                    break;
                }
                d -= 1;
            } else if d == 0 && is_c(u, ',') {
                commas.push(j);
            }
        }
        let Some(j) = close else {
            i += 1;
            continue;
        };
        let pre = &us[..i];
        let post = &us[j + 1..];
        let alts: Vec<Vec<Unit<'a>>> = if !commas.is_empty() {
            let mut alts = Vec::new();
            let mut s = i + 1;
            for &c in commas.iter().chain(std::iter::once(&j)) {
                alts.push(us[s..c].to_vec());
                s = c + 1;
            }
            alts
        } else if let Some(seq) = sequence(&us[i + 1..j])? {
            seq.into_iter()
                .map(|s| s.chars().map(Unit::C).collect())
                .collect()
        } else {
            i += 1;
            continue;
        };
        let mut posts = Vec::new();
        brace_expand(post, &mut posts, depth + 1, budget)?;
        for alt in alts {
            let mut expanded = Vec::new();
            brace_expand(&alt, &mut expanded, depth + 1, budget)?;
            for a in &expanded {
                for p in &posts {
                    let mut w = pre.to_vec();
                    w.extend_from_slice(a);
                    w.extend_from_slice(p);
                    spend(budget, w.len())?;
                    out.push(w);
                    if out.len() > MAX_BRACE_WORDS {
                        return Err(format!(
                            "brace expansion makes more than {MAX_BRACE_WORDS} words"
                        )
                        .into());
                    }
                }
            }
        }
        return Ok(());
    }
    spend(budget, us.len())?;
    out.push(us.to_vec());
    Ok(())
}

fn spend(budget: &mut usize, chars: usize) -> Result<(), ShellError> {
    *budget = budget
        .checked_sub(chars)
        .ok_or_else(|| format!("brace expansion makes more than {MAX_BRACE_CHARS} characters"))?;
    Ok(())
}

/// `{x..y}` / `{x..y..step}` over integers or single letters.
fn sequence(us: &[Unit]) -> Result<Option<Vec<String>>, ShellError> {
    let mut text = String::new();
    for u in us {
        match u {
            Unit::C(c) => text.push(*c),
            Unit::Atom(_) => return Ok(None),
        }
    }
    let parts: Vec<&str> = text.split("..").collect();
    if parts.len() != 2 && parts.len() != 3 {
        return Ok(None);
    }
    let step: i64 = match parts.get(2) {
        Some(s) => match s.parse::<i64>() {
            Ok(v) => v.checked_abs().unwrap_or(1).max(1),
            Err(_) => return Ok(None),
        },
        None => 1,
    };
    let (a, b) = (parts[0], parts[1]);
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let width = |s: &str| {
            let digits = s.trim_start_matches('-');
            if digits.len() > 1 && digits.starts_with('0') {
                s.len()
            } else {
                0
            }
        };
        let w = width(a).max(width(b));
        let count = x.abs_diff(y) / step as u64 + 1;
        if count > MAX_BRACE_WORDS as u64 {
            return Err(format!("brace expansion makes more than {MAX_BRACE_WORDS} words").into());
        }
        let mut out = Vec::new();
        let mut v = x;
        for _ in 0..count {
            out.push(if w > 0 {
                if v < 0 {
                    format!("-{:0>width$}", v.unsigned_abs(), width = w - 1)
                } else {
                    format!("{v:0>w$}")
                }
            } else {
                v.to_string()
            });
            if x <= y {
                v = v.saturating_add(step);
            } else {
                v = v.saturating_sub(step);
            }
        }
        return Ok(Some(out));
    }
    let single = |s: &str| {
        let mut cs = s.chars();
        match (cs.next(), cs.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c),
            _ => None,
        }
    };
    if let (Some(x), Some(y)) = (single(a), single(b)) {
        let (x, y) = (x as i64, y as i64);
        let mut out = Vec::new();
        let mut v = x;
        loop {
            out.push(char::from(v as u8).to_string());
            if x <= y {
                v += step;
                if v > y {
                    break;
                }
            } else {
                v -= step;
                if v < y {
                    break;
                }
            }
        }
        return Ok(Some(out));
    }
    Ok(None)
}

// ---- the other expansions ----

/// Where tilde expansion applies in a word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tilde {
    /// At the start only (command words, redirections).
    Word,
    /// At the start and after every `:` (assignment values).
    Assignment,
    None,
}

/// Whether a command argument looks like an assignment (`a=~/x`), where
/// bash also expands a tilde after `=` and `:`.
fn assignment_like(w: &Word) -> Option<usize> {
    let Some(Part::Lit(t)) = w.parts.first() else {
        return None;
    };
    let eq = t.find('=')?;
    crate::lex::is_identifier(&t[..eq]).then_some(eq + 1)
}

fn tilde_segs(w: &Word, mode: Tilde, sh: &mut dyn Shell) -> Vec<Option<Vec<Seg>>> {
    // For each Lit part: None (no tilde) or its replacement segs.
    let mut out: Vec<Option<Vec<Seg>>> = vec![None; w.parts.len()];
    if mode == Tilde::None {
        return out;
    }
    let home = sh.var("HOME").unwrap_or_default();
    let value_start = match mode {
        Tilde::Assignment => Some(0),
        Tilde::Word => assignment_like(w),
        Tilde::None => None,
    };
    for (i, p) in w.parts.iter().enumerate() {
        let Part::Lit(t) = p else { continue };
        let last = i + 1 == w.parts.len();
        let mut segs = Vec::new();
        let mut lit = String::new();
        let mut changed = false;
        let chars: Vec<(usize, char)> = t.char_indices().collect();
        for (k, &(at, c)) in chars.iter().enumerate() {
            let prev = (k > 0).then(|| chars[k - 1].1);
            let in_value = i == 0 && value_start.is_some_and(|v| at >= v);
            let eligible = c == '~'
                && ((i == 0 && at == 0)
                    || (mode == Tilde::Assignment && prev == Some(':'))
                    || (mode == Tilde::Word
                        && i == 0
                        && value_start.is_some_and(|v| at == v || (at > v && prev == Some(':')))));
            if eligible {
                let ends = match chars.get(k + 1).map(|x| x.1) {
                    None => last,
                    Some('/') => true,
                    Some(':') => mode == Tilde::Assignment || in_value,
                    Some(_) => false,
                };
                if ends {
                    if !lit.is_empty() {
                        segs.push(Seg {
                            text: std::mem::take(&mut lit),
                            quoted: false,
                            split: false,
                            brk: false,
                        });
                    }
                    segs.push(Seg {
                        text: home.clone(),
                        quoted: true,
                        split: false,
                        brk: false,
                    });
                    changed = true;
                    continue;
                }
            }
            lit.push(c);
        }
        if changed {
            if !lit.is_empty() {
                segs.push(Seg {
                    text: lit,
                    quoted: false,
                    split: false,
                    brk: false,
                });
            }
            out[i] = Some(segs);
        }
    }
    out
}

fn expand_segs(w: &Word, mode: Tilde, sh: &mut dyn Shell) -> Result<Vec<Seg>, ExpandError> {
    let tildes = tilde_segs(w, mode, sh);
    let mut segs = Vec::new();
    for (i, p) in w.parts.iter().enumerate() {
        match p {
            Part::Lit(t) => match &tildes[i] {
                Some(s) => segs.extend(s.iter().cloned()),
                None => segs.push(Seg {
                    text: t.clone(),
                    quoted: false,
                    split: false,
                    brk: false,
                }),
            },
            Part::Quoted(t) => segs.push(Seg {
                text: t.clone(),
                quoted: true,
                split: false,
                brk: false,
            }),
            Part::Param(p) => param(p, sh, &mut segs)?,
            Part::Arith(a) => {
                let text = string(&a.expr, Tilde::None, sh)?;
                let v = arith(&text, sh).map_err(arith_error)?;
                segs.push(Seg {
                    text: v.to_string(),
                    quoted: a.quoted,
                    split: !a.quoted,
                    brk: false,
                });
            }
            Part::Array(_) => {
                // Only an assignment or a declaration takes an array: the
                // interpreter reads its elements itself.
                return Err(ExpandError::Arith(
                    "an array (NAME=(...)) cannot be used here".into(),
                ));
            }
            Part::Proc(p) => {
                // The path is taken whole: bash neither splits nor globs it.
                let path = sh.process_subst(&p.body, p.output)?;
                segs.push(Seg {
                    text: path,
                    quoted: true,
                    split: false,
                    brk: false,
                });
            }
            Part::Subst(s) => {
                let mut out = sh.command_output(&s.body)?;
                while out.ends_with('\n') {
                    out.pop();
                }
                segs.push(Seg {
                    text: out,
                    quoted: s.quoted,
                    split: !s.quoted,
                    brk: false,
                });
            }
        }
    }
    Ok(segs)
}

fn special(name: &str, sh: &dyn Shell) -> Option<String> {
    match name {
        "?" => Some(sh.last_status().to_string()),
        "$" => Some(sh.pid().to_string()),
        "!" => sh.last_background().map(|p| p.to_string()),
        "#" => Some((sh.positional().len().saturating_sub(1)).to_string()),
        // Joined by IFS's first character (none when IFS is empty).
        "*" => {
            let sep: String = ifs(sh).chars().take(1).collect();
            Some(sh.positional().get(1..).unwrap_or_default().join(&sep))
        }
        n if n.bytes().all(|b| b.is_ascii_digit()) => {
            let i: usize = n.parse().ok()?;
            sh.positional().get(i).cloned()
        }
        _ => None,
    }
}

/// `$@`, and `$*` outside double quotes: each positional parameter is a
/// field of its own (quoted `"$@"`: whole; else split further).
fn each_param(p: &Param, sh: &dyn Shell, segs: &mut Vec<Seg>) -> bool {
    let all = p.name == "@" || (p.name == "*" && !p.quoted);
    if !all || p.op != ParamOp::Plain {
        return false;
    }
    let params = sh.positional().get(1..).unwrap_or_default().to_vec();
    emit_list(params, false, p.quoted, sh, segs);
    true
}

fn arith_error(e: super::arith::Error) -> ExpandError {
    match e {
        super::arith::Error::Eval(m) => ExpandError::Arith(m),
        super::arith::Error::Denied(d) => ExpandError::Denied(d),
        super::arith::Error::Unbound(n) => ExpandError::Fatal(format!("{n}: unbound variable")),
    }
}

/// The subscript of `NAME[...]`: a key of an associative array, else an
/// index (arithmetic).
pub fn subscript(name: &str, w: &Word, sh: &mut dyn Shell) -> Result<Key, ExpandError> {
    let text = string(w, Tilde::None, sh)?;
    if sh.is_assoc(name) {
        return Ok(Key::Name(text));
    }
    Ok(Key::Index(arith(&text, sh).map_err(arith_error)?))
}

/// Evaluates arithmetic text, with bash's errors as expansion errors.
pub fn arith_text(text: &str, sh: &mut dyn Shell) -> Result<i64, ExpandError> {
    arith(text, sh).map_err(arith_error)
}

/// An arithmetic operand (`${x:OFFSET:LENGTH}`).
fn number_of(w: &Word, sh: &mut dyn Shell) -> Result<i64, ExpandError> {
    let text = string(w, Tilde::None, sh)?;
    arith(&text, sh).map_err(arith_error)
}

/// The operand's segments, in the quoting of the whole expansion.
fn operand(p: &Param, sh: &mut dyn Shell, segs: &mut Vec<Seg>) -> Result<(), ExpandError> {
    // Inside double quotes the expansion is a field even when the
    // operand is empty (`[ -n "${X:-}" ]` has two arguments).
    if p.quoted {
        segs.push(Seg {
            text: String::new(),
            quoted: true,
            split: false,
            brk: false,
        });
    }
    let Some(arg) = &p.arg else { return Ok(()) };
    for mut s in expand_segs(arg, Tilde::Word, sh)? {
        if p.quoted {
            s.quoted = true;
            s.split = false;
        } else if !s.quoted {
            s.split = true;
        }
        segs.push(s);
    }
    Ok(())
}

fn plain_seg(p: &Param, text: String, segs: &mut Vec<Seg>) {
    segs.push(Seg {
        text,
        quoted: p.quoted,
        split: !p.quoted,
        brk: false,
    })
}

/// A list of values as `"$@"` (a field each), `"$*"` (joined by IFS's
/// first character) or unquoted (a field each, split further).
fn emit_list(values: Vec<String>, star: bool, quoted: bool, sh: &dyn Shell, segs: &mut Vec<Seg>) {
    if quoted && star {
        let sep: String = ifs(sh).chars().take(1).collect();
        segs.push(Seg {
            text: values.join(&sep),
            quoted: true,
            split: false,
            brk: false,
        });
        return;
    }
    // Unquoted, bash joins the elements with IFS's first character and
    // splits the result: with `IFS=:` the elements `a`, ``, `b` are three
    // fields, where with a blank IFS the empty one is gone.
    let sep = ifs(sh).chars().next();
    if let (false, Some(sep)) = (quoted, sep) {
        segs.push(Seg {
            text: values.join(sep.encode_utf8(&mut [0; 4])),
            quoted: false,
            split: true,
            brk: false,
        });
        return;
    }
    for (i, v) in values.into_iter().enumerate() {
        segs.push(Seg {
            text: String::new(),
            quoted: false,
            split: false,
            brk: i > 0,
        });
        segs.push(Seg {
            text: v,
            quoted,
            split: !quoted,
            brk: false,
        });
    }
}

/// `${x^}`, `${x^^}`, `${x,}`, `${x,,}`: the characters the pattern
/// matches (every one without a pattern), the first only or all.
fn change_case(v: &str, upper: bool, all: bool, pat: Option<&Pattern>) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let hit = (all || i == 0) && pat.is_none_or(|p| p.matches(c.encode_utf8(&mut [0; 4])));
        if !hit {
            out.push(c);
        } else if upper {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// The replacement's text for one match: an unquoted `&` from the text
/// itself is the matched text.
fn replacement_for(rep: &[Seg], matched: &str) -> String {
    let mut out = String::new();
    for s in rep {
        if !s.quoted && !s.split {
            out.push_str(&s.text.replace('&', matched));
        } else {
            out.push_str(&s.text);
        }
    }
    out
}

/// `${x/p/r}` and its forms.
fn replace(v: &str, pat: &Pattern, empty: bool, rep: &[Seg], mode: ReplaceMode) -> String {
    match mode {
        ReplaceMode::Prefix => match pat.prefix_len(v, true) {
            Some(n) if n > 0 || empty => format!("{}{}", replacement_for(rep, &v[..n]), &v[n..]),
            _ => v.to_string(),
        },
        ReplaceMode::Suffix => match pat.suffix_start(v, true) {
            Some(n) if n < v.len() || empty => {
                format!("{}{}", &v[..n], replacement_for(rep, &v[n..]))
            }
            _ => v.to_string(),
        },
        ReplaceMode::First | ReplaceMode::All => {
            if empty {
                return v.to_string();
            }
            let mut out = String::with_capacity(v.len());
            let mut i = 0;
            let mut replaced = false;
            while i < v.len() {
                if !(replaced && mode == ReplaceMode::First)
                    && let Some(n) = pat.prefix_len(&v[i..], true).filter(|n| *n > 0)
                {
                    out.push_str(&replacement_for(rep, &v[i..i + n]));
                    i += n;
                    replaced = true;
                    continue;
                }
                let c = v[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&v[i..i + c]);
                i += c;
            }
            out
        }
    }
}

/// What an operator that works on each value makes of one value.
struct EachOp {
    pat: Option<Pattern>,
    /// The pattern is empty.
    empty: bool,
    rep: Vec<Seg>,
}

fn each_op(p: &Param, sh: &mut dyn Shell) -> Result<EachOp, ExpandError> {
    let (pat, empty) = match &p.arg {
        Some(a) => {
            let chars = pattern_chars(a, sh)?;
            (Some(Pattern::compile(&chars)), chars.is_empty())
        }
        None => (None, true),
    };
    let rep = match &p.rep {
        Some(r) if matches!(p.op, ParamOp::Replace { .. }) => expand_segs(r, Tilde::None, sh)?,
        _ => Vec::new(),
    };
    Ok(EachOp { pat, empty, rep })
}

fn apply_each(p: &Param, e: &EachOp, v: String) -> String {
    let lit = Pattern::literal("");
    let pat = e.pat.as_ref().unwrap_or(&lit);
    match p.op {
        ParamOp::TrimPrefix { longest } => match pat.prefix_len(&v, longest) {
            Some(n) => v[n..].to_string(),
            None => v,
        },
        ParamOp::TrimSuffix { longest } => match pat.suffix_start(&v, longest) {
            Some(n) => v[..n].to_string(),
            None => v,
        },
        ParamOp::Replace { mode } => replace(&v, pat, e.empty, &e.rep, mode),
        ParamOp::Case { upper, all } => change_case(&v, upper, all, e.pat.as_ref()),
        _ => v,
    }
}

/// `${x:OFFSET:LENGTH}` of a string, by characters.
fn substring(p: &Param, v: &str, sh: &mut dyn Shell) -> Result<String, ExpandError> {
    let chars: Vec<char> = v.chars().collect();
    let n = chars.len() as i64;
    let off = match &p.arg {
        Some(w) => number_of(w, sh)?,
        None => 0,
    };
    let start = if off < 0 { n.saturating_add(off) } else { off };
    let end = match &p.rep {
        None => n,
        Some(w) => {
            let len = number_of(w, sh)?;
            if len < 0 {
                let e = n.saturating_add(len);
                if e < start.max(0) && (0..=n).contains(&start) {
                    return Err(ExpandError::Arith(format!(
                        "{len}: substring expression < 0"
                    )));
                }
                e
            } else {
                start.saturating_add(len).min(n)
            }
        }
    };
    if start < 0 || start > n {
        return Ok(String::new());
    }
    Ok(chars[start as usize..end.max(start) as usize]
        .iter()
        .collect())
}

/// `${a[@]:OFFSET:LENGTH}` (and `$@`'s): the elements from index OFFSET
/// on (a negative one counts back from past the last), LENGTH of them.
fn slice(
    p: &Param,
    elems: Vec<(Key, String)>,
    sh: &mut dyn Shell,
) -> Result<Vec<String>, ExpandError> {
    let off = match &p.arg {
        Some(w) => number_of(w, sh)?,
        None => 0,
    };
    let len = match &p.rep {
        Some(w) => {
            let l = number_of(w, sh)?;
            if l < 0 {
                return Err(ExpandError::Arith(format!("{l}: substring expression < 0")));
            }
            Some(l as usize)
        }
        None => None,
    };
    let top = elems
        .iter()
        .filter_map(|(k, _)| match k {
            Key::Index(i) => Some(*i),
            Key::Name(_) => None,
        })
        .max()
        .map_or(0, |m| m.saturating_add(1));
    let from = if off < 0 {
        top.saturating_add(off)
    } else {
        off
    };
    if from < 0 {
        return Ok(Vec::new());
    }
    let it = elems
        .into_iter()
        .enumerate()
        .filter(|(pos, (k, _))| match k {
            Key::Index(i) => *i >= from,
            Key::Name(_) => *pos as i64 >= from,
        });
    Ok(it
        .map(|(_, (_, v))| v)
        .take(len.unwrap_or(usize::MAX))
        .collect())
}

/// The positional parameters as elements: `$0` at index 0.
fn positional_elements(sh: &dyn Shell) -> Vec<(Key, String)> {
    sh.positional()
        .iter()
        .enumerate()
        .map(|(i, v)| (Key::Index(i as i64), v.clone()))
        .collect()
}

/// An expansion of every element: `${a[@]}`, `${a[*]}`, and `$@`/`$*`
/// under an operator that works on each.
fn list_param(
    p: &Param,
    elems: Option<Vec<(Key, String)>>,
    star: bool,
    sh: &mut dyn Shell,
    segs: &mut Vec<Seg>,
) -> Result<(), ExpandError> {
    // bash names the array alone for its length (`${#a[@]}`).
    let shown = if p.index.is_some() && !matches!(p.op, ParamOp::Length) {
        format!("{}[{}]", p.name, if star { '*' } else { '@' })
    } else {
        p.name.clone()
    };
    let positional = p.index.is_none();
    let tests = matches!(
        p.op,
        ParamOp::Default { .. }
            | ParamOp::Assign { .. }
            | ParamOp::Alternative { .. }
            | ParamOp::Error { .. }
    );
    let elems = match elems {
        Some(e) => e,
        // bash 5.2: `${a[@]}` and `${a[*]}` of an unset array are empty
        // under `set -u` (their length is not).
        None if p.index.is_some() && !matches!(p.op, ParamOp::Length) => Vec::new(),
        // bash abandons the line, as an arithmetic error does, for the
        // length of an unset array (`${#a[@]}`); the rest is fatal.
        None if sh.nounset() && !tests && p.index.is_some() => {
            return Err(ExpandError::Arith(format!("{shown}: unbound variable")));
        }
        None if sh.nounset() && !tests => {
            return Err(ExpandError::Fatal(format!("{shown}: unbound variable")));
        }
        None => Vec::new(),
    };
    let values = |elems: Vec<(Key, String)>| -> Vec<String> {
        elems
            .into_iter()
            .filter(|(k, _)| !positional || *k != Key::Index(0))
            .map(|(_, v)| v)
            .collect()
    };
    let out = match p.op {
        ParamOp::Plain | ParamOp::Indirect => values(elems),
        ParamOp::Length => {
            let n = values(elems).len();
            plain_seg(p, n.to_string(), segs);
            return Ok(());
        }
        ParamOp::Keys => elems.into_iter().map(|(k, _)| k.to_string()).collect(),
        ParamOp::Substring => slice(p, elems, sh)?,
        ParamOp::TrimPrefix { .. }
        | ParamOp::TrimSuffix { .. }
        | ParamOp::Replace { .. }
        | ParamOp::Case { .. } => {
            let e = each_op(p, sh)?;
            values(elems)
                .into_iter()
                .map(|v| apply_each(p, &e, v))
                .collect()
        }
        ParamOp::Default { colon }
        | ParamOp::Assign { colon }
        | ParamOp::Alternative { colon }
        | ParamOp::Error { colon } => {
            let vs = values(elems);
            let set = !(vs.is_empty() || colon && vs.len() == 1 && vs[0].is_empty());
            match p.op {
                ParamOp::Alternative { .. } if set => return operand(p, sh, segs),
                ParamOp::Alternative { .. } => {
                    plain_seg(p, String::new(), segs);
                    return Ok(());
                }
                _ if set => vs,
                ParamOp::Default { .. } => return operand(p, sh, segs),
                ParamOp::Assign { .. } => {
                    return Err(ExpandError::Arith(format!("{shown}: bad array subscript")));
                }
                _ => {
                    let msg = match &p.arg {
                        Some(a) if !a.parts.is_empty() => string(a, Tilde::Word, sh)?,
                        _ if !colon => "parameter not set".into(),
                        _ => "parameter null or not set".into(),
                    };
                    return Err(ExpandError::Fatal(format!("{shown}: {msg}")));
                }
            }
        }
    };
    emit_list(out, star, p.quoted, sh, segs);
    Ok(())
}

/// `${!NAME}`: the parameter NAME's value names (`x`, `1`, `a[2]`,
/// `a[@]`).
fn indirect(p: &Param, sh: &mut dyn Shell, segs: &mut Vec<Seg>) -> Result<(), ExpandError> {
    // Unset, under `set -u` too: bash's error that abandons the line.
    let Some(target) = special(&p.name, sh).or_else(|| sh.var(&p.name)) else {
        return Err(ExpandError::Arith(format!(
            "{}: invalid indirect expansion",
            p.name
        )));
    };
    let (name, index) = match target.split_once('[') {
        Some((n, rest)) if rest.ends_with(']') && crate::lex::is_identifier(n) => {
            let sub = &rest[..rest.len() - 1];
            let index = match sub {
                "@" => Subscript::All,
                "*" => Subscript::Star,
                _ => Subscript::Expr(Word {
                    offset: p.offset,
                    end: p.offset,
                    parts: vec![Part::Quoted(sub.to_string())],
                }),
            };
            (n.to_string(), Some(index))
        }
        _ => (target.clone(), None),
    };
    let valid = crate::lex::is_identifier(&name)
        || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        || matches!(name.as_str(), "@" | "*" | "#" | "?" | "$" | "!");
    if !valid {
        return Err(ExpandError::Arith(format!(
            "{target}: invalid variable name"
        )));
    }
    let q = Param {
        offset: p.offset,
        name,
        op: ParamOp::Plain,
        index,
        arg: None,
        rep: None,
        quoted: p.quoted,
    };
    param(&q, sh, segs)
}

fn param(p: &Param, sh: &mut dyn Shell, segs: &mut Vec<Seg>) -> Result<(), ExpandError> {
    if p.op == ParamOp::Indirect {
        return indirect(p, sh, segs);
    }
    let per_value = matches!(
        p.op,
        ParamOp::Substring
            | ParamOp::Replace { .. }
            | ParamOp::Case { .. }
            | ParamOp::TrimPrefix { .. }
            | ParamOp::TrimSuffix { .. }
    );
    let list = match (&p.index, p.name.as_str()) {
        (Some(Subscript::All), _) => Some((sh.elements(&p.name), false)),
        (Some(Subscript::Star), _) => Some((sh.elements(&p.name), true)),
        (None, "@") if per_value => Some((Some(positional_elements(sh)), false)),
        (None, "*") if per_value => Some((Some(positional_elements(sh)), true)),
        _ => None,
    };
    if let Some((elems, star)) = list {
        return list_param(p, elems, star, sh, segs);
    }
    if each_param(p, sh, segs) {
        return Ok(());
    }
    let mut shown = p.name.clone();
    let mut key = None;
    let value = match &p.index {
        Some(Subscript::Expr(w)) => {
            let k = subscript(&p.name, w, sh)?;
            shown = format!("{}[{k}]", p.name);
            let v = match sh.element(&p.name, &k) {
                Ok(v) => v,
                // bash counts the length of a bad subscript's element
                // (0) without a word.
                Err(BadSubscript) if matches!(p.op, ParamOp::Length) => None,
                Err(BadSubscript) => {
                    sh.warn(&format!("{}: bad array subscript", p.name));
                    None
                }
            };
            key = Some(k);
            v
        }
        _ => special(&p.name, sh).or_else(|| sh.var(&p.name)),
    };
    let unbound = || ExpandError::Fatal(format!("{shown}: unbound variable"));
    let plain = |text: String, segs: &mut Vec<Seg>| plain_seg(p, text, segs);
    match p.op {
        ParamOp::Plain => match value {
            Some(v) => plain(v, segs),
            None if sh.nounset() => return Err(unbound()),
            None => plain(String::new(), segs),
        },
        ParamOp::Length => match value {
            Some(v) => plain(v.chars().count().to_string(), segs),
            // `${#a[1]}`: as `${#a[@]}` above.
            None if sh.nounset() && key.is_some() => {
                return Err(ExpandError::Arith(format!("{}: unbound variable", p.name)));
            }
            None if sh.nounset() => return Err(unbound()),
            None => plain("0".into(), segs),
        },
        ParamOp::Default { colon } | ParamOp::Assign { colon } | ParamOp::Error { colon } => {
            let use_value = match &value {
                Some(v) => !(colon && v.is_empty()),
                None => false,
            };
            if use_value {
                plain(value.unwrap_or_default(), segs);
            } else {
                match p.op {
                    ParamOp::Default { .. } => operand(p, sh, segs)?,
                    ParamOp::Assign { .. } => {
                        let v = match &p.arg {
                            Some(a) => string(a, Tilde::Word, sh)?,
                            None => String::new(),
                        };
                        match key {
                            Some(k) => sh.set_element(&p.name, k, v.clone())?,
                            None => sh.set_var(&p.name, v.clone())?,
                        }
                        plain(v, segs);
                    }
                    _ => {
                        let msg = match &p.arg {
                            Some(a) if !a.parts.is_empty() => string(a, Tilde::Word, sh)?,
                            _ if !colon => "parameter not set".into(),
                            _ => "parameter null or not set".into(),
                        };
                        return Err(ExpandError::Fatal(format!("{shown}: {msg}")));
                    }
                }
            }
        }
        ParamOp::Alternative { colon } => {
            let set = match &value {
                Some(v) => !(colon && v.is_empty()),
                None => false,
            };
            if set {
                operand(p, sh, segs)?;
            } else {
                plain(String::new(), segs);
            }
        }
        ParamOp::Substring => {
            let out = match value {
                Some(v) => substring(p, &v, sh)?,
                None if sh.nounset() => return Err(unbound()),
                // Unset: empty, the operands not evaluated.
                None => String::new(),
            };
            plain(out, segs);
        }
        ParamOp::TrimPrefix { .. }
        | ParamOp::TrimSuffix { .. }
        | ParamOp::Replace { .. }
        | ParamOp::Case { .. } => {
            let out = match value {
                Some(v) => {
                    let e = each_op(p, sh)?;
                    apply_each(p, &e, v)
                }
                None if sh.nounset() => return Err(unbound()),
                // An unset parameter stays empty (`${u/#/P}` is empty).
                None => String::new(),
            };
            plain(out, segs);
        }
        // Parsed only with `[@]` or `[*]`, handled above.
        ParamOp::Keys | ParamOp::Indirect => plain(String::new(), segs),
    }
    Ok(())
}

/// Splits the segments into fields on `ifs` as bash does: runs of IFS
/// white space separate fields and are dropped at the ends; every other
/// IFS character ends a field (an empty one too), taking the white space
/// around it with it.
fn fields_of(segs: Vec<Seg>, ifs: &str) -> Vec<Field> {
    let white = |c: char| ifs.contains(c) && matches!(c, ' ' | '\t' | '\n');
    let mut fields = Vec::new();
    let mut cur: Option<Field> = None;
    // A field just ended at white space: a non-white separator right
    // after belongs to the same break.
    let mut after_white = false;
    for s in segs {
        if s.brk
            && let Some(f) = cur.take()
        {
            fields.push(f);
        }
        if s.split {
            for c in s.text.chars() {
                if white(c) {
                    if let Some(f) = cur.take() {
                        fields.push(f);
                        after_white = true;
                    }
                } else if ifs.contains(c) {
                    if after_white {
                        after_white = false;
                    } else {
                        let mut f = cur.take().unwrap_or_default();
                        f.quoted = true;
                        fields.push(f);
                    }
                } else {
                    after_white = false;
                    cur.get_or_insert_with(Field::default).chars.push((c, true));
                }
            }
        } else {
            if !s.text.is_empty() || s.quoted {
                after_white = false;
            }
            let f = cur.get_or_insert_with(Field::default);
            if s.quoted {
                f.quoted = true;
            }
            f.chars.extend(s.text.chars().map(|c| (c, !s.quoted)));
        }
    }
    if let Some(f) = cur {
        fields.push(f);
    }
    fields
        .into_iter()
        .filter(|f| f.quoted || !f.chars.is_empty())
        .collect()
}

/// Splits `text` on `ifs` into fields (the `read` builtin's splitting
/// with no limit on the count).
pub fn split_text(text: &str, ifs: &str) -> Vec<String> {
    let segs = vec![Seg {
        text: text.to_string(),
        quoted: false,
        split: true,
        brk: false,
    }];
    fields_of(segs, ifs)
        .into_iter()
        .map(|f| f.chars.into_iter().map(|t| t.0).collect())
        .collect()
}

/// A word to fields: every expansion, splitting and pathname expansion.
pub fn fields(w: &Word, sh: &mut dyn Shell) -> Result<Vec<String>, ExpandError> {
    fields_judged(w, sh).map(|(fields, _)| fields)
}

/// The directory a field names all the entries of (`*`, `./*`, `src/*`,
/// `/*`): a last component of only active `*` under a directory without
/// one. Removing what it matches is removing that directory's contents.
fn emptied_dir(chars: &[(char, bool)]) -> Option<String> {
    // `*/` matches every subdirectory: judged as the directory too.
    let end = chars.len()
        - chars
            .iter()
            .rev()
            .take_while(|&&t| t == ('/', true))
            .count();
    if end == 0 {
        return None;
    }
    let chars = &chars[..end];
    let cut = chars.iter().rposition(|&(c, _)| c == '/');
    let (dir, last) = match cut {
        Some(k) => (&chars[..k], &chars[k + 1..]),
        None => (&[][..], chars),
    };
    if last.is_empty() || !last.iter().all(|&t| t == ('*', true)) || glob::has_magic(dir) {
        return None;
    }
    Some(match (cut, dir.is_empty()) {
        (None, _) => ".".to_string(),
        (Some(_), true) => "/".to_string(),
        _ => dir.iter().map(|t| t.0).collect(),
    })
}

/// A word to fields, and the fields as the rules judge them: a field that
/// matches every entry of a directory is judged as the directory, so
/// `rm -rf ./*` is judged as `rm -rf .` (each entry alone looks harmless).
pub fn fields_judged(
    w: &Word,
    sh: &mut dyn Shell,
) -> Result<(Vec<String>, Vec<String>), ExpandError> {
    let words = braces(w).map_err(|m| {
        ExpandError::Denied(crate::check::Denial::new(
            "syntax.unsupported",
            m.0,
            "write the words out, or generate them with a program such as `seq`",
        ))
    })?;
    let (mut out, mut judged) = (Vec::new(), Vec::new());
    for w in &words {
        let segs = expand_segs(w, Tilde::Word, sh)?;
        let ifs = ifs(sh);
        for f in fields_of(segs, &ifs) {
            let text: String = f.chars.iter().map(|t| t.0).collect();
            if !sh.noglob() && glob::has_magic(&f.chars) {
                let dir = emptied_dir(&f.chars);
                let matches = glob::expand(&f.chars, sh.dirs());
                match dir {
                    Some(d) => judged.push(d),
                    None if matches.is_empty() => judged.push(text.clone()),
                    None => judged.extend(matches.iter().cloned()),
                }
                if !matches.is_empty() {
                    out.extend(matches);
                    continue;
                }
            } else {
                judged.push(text.clone());
            }
            out.push(text);
        }
    }
    Ok((out, judged))
}

/// The fields of a word as the rules judge them, known before running:
/// [`static_fields`], or the directory a glob such as `./*` empties.
pub fn static_judged_fields(w: &Word) -> Option<Vec<String>> {
    if let Some(fs) = static_fields(w) {
        return Some(fs);
    }
    let mut chars = Vec::new();
    for (i, p) in w.parts.iter().enumerate() {
        match p {
            // Brace and tilde expansion are left to the run.
            Part::Lit(t) if t.contains('{') || (i == 0 && t.starts_with('~')) => return None,
            Part::Lit(t) => chars.extend(t.chars().map(|c| (c, true))),
            Part::Quoted(t) => chars.extend(t.chars().map(|c| (c, false))),
            _ => return None,
        }
    }
    emptied_dir(&chars).map(|d| vec![d])
}

/// A word to one string: no splitting, no pathname expansion (assignment
/// values, `case` words, here-strings, here-document bodies).
pub fn string(w: &Word, tilde: Tilde, sh: &mut dyn Shell) -> Result<String, ExpandError> {
    Ok(expand_segs(w, tilde, sh)?
        .into_iter()
        .map(|s| s.text)
        .collect())
}

/// A word as a pattern: quoted characters literal, the rest active.
pub fn pattern(w: &Word, sh: &mut dyn Shell) -> Result<Pattern, ExpandError> {
    Ok(Pattern::compile(&pattern_chars(w, sh)?))
}

/// A word's characters after expansion, each with whether it is active
/// (unquoted): a pattern's or a regular expression's text.
pub fn pattern_chars(w: &Word, sh: &mut dyn Shell) -> Result<Vec<(char, bool)>, ExpandError> {
    let mut chars = Vec::new();
    for s in expand_segs(w, Tilde::Word, sh)? {
        chars.extend(s.text.chars().map(|c| (c, !s.quoted)));
    }
    Ok(chars)
}

/// The fields of a word known before running: no parameter, command
/// substitution, tilde or active glob character; brace expansion and
/// quote removal only. None when the word depends on the run.
pub fn static_fields(w: &Word) -> Option<Vec<String>> {
    for (i, p) in w.parts.iter().enumerate() {
        match p {
            Part::Lit(t) => {
                if t.contains(['*', '?', '[']) || (i == 0 && t.starts_with('~')) {
                    return None;
                }
                if assignment_like(w).is_some() && t.contains('~') {
                    return None;
                }
            }
            Part::Quoted(_) => {}
            Part::Param(_) | Part::Subst(_) | Part::Proc(_) | Part::Arith(_) | Part::Array(_) => {
                return None;
            }
        }
    }
    let words = braces(w).ok()?;
    let mut out = Vec::new();
    for w in &words {
        // bash expands a tilde after brace expansion: `{~,x}` starts with
        // the home directory, known only at run time.
        if matches!(w.parts.first(), Some(Part::Lit(t)) if t.starts_with('~')) {
            return None;
        }
        let mut text = String::new();
        let mut quoted = false;
        for p in &w.parts {
            match p {
                Part::Lit(t) => {
                    // A brace alternative may bring a glob character.
                    if t.contains(['*', '?', '[']) {
                        return None;
                    }
                    text.push_str(t);
                }
                Part::Quoted(t) => {
                    quoted = true;
                    text.push_str(t);
                }
                _ => return None,
            }
        }
        if quoted || !text.is_empty() {
            out.push(text);
        }
    }
    Some(out)
}

/// The literal text of a word known before running, without splitting
/// (assignment values, redirection targets): None when it depends on
/// the run or brace expansion would make it several words.
pub fn static_string(w: &Word) -> Option<String> {
    let mut text = String::new();
    for (i, p) in w.parts.iter().enumerate() {
        match p {
            Part::Lit(t) => {
                if i == 0 && t.starts_with('~') || t.contains(":~") {
                    return None;
                }
                text.push_str(t);
            }
            Part::Quoted(t) => text.push_str(t),
            _ => return None,
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct T {
        vars: HashMap<String, String>,
        files: Vec<&'static str>,
    }

    struct Dir(Vec<&'static str>);

    impl glob::Dirs for Dir {
        fn list(&mut self, _dir: &str) -> Vec<String> {
            self.0.iter().map(|s| s.to_string()).collect()
        }
        fn exists(&mut self, p: &str) -> bool {
            self.0.contains(&p)
        }
        fn is_dir(&mut self, _p: &str) -> bool {
            false
        }
    }

    impl Shell for (T, Dir) {
        fn var(&self, name: &str) -> Option<String> {
            self.0.vars.get(name).cloned()
        }
        fn set_var(&mut self, name: &str, value: String) -> Result<(), ExpandError> {
            self.0.vars.insert(name.into(), value);
            Ok(())
        }
        fn last_status(&self) -> i32 {
            3
        }
        fn pid(&self) -> u32 {
            42
        }
        fn nounset(&self) -> bool {
            self.0.vars.contains_key("NOUNSET")
        }
        fn positional(&self) -> &[String] {
            &[]
        }
        fn process_subst(&mut self, _body: &List, output: bool) -> Result<String, ExpandError> {
            Ok(format!("/dev/fd/{}", if output { 62 } else { 63 }))
        }
        fn command_output(&mut self, body: &List) -> Result<String, ExpandError> {
            let s = Script {
                body: body.clone(),
                heredocs: vec![],
                simple_commands: 0,
            };
            Ok(format!("out of {}\n\n", super::super::render::script(&s)))
        }
        fn dirs(&mut self) -> &mut dyn glob::Dirs {
            &mut self.1
        }
    }

    fn sh() -> (T, Dir) {
        let mut vars = HashMap::new();
        for (k, v) in [
            ("HOME", "/ws"),
            ("x", "a  b"),
            ("e", ""),
            ("lead", " a"),
            ("star", "*.rs"),
            ("path", "dir/sub/file.tar.gz"),
        ] {
            vars.insert(k.to_string(), v.to_string());
        }
        let files = vec!["b.rs", "a.rs", ".h.rs", "c.txt"];
        (
            T {
                vars,
                files: files.clone(),
            },
            Dir(files),
        )
    }

    fn words(src: &str) -> Vec<String> {
        let s = super::super::parse(&format!("echo {src}"), 10000).unwrap();
        let Command::Simple(c) = &s.body[0].first.stages[0].command else {
            panic!()
        };
        let mut shell = sh();
        let _ = &shell.0.files;
        let mut out = Vec::new();
        for w in &c.words[1..] {
            out.extend(fields(w, &mut shell).unwrap());
        }
        out
    }

    #[test]
    fn expansions_follow_bash() {
        let table: &[(&str, &[&str])] = &[
            ("$x", &["a", "b"]),
            ("\"$x\"", &["a  b"]),
            ("$e", &[]),
            ("\"$e\"", &[""]),
            ("$e\"\"", &[""]),
            ("''$x", &["a", "b"]),
            ("''$lead", &["", "a"]),
            ("p$x", &["pa", "b"]),
            ("${nope:-d e}", &["d", "e"]),
            ("\"${nope:-d e}\"", &["d e"]),
            ("${nope:-\"d  e\"}", &["d  e"]),
            ("${x:+alt}", &["alt"]),
            ("${e:+alt}", &[]),
            ("${e+alt}", &["alt"]),
            ("${#x}", &["4"]),
            ("$? $$ $#", &["3", "42", "0"]),
            ("${path#*/}", &["sub/file.tar.gz"]),
            ("${path##*/}", &["file.tar.gz"]),
            ("${path%.*}", &["dir/sub/file.tar"]),
            ("${path%%.*}", &["dir/sub/file"]),
            ("*.rs", &["a.rs", "b.rs"]),
            ("'*'.rs", &["*.rs"]),
            ("$star", &["a.rs", "b.rs"]),
            ("\"$star\"", &["*.rs"]),
            ("*.none", &["*.none"]),
            (
                "~ ~/x a=~/y:~ ~x '~'",
                &["/ws", "/ws/x", "a=/ws/y:/ws", "~x", "~"],
            ),
            ("{a,b}{1,2}", &["a1", "a2", "b1", "b2"]),
            ("x{a,{b,c}}y", &["xay", "xby", "xcy"]),
            (
                "{1..3} {03..1} {a..c} {1..7..3}",
                &[
                    "1", "2", "3", "03", "02", "01", "a", "b", "c", "1", "4", "7",
                ],
            ),
            ("{a} {} {a,b x{,}", &["{a}", "{}", "{a,b", "x", "x"]),
            ("{,}", &[]),
            ("'{a,b}' \\{a,b}", &["{a,b}", "{a,b}"]),
            ("{$x,c}", &["a", "b", "c"]),
            ("${path/sub/S}", &["dir/S/file.tar.gz"]),
            ("${path//\\//_}", &["dir_sub_file.tar.gz"]),
            (
                "${path/#dir/D} ${path/%gz/GZ}",
                &["D/sub/file.tar.gz", "dir/sub/file.tar.GZ"],
            ),
            ("${path/*./[&]}", &["[dir/sub/file.tar.]gz"]),
            (
                "${path:4:3} ${path: -2} ${path:(-6):3}",
                &["sub", "gz", "tar"],
            ),
            (
                "${path^^} \"${star^}\" ${path,,[D]}",
                &["DIR/SUB/FILE.TAR.GZ", "*.rs", "dir/sub/file.tar.gz"],
            ),
            ("${nope/a/b}x ${e/#/P}", &["x", "P"]),
            (
                "${#path[@]} ${path[0]} ${!path[@]}",
                &["1", "dir/sub/file.tar.gz", "0"],
            ),
            ("$(ls)", &["out", "of", "ls"]),
            ("\"$(ls)\"", &["out of ls"]),
        ];
        for (src, want) in table {
            assert_eq!(words(src), *want, "input {src:?}");
        }
    }

    #[test]
    fn static_words_are_known_without_running() {
        let s = super::super::parse("echo a 'b c' {d,e} $x *.rs ~", 1000).unwrap();
        let Command::Simple(c) = &s.body[0].first.stages[0].command else {
            panic!()
        };
        let got: Vec<Option<Vec<String>>> = c.words.iter().map(static_fields).collect();
        assert_eq!(got[1], Some(vec!["a".to_string()]));
        assert_eq!(got[2], Some(vec!["b c".to_string()]));
        assert_eq!(got[3], Some(vec!["d".to_string(), "e".to_string()]));
        assert_eq!(got[4], None);
        assert_eq!(got[5], None);
        assert_eq!(got[6], None);
    }

    #[test]
    fn nounset_and_error_are_fatal() {
        let s = super::super::parse("echo ${nope:?gone} $nope", 1000).unwrap();
        let Command::Simple(c) = &s.body[0].first.stages[0].command else {
            panic!()
        };
        let mut shell = sh();
        assert!(
            matches!(fields(&c.words[1], &mut shell), Err(ExpandError::Fatal(m)) if m == "nope: gone")
        );
        assert_eq!(
            fields(&c.words[2], &mut shell).unwrap(),
            Vec::<String>::new()
        );
        shell.0.vars.insert("NOUNSET".into(), String::new());
        assert!(matches!(
            fields(&c.words[2], &mut shell),
            Err(ExpandError::Fatal(_))
        ));
    }

    #[test]
    fn huge_brace_sequences_are_refused() {
        let s = super::super::parse("echo {1..1000000000}", 1000).unwrap();
        let Command::Simple(c) = &s.body[0].first.stages[0].command else {
            panic!()
        };
        assert!(fields(&c.words[1], &mut sh()).is_err());
    }

    #[test]
    fn long_brace_words_are_bounded_by_size_not_only_count() {
        // 10^4 words of over 1,000 characters each: under the word limit,
        // over the size limit.
        let long = "x".repeat(1000);
        let src = format!(
            "echo {{a,b,c,d,e,f,g,h,i,j}}{{a,b,c,d,e,f,g,h,i,j}}{{a,b,c,d,e,f,g,h,i,j}}{{a,b,c,d,e,f,g,h,i,j}}{long}"
        );
        let s = super::super::parse(&src, 1 << 20).unwrap();
        let Command::Simple(c) = &s.body[0].first.stages[0].command else {
            panic!()
        };
        let e = braces(&c.words[1]).unwrap_err();
        assert!(e.0.contains("characters"), "{e}");
        let ok = super::super::parse("echo {a,b}{c,d}x", 100).unwrap();
        let Command::Simple(c) = &ok.body[0].first.stages[0].command else {
            panic!()
        };
        assert_eq!(braces(&c.words[1]).unwrap().len(), 4);
    }
}
