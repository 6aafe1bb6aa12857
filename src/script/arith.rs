//! Shell arithmetic as bash evaluates it (`$(( ))`, `(( ))`, `let`):
//! 64-bit signed integers that wrap, C's operators and precedence, `**`,
//! variables by name (a variable's value is itself an expression), `++`
//! and `--`, assignments, `base#digits`, `0x` and leading-zero octal.
//!
//! Pure over the `Vars` trait. Errors carry bash's wording and the error
//! token bash names (the text from where the evaluation stopped).

use crate::check::Denial;

/// Where the variables live.
pub trait Vars {
    fn get(&mut self, name: &str) -> Option<String>;
    /// A refusal when the name may not be assigned.
    fn set(&mut self, name: &str, value: i64) -> Result<(), Error>;
    /// `set -u`: an unset variable is an error.
    fn nounset(&self) -> bool {
        false
    }
    /// Whether NAME is an associative array: `NAME[key]` takes the key as
    /// text, not as an expression.
    fn is_assoc(&self, _name: &str) -> bool {
        false
    }
}

#[derive(Debug)]
pub enum Error {
    /// bash's message without the shell's prefix:
    /// `EXPR: MESSAGE (error token is "TOKEN")`.
    Eval(String),
    Denied(Denial),
    /// `set -u` and this variable is unset.
    Unbound(String),
}

/// bash's limit on nested variable evaluation.
const MAX_DEPTH: usize = 1024;
/// Parentheses and unary operators nest at most this deep in one
/// expression (it bounds the evaluator's stack).
const MAX_NEST: usize = 200;

/// Evaluates `expr`.
pub fn eval(expr: &str, vars: &mut dyn Vars) -> Result<i64, Error> {
    eval_at(expr, vars, 0, 0)
}

/// `nest`: the nesting of the expressions this one is the value of a
/// variable in, carried over so that one limit bounds the evaluator's
/// stack however the nesting is made (parentheses, unary operators, or a
/// variable whose value refers to itself).
fn eval_at(expr: &str, vars: &mut dyn Vars, depth: usize, nest: usize) -> Result<i64, Error> {
    // bash reads (and names in its messages) the text from its first
    // non-blank character.
    let expr = expr.trim_start_matches([' ', '\t', '\n']);
    if depth > MAX_DEPTH {
        return Err(Error::Eval(format!(
            "{expr}: expression recursion level exceeded (error token is \"{expr}\")"
        )));
    }
    let mut p = P {
        s: expr.as_bytes(),
        src: expr,
        vars,
        depth,
        nest,
        noeval: 0,
        tok: Tok::Eof,
        start: 0,
        end: 0,
        prev_start: 0,
    };
    p.advance()?;
    if p.tok == Tok::Eof {
        return Ok(0);
    }
    let v = p.comma()?;
    if p.tok != Tok::Eof {
        return Err(p.fail("syntax error in expression"));
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Eof,
    Num(i64),
    Ident(String),
    /// An operator, as written.
    Op(&'static str),
    /// A number that is not one in its base: the error is reported when
    /// the token is used.
    BadNum(&'static str),
}

const OPS: &[&str] = &[
    "**=", "<<=", ">>=", "**", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "+=",
    "-=", "*=", "/=", "%=", "&=", "^=", "|=", "+", "-", "*", "/", "%", "<", ">", "=", "!", "~",
    "&", "^", "|", "?", ":", ",", "(", ")",
];

const ASSIGN_OPS: &[&str] = &[
    "=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|=", "**=",
];

struct P<'a> {
    s: &'a [u8],
    src: &'a str,
    vars: &'a mut dyn Vars,
    depth: usize,
    nest: usize,
    /// Inside a branch that is not taken: no assignments, no errors from
    /// values.
    noeval: u32,
    tok: Tok,
    start: usize,
    end: usize,
    prev_start: usize,
}

impl P<'_> {
    fn fail(&self, msg: &str) -> Error {
        let at = if self.tok == Tok::Eof {
            self.prev_start
        } else {
            self.start
        };
        self.fail_at(msg, at)
    }

    fn fail_at(&self, msg: &str, at: usize) -> Error {
        let token = self.src.get(at..).unwrap_or("");
        Error::Eval(format!("{}: {msg} (error token is \"{token}\")", self.src))
    }

    fn advance(&mut self) -> Result<(), Error> {
        self.prev_start = self.start;
        let mut i = self.end;
        while i < self.s.len() && matches!(self.s[i], b' ' | b'\t' | b'\n') {
            i += 1;
        }
        self.start = i;
        let Some(&c) = self.s.get(i) else {
            self.tok = Tok::Eof;
            self.end = i;
            return Ok(());
        };
        if c.is_ascii_digit() {
            let mut j = i;
            while j < self.s.len()
                && (self.s[j].is_ascii_alphanumeric() || matches!(self.s[j], b'_' | b'@' | b'#'))
            {
                j += 1;
            }
            self.end = j;
            self.tok = match number(&self.src[i..j]) {
                Ok(n) => Tok::Num(n),
                Err(m) => Tok::BadNum(m),
            };
            return Ok(());
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i;
            while j < self.s.len() && (self.s[j].is_ascii_alphanumeric() || self.s[j] == b'_') {
                j += 1;
            }
            let name = &self.src[i..j];
            if self.s.get(j) == Some(&b'[') {
                // `NAME[SUBSCRIPT]`: an array element, named `NAME[INDEX]`
                // (the index evaluated now) for the shell's variables.
                let mut depth = 0usize;
                let mut k = j + 1;
                let close = loop {
                    match self.s.get(k) {
                        None => {
                            self.start = j;
                            self.end = self.s.len();
                            return Err(self.fail_at("bad array subscript", j));
                        }
                        Some(b'[') => depth += 1,
                        Some(b']') if depth == 0 => break k,
                        Some(b']') => depth -= 1,
                        Some(_) => {}
                    }
                    k += 1;
                };
                let inner = &self.src[j + 1..close];
                let key = if self.vars.is_assoc(name) {
                    inner.trim_matches([' ', '\t', '\n']).to_string()
                } else if self.noeval > 0 {
                    "0".to_string()
                } else {
                    eval_at(inner, self.vars, self.depth + 1, self.nest + 1)?.to_string()
                };
                self.end = close + 1;
                self.tok = Tok::Ident(format!("{name}[{key}]"));
                return Ok(());
            }
            self.end = j;
            self.tok = Tok::Ident(name.to_string());
            return Ok(());
        }
        for op in OPS {
            if self.s[i..].starts_with(op.as_bytes()) {
                self.end = i + op.len();
                self.tok = Tok::Op(op);
                return Ok(());
            }
        }
        // Right after an operand this is an operator bash does not know;
        // where an operand should be, it is a missing operand.
        let after_operand = matches!(self.tok, Tok::Num(_) | Tok::Ident(_))
            || matches!(self.tok, Tok::Op(")" | "++" | "--"));
        self.tok = Tok::Op("?bad");
        self.end = i + self.src[i..].chars().next().map_or(1, char::len_utf8);
        if after_operand {
            return Err(self.fail("syntax error: invalid arithmetic operator"));
        }
        Ok(())
    }

    fn is(&self, op: &str) -> bool {
        matches!(self.tok, Tok::Op(o) if o == op)
    }

    /// Splits a two-character operator (`++`, `--`) into its first
    /// character: the rest is read again as the next token.
    fn split_first(&mut self) {
        if let Tok::Op(o) = self.tok {
            let one: &'static str = match o {
                "++" => "+",
                "--" => "-",
                _ => return,
            };
            self.tok = Tok::Op(one);
            self.end = self.start + 1;
        }
    }

    fn comma(&mut self) -> Result<i64, Error> {
        let mut v = self.assign()?;
        while self.is(",") {
            self.advance()?;
            v = self.assign()?;
        }
        Ok(v)
    }

    fn assign(&mut self) -> Result<i64, Error> {
        if let Tok::Ident(name) = self.tok.clone() {
            // Look past the name for an assignment operator.
            let save = (self.tok.clone(), self.start, self.end, self.prev_start);
            self.advance()?;
            if let Tok::Op(op) = self.tok
                && ASSIGN_OPS.contains(&op)
            {
                let op_at = self.start;
                self.advance()?;
                // As bash: `N += M` reads N before it evaluates M (under
                // `set -u` the unset N is the one named).
                let cur = if op != "=" && self.noeval == 0 {
                    Some(self.value_of(&name)?)
                } else {
                    None
                };
                let rhs = self.assign()?;
                if self.noeval > 0 {
                    return Ok(rhs);
                }
                let v = match cur {
                    None => rhs,
                    Some(cur) => {
                        let bin = &op[..op.len() - 1];
                        self.binary(bin, cur, rhs, op_at)?
                    }
                };
                self.vars.set(&name, v)?;
                return Ok(v);
            }
            (self.tok, self.start, self.end, self.prev_start) = save;
        }
        let v = self.ternary()?;
        if let Tok::Op(op) = self.tok
            && ASSIGN_OPS.contains(&op)
        {
            return Err(self.fail("attempted assignment to non-variable"));
        }
        Ok(v)
    }

    fn ternary(&mut self) -> Result<i64, Error> {
        let c = self.lor()?;
        if !self.is("?") {
            return Ok(c);
        }
        self.advance()?;
        if c == 0 {
            self.noeval += 1;
        }
        let a = self.comma();
        if c == 0 {
            self.noeval -= 1;
        }
        let a = a?;
        if !self.is(":") {
            return Err(self.fail("`:' expected for conditional expression"));
        }
        self.advance()?;
        if c != 0 {
            self.noeval += 1;
        }
        let b = self.ternary();
        if c != 0 {
            self.noeval -= 1;
        }
        let b = b?;
        Ok(if c != 0 { a } else { b })
    }

    fn lor(&mut self) -> Result<i64, Error> {
        let mut v = self.land()?;
        while self.is("||") {
            self.advance()?;
            let skip = v != 0;
            if skip {
                self.noeval += 1;
            }
            let r = self.land();
            if skip {
                self.noeval -= 1;
            }
            let r = r?;
            v = i64::from(v != 0 || r != 0);
        }
        Ok(v)
    }

    fn land(&mut self) -> Result<i64, Error> {
        let mut v = self.level(0)?;
        while self.is("&&") {
            self.advance()?;
            let skip = v == 0;
            if skip {
                self.noeval += 1;
            }
            let r = self.level(0);
            if skip {
                self.noeval -= 1;
            }
            let r = r?;
            v = i64::from(v != 0 && r != 0);
        }
        Ok(v)
    }

    /// The left-associative binary levels, loosest first.
    fn level(&mut self, n: usize) -> Result<i64, Error> {
        const LEVELS: &[&[&str]] = &[
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", ">", "<=", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if n == LEVELS.len() {
            return self.power();
        }
        let mut v = self.level(n + 1)?;
        loop {
            if n == 6 || n == 7 {
                // `1--1` is 1 - -1; `2++x` is 2 + +x.
                self.split_first();
            }
            let Tok::Op(op) = self.tok else { break };
            if !LEVELS[n].contains(&op) {
                break;
            }
            self.advance()?;
            let at = self.start;
            let r = self.level(n + 1)?;
            v = self.binary(op, v, r, at)?;
        }
        Ok(v)
    }

    fn binary(&self, op: &str, a: i64, b: i64, rhs_at: usize) -> Result<i64, Error> {
        Ok(match op {
            "|" => a | b,
            "^" => a ^ b,
            "&" => a & b,
            "==" => i64::from(a == b),
            "!=" => i64::from(a != b),
            "<" => i64::from(a < b),
            ">" => i64::from(a > b),
            "<=" => i64::from(a <= b),
            ">=" => i64::from(a >= b),
            "<<" => a.wrapping_shl(b as u32),
            ">>" => a.wrapping_shr(b as u32),
            "+" => a.wrapping_add(b),
            "-" => a.wrapping_sub(b),
            "*" => a.wrapping_mul(b),
            "/" | "%" => {
                if b == 0 {
                    if self.noeval > 0 {
                        return Ok(0);
                    }
                    return Err(self.fail_at("division by 0", rhs_at));
                }
                if op == "/" {
                    a.wrapping_div(b)
                } else {
                    a.wrapping_rem(b)
                }
            }
            "**" => {
                if b < 0 {
                    if self.noeval > 0 {
                        return Ok(0);
                    }
                    return Err(self.fail("exponent less than 0"));
                }
                // By squaring: the same wrapped product as bash's loop.
                let (mut r, mut base, mut e) = (1i64, a, b as u64);
                while e > 0 {
                    if e & 1 == 1 {
                        r = r.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                r
            }
            _ => 0,
        })
    }

    fn power(&mut self) -> Result<i64, Error> {
        let v = self.unary()?;
        if self.is("**") {
            self.advance()?;
            let e = self.power()?;
            return self.binary("**", v, e, 0);
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<i64, Error> {
        self.nest += 1;
        let r = if self.nest > MAX_NEST {
            Err(self.fail("expression recursion level exceeded"))
        } else {
            self.unary_inner()
        };
        self.nest -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<i64, Error> {
        let Tok::Op(op) = self.tok else {
            return self.primary();
        };
        match op {
            "!" | "~" | "-" | "+" => {
                self.advance()?;
                let v = self.unary()?;
                Ok(match op {
                    "!" => i64::from(v == 0),
                    "~" => !v,
                    "-" => v.wrapping_neg(),
                    _ => v,
                })
            }
            "++" | "--" => {
                // A prefix increment needs a name; else two signs.
                let save = (self.tok.clone(), self.start, self.end, self.prev_start);
                self.advance()?;
                if let Tok::Ident(name) = self.tok.clone() {
                    self.advance()?;
                    let cur = self.value_of(&name)?;
                    let v = if op == "++" {
                        cur.wrapping_add(1)
                    } else {
                        cur.wrapping_sub(1)
                    };
                    if self.noeval == 0 {
                        self.vars.set(&name, v)?;
                    }
                    return Ok(v);
                }
                (self.tok, self.start, self.end, self.prev_start) = save;
                self.split_first();
                self.unary()
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<i64, Error> {
        match self.tok.clone() {
            Tok::Num(n) => {
                self.advance()?;
                Ok(n)
            }
            Tok::BadNum(m) => Err(self.fail(m)),
            Tok::Ident(name) => {
                self.advance()?;
                let cur = self.value_of(&name)?;
                if self.is("++") || self.is("--") {
                    let v = if self.is("++") {
                        cur.wrapping_add(1)
                    } else {
                        cur.wrapping_sub(1)
                    };
                    self.advance()?;
                    if self.noeval == 0 {
                        self.vars.set(&name, v)?;
                    }
                }
                Ok(cur)
            }
            Tok::Op("(") => {
                self.advance()?;
                let v = self.comma()?;
                if !self.is(")") {
                    return Err(self.fail("missing `)'"));
                }
                self.advance()?;
                Ok(v)
            }
            _ => Err(self.fail("syntax error: operand expected")),
        }
    }

    /// A variable's value as a number: unset or empty is 0, anything else
    /// is evaluated as an expression of its own.
    fn value_of(&mut self, name: &str) -> Result<i64, Error> {
        let Some(v) = self.vars.get(name) else {
            if self.vars.nounset() && self.noeval == 0 {
                return Err(Error::Unbound(name.to_string()));
            }
            return Ok(0);
        };
        let t = v.trim_matches([' ', '\t', '\n']);
        if t.is_empty() {
            return Ok(0);
        }
        if let Ok(n) = t.parse::<i64>()
            && !t.starts_with('0')
            && !t.starts_with('+')
        {
            return Ok(n);
        }
        eval_at(&v, self.vars, self.depth + 1, self.nest + 1)
    }
}

/// A number as bash reads it: `N`, `0N` (octal), `0xN`, `BASE#N`.
fn number(t: &str) -> Result<i64, &'static str> {
    const TOO_GREAT: &str = "value too great for base";
    let (base, digits) = if let Some((b, d)) = t.split_once('#') {
        let base: u32 = b.parse().map_err(|_| "invalid number")?;
        if !(2..=64).contains(&base) {
            return Err("invalid arithmetic base");
        }
        if d.is_empty() {
            return Err("invalid integer constant");
        }
        (base, d)
    } else if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if h.is_empty() {
            return Err("invalid integer constant");
        }
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let mut v: i64 = 0;
    for c in digits.chars() {
        let d = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 10,
            'A'..='Z' if base <= 36 => c as u32 - 'A' as u32 + 10,
            'A'..='Z' => c as u32 - 'A' as u32 + 36,
            '@' => 62,
            '_' => 63,
            _ => return Err(TOO_GREAT),
        };
        if d >= base {
            return Err(TOO_GREAT);
        }
        v = v.wrapping_mul(base as i64).wrapping_add(d as i64);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::ShellError;
    use std::collections::HashMap;

    struct M(HashMap<String, String>);
    impl Vars for M {
        fn get(&mut self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
        fn set(&mut self, name: &str, value: i64) -> Result<(), Error> {
            self.0.insert(name.into(), value.to_string());
            Ok(())
        }
    }

    fn ev(e: &str) -> Result<i64, ShellError> {
        let mut m = M(HashMap::new());
        m.0.insert("x".into(), "1+2".into());
        m.0.insert("n".into(), "5".into());
        eval(e, &mut m).map_err(|e| {
            ShellError(match e {
                Error::Eval(s) => s,
                Error::Denied(d) => d.reason,
                Error::Unbound(n) => n,
            })
        })
    }

    #[test]
    fn operators_follow_bash() {
        for (e, v) in [
            ("1+2*3", 7),
            ("-2**2", 4),
            ("2**3**2", 512),
            ("x*2", 6),
            ("y", 0),
            ("010", 8),
            ("0x1F", 31),
            ("2#101", 5),
            ("64#@", 62),
            ("36#Z", 35),
            ("7/2", 3),
            ("-7/2", -3),
            ("-7%3", -1),
            ("1<<4", 16),
            ("-16>>2", -4),
            ("5&3|8^1", 9),
            ("!0", 1),
            ("~5", -6),
            ("1 && 0 || 3", 1),
            ("0 ? 1/0 : 4", 4),
            ("1 || 1/0", 1),
            ("n++ + n", 11),
            ("++n * 2", 12),
            ("n-=2, n", 3),
            ("a = b = 3", 3),
            ("1--1", 2),
            ("3 >= 3", 1),
            ("(1+2)*(3-1)", 6),
            ("", 0),
            ("9223372036854775807 + 1", i64::MIN),
        ] {
            assert_eq!(ev(e), Ok(v), "{e}");
        }
    }

    #[test]
    fn errors_name_bash_error_token() {
        for (e, m) in [
            (
                "1/0 + 5",
                "1/0 + 5: division by 0 (error token is \"0 + 5\")",
            ),
            ("4 / 0", "4 / 0: division by 0 (error token is \"0\")"),
            ("1/(0)", "1/(0): division by 0 (error token is \"(0)\")"),
            (
                "1 +* 2",
                "1 +* 2: syntax error: operand expected (error token is \"* 2\")",
            ),
            (
                "2 + ",
                "2 + : syntax error: operand expected (error token is \"+ \")",
            ),
            (
                "a b",
                "a b: syntax error in expression (error token is \"b\")",
            ),
            (
                "2 ** -1",
                "2 ** -1: exponent less than 0 (error token is \"1\")",
            ),
            (
                "3 @ 4",
                "3 @ 4: syntax error: invalid arithmetic operator (error token is \"@ 4\")",
            ),
            ("08", "08: value too great for base (error token is \"08\")"),
            (
                "1 ? 2",
                "1 ? 2: `:' expected for conditional expression (error token is \"2\")",
            ),
            (
                "1=2",
                "1=2: attempted assignment to non-variable (error token is \"=2\")",
            ),
            (
                "x=",
                "x=: syntax error: operand expected (error token is \"=\")",
            ),
        ] {
            assert_eq!(ev(e), Err(ShellError(m.to_string())), "{e}");
        }
    }
}

#[cfg(test)]
mod self_reference {
    use super::*;

    struct Loop;
    impl Vars for Loop {
        fn get(&mut self, _: &str) -> Option<String> {
            // Every name's value refers to itself, through parentheses.
            Some("(((((((((( -(x) ))))))))))".into())
        }
        fn set(&mut self, _: &str, _: i64) -> Result<(), Error> {
            Ok(())
        }
    }

    /// A value that refers to itself ends in bash's message, within the
    /// one nesting limit, on a thread's default stack (2 MiB).
    #[test]
    fn a_self_referring_value_is_an_error_not_an_overflow() {
        let r = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| eval("x + 1", &mut Loop))
            .unwrap()
            .join()
            .unwrap();
        match r {
            Err(Error::Eval(m)) => assert!(m.contains("recursion level exceeded"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
