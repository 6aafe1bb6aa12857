//! Word expansion in bash's order: brace expansion; tilde, parameter and
//! command substitution (left to right); word splitting of unquoted
//! results on space, tab and newline; pathname expansion; quote removal.
//!
//! Pure over the `Shell` trait: variables, `$?`, command substitution and
//! the directory listing come from the caller (the interpreter at run
//! time; nothing at check time, where only words without expansions are
//! taken as known).

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
    fn dirs(&mut self) -> &mut dyn glob::Dirs;
    /// Assigns an arithmetic result (`$(( x = 1 ))`): the name is screened
    /// as any assignment is.
    fn set_number(&mut self, name: &str, value: i64) -> Result<(), crate::check::Denial> {
        self.set_var(name, value.to_string()).map_err(|e| match e {
            ExpandError::Denied(d) => d,
            _ => crate::check::Denial::new(
                "syntax.arithmetic",
                format!("cannot assign {name}"),
                "assign another name",
            ),
        })
    }
}

/// The field separators: `$IFS`, or space, tab and newline when unset.
pub fn ifs(sh: &dyn Shell) -> String {
    sh.var("IFS").unwrap_or_else(|| " \t\n".into())
}

/// Evaluates an arithmetic expression with the shell's variables.
pub fn arith(text: &str, sh: &mut dyn Shell) -> Result<i64, super::arith::Error> {
    struct V<'a>(&'a mut dyn Shell);
    impl super::arith::Vars for V<'_> {
        fn get(&mut self, name: &str) -> Option<String> {
            self.0.var(name)
        }
        fn set(&mut self, name: &str, value: i64) -> Result<(), crate::check::Denial> {
            self.0.set_number(name, value)
        }
        fn nounset(&self) -> bool {
            self.0.nounset()
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
pub fn braces(w: &Word) -> Result<Vec<Word>, String> {
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
) -> Result<(), String> {
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
                        ));
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

fn spend(budget: &mut usize, chars: usize) -> Result<(), String> {
    *budget = budget
        .checked_sub(chars)
        .ok_or_else(|| format!("brace expansion makes more than {MAX_BRACE_CHARS} characters"))?;
    Ok(())
}

/// `{x..y}` / `{x..y..step}` over integers or single letters.
fn sequence(us: &[Unit]) -> Result<Option<Vec<String>>, String> {
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
            return Err(format!(
                "brace expansion makes more than {MAX_BRACE_WORDS} words"
            ));
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
                let v = arith(&text, sh).map_err(|e| match e {
                    super::arith::Error::Eval(m) => ExpandError::Arith(m),
                    super::arith::Error::Denied(d) => ExpandError::Denied(d),
                    super::arith::Error::Unbound(n) => {
                        ExpandError::Fatal(format!("{n}: unbound variable"))
                    }
                })?;
                segs.push(Seg {
                    text: v.to_string(),
                    quoted: a.quoted,
                    split: !a.quoted,
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
        "*" => Some(sh.positional().get(1..).unwrap_or_default().join(" ")),
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
    let params = sh.positional();
    for (i, v) in params.iter().skip(1).enumerate() {
        segs.push(Seg {
            text: String::new(),
            quoted: false,
            split: false,
            brk: i > 0,
        });
        segs.push(Seg {
            text: v.clone(),
            quoted: p.quoted,
            split: !p.quoted,
            brk: false,
        });
    }
    true
}

fn param(p: &Param, sh: &mut dyn Shell, segs: &mut Vec<Seg>) -> Result<(), ExpandError> {
    if each_param(p, sh, segs) {
        return Ok(());
    }
    let value = special(&p.name, sh).or_else(|| sh.var(&p.name));
    let unbound = || ExpandError::Fatal(format!("{}: unbound variable", p.name));
    let plain = |text: String, segs: &mut Vec<Seg>| {
        segs.push(Seg {
            text,
            quoted: p.quoted,
            split: !p.quoted,
            brk: false,
        })
    };
    // The operand's segments, in the quoting of the whole expansion.
    let operand = |sh: &mut dyn Shell, segs: &mut Vec<Seg>| -> Result<(), ExpandError> {
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
    };
    match p.op {
        ParamOp::Plain => match value {
            Some(v) => plain(v, segs),
            None if sh.nounset() => return Err(unbound()),
            None => plain(String::new(), segs),
        },
        ParamOp::Length => match value {
            Some(v) => plain(v.chars().count().to_string(), segs),
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
                    ParamOp::Default { .. } => operand(sh, segs)?,
                    ParamOp::Assign { .. } => {
                        let v = match &p.arg {
                            Some(a) => string(a, Tilde::Word, sh)?,
                            None => String::new(),
                        };
                        sh.set_var(&p.name, v.clone())?;
                        plain(v, segs);
                    }
                    _ => {
                        let msg = match &p.arg {
                            Some(a) if !a.parts.is_empty() => string(a, Tilde::Word, sh)?,
                            _ => "parameter null or not set".into(),
                        };
                        return Err(ExpandError::Fatal(format!("{}: {msg}", p.name)));
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
                operand(sh, segs)?;
            } else {
                plain(String::new(), segs);
            }
        }
        ParamOp::TrimPrefix { longest } | ParamOp::TrimSuffix { longest } => {
            let v = match value {
                Some(v) => v,
                None if sh.nounset() => return Err(unbound()),
                None => String::new(),
            };
            let pat = match &p.arg {
                Some(a) => pattern(a, sh)?,
                None => Pattern::literal(""),
            };
            let out = if matches!(p.op, ParamOp::TrimPrefix { .. }) {
                match pat.prefix_len(&v, longest) {
                    Some(n) => v[n..].to_string(),
                    None => v,
                }
            } else {
                match pat.suffix_start(&v, longest) {
                    Some(n) => v[..n].to_string(),
                    None => v,
                }
            };
            plain(out, segs);
        }
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
            m,
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
            Part::Param(_) | Part::Subst(_) | Part::Arith(_) => return None,
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
        assert!(e.contains("characters"), "{e}");
        let ok = super::super::parse("echo {a,b}{c,d}x", 100).unwrap();
        let Command::Simple(c) = &ok.body[0].first.stages[0].command else {
            panic!()
        };
        assert_eq!(braces(&c.words[1]).unwrap().len(), 4);
    }
}
