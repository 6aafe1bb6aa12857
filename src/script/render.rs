//! A script back to text, in one canonical bash spelling: for `check`'s
//! human output and for tests (parsing the rendering gives the same
//! rendering).

use super::ast::*;
use std::fmt::Write;

pub fn script(s: &Script) -> String {
    let mut out = String::new();
    list(s, &s.body, &mut out);
    out
}

fn list(s: &Script, l: &List, out: &mut String) {
    for (i, ao) in l.iter().enumerate() {
        if i > 0 {
            out.push_str(separator(&l[i - 1]));
        }
        pipeline(s, &ao.first, out);
        for (c, p) in &ao.rest {
            out.push_str(match c {
                Connector::And => " && ",
                Connector::Or => " || ",
            });
            pipeline(s, p, out);
        }
        if ao.background {
            out.push_str(" &");
        }
    }
}

/// What follows a list item before the next: `&` ends it already.
fn separator(ao: &AndOr) -> &'static str {
    if ao.background { " " } else { "; " }
}

/// What ends a list that a keyword or `}` follows.
fn end_of(l: &List) -> &'static str {
    l.last().map_or("; ", separator)
}

fn pipeline(s: &Script, p: &Pipeline, out: &mut String) {
    match p.timed {
        Some(true) => out.push_str("time -p "),
        Some(false) => out.push_str("time "),
        None => {}
    }
    if p.negated {
        out.push_str("! ");
    }
    for (i, st) in p.stages.iter().enumerate() {
        if i > 0 {
            out.push_str(if p.stages[i - 1].stderr_too {
                " |& "
            } else {
                " | "
            });
        }
        command(s, &st.command, out);
    }
}

fn body(s: &Script, l: &List, out: &mut String) {
    list(s, l, out);
    out.push_str(end_of(l));
}

pub fn command(s: &Script, c: &Command, out: &mut String) {
    match c {
        Command::Simple(sc) => {
            let mut first = true;
            let mut sep = |out: &mut String| {
                if !first {
                    out.push(' ');
                }
                first = false;
            };
            for a in &sc.assignments {
                sep(out);
                out.push_str(&a.name);
                if let Some(i) = &a.index {
                    out.push('[');
                    arith_text(s, i, out);
                    out.push(']');
                }
                out.push_str(if a.append { "+=" } else { "=" });
                word(s, &a.value, out);
            }
            let arith = sc.words.first().is_some_and(|w| w.is_bare("(("));
            for (i, w) in sc.words.iter().enumerate() {
                sep(out);
                if arith && i == 1 && i + 1 < sc.words.len() {
                    arith_text(s, w, out);
                } else {
                    word(s, w, out);
                }
            }
            for r in &sc.redirects {
                sep(out);
                redirect(s, r, out);
            }
            return;
        }
        Command::Subshell { body: b, .. } => {
            out.push_str("( ");
            list(s, b, out);
            out.push_str(" )");
        }
        Command::Group { body: b, .. } => {
            out.push_str("{ ");
            body(s, b, out);
            out.push('}');
        }
        Command::If {
            branches,
            otherwise,
            ..
        } => {
            for (i, (c, b)) in branches.iter().enumerate() {
                out.push_str(if i == 0 { "if " } else { "elif " });
                body(s, c, out);
                out.push_str("then ");
                body(s, b, out);
            }
            if let Some(o) = otherwise {
                out.push_str("else ");
                body(s, o, out);
            }
            out.push_str("fi");
        }
        Command::While {
            until,
            condition,
            body: b,
            ..
        } => {
            out.push_str(if *until { "until " } else { "while " });
            body(s, condition, out);
            out.push_str("do ");
            body(s, b, out);
            out.push_str("done");
        }
        Command::For {
            name,
            words,
            body: b,
            ..
        } => {
            let _ = write!(out, "for {name}");
            if let Some(ws) = words {
                out.push_str(" in");
                for w in ws {
                    out.push(' ');
                    word(s, w, out);
                }
            }
            out.push_str("; do ");
            body(s, b, out);
            out.push_str("done");
        }
        Command::Case { word: w, arms, .. } => {
            out.push_str("case ");
            word(s, w, out);
            out.push_str(" in ");
            for a in arms {
                for (i, p) in a.patterns.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    word(s, p, out);
                }
                out.push_str(") ");
                if !a.body.is_empty() {
                    body(s, &a.body, out);
                }
                out.push_str(if a.fall_through { ";& " } else { ";; " });
            }
            out.push_str("esac");
        }
        Command::ArithFor {
            init,
            condition,
            step,
            body: b,
            ..
        } => {
            out.push_str("for ((");
            arith_text(s, init, out);
            out.push_str("; ");
            arith_text(s, condition, out);
            out.push_str("; ");
            arith_text(s, step, out);
            out.push_str(")); do ");
            body(s, b, out);
            out.push_str("done");
        }
        Command::Function { name, body: b, .. } => {
            let _ = write!(out, "{name} () ");
            command(s, b, out);
        }
    }
    for r in c.redirects() {
        out.push(' ');
        redirect(s, r, out);
    }
}

fn redirect(s: &Script, r: &Redirect, out: &mut String) {
    if let Some(fd) = r.fd {
        let _ = write!(out, "{fd}");
    }
    out.push_str(match r.op {
        RedirOp::In => "<",
        RedirOp::Out => ">",
        RedirOp::Append => ">>",
        RedirOp::Clobber => ">|",
        RedirOp::ReadWrite => "<>",
        RedirOp::DupOut => ">&",
        RedirOp::DupIn => "<&",
        RedirOp::OutErr => "&>",
        RedirOp::AppendErr => "&>>",
        RedirOp::Heredoc => "<<<",
        RedirOp::HereString => "<<<",
    });
    match &r.target {
        RedirTarget::Word(w) => {
            // `< <(ls)`: written together, `<<(` would be another operator.
            if matches!(w.parts.first(), Some(Part::Proc(_))) {
                out.push(' ');
            }
            word(s, w, out)
        }
        RedirTarget::Heredoc(i) => {
            // Rendered as the here-string of the same text (minus the
            // final newline a here-string adds back).
            if let Some(h) = s.heredocs.get(*i) {
                let mut b = h.body.clone();
                if let Some(Part::Quoted(t)) = b.parts.last_mut()
                    && t.ends_with('\n')
                {
                    t.pop();
                }
                quoted_word(s, &b, out);
            }
        }
    }
}

/// Single-quotes text for bash.
fn sq(t: &str, out: &mut String) {
    out.push('\'');
    out.push_str(&t.replace('\'', r"'\''"));
    out.push('\'');
}

pub fn word(s: &Script, w: &Word, out: &mut String) {
    for p in &w.parts {
        match p {
            Part::Lit(t) => out.push_str(t),
            Part::Quoted(t) => sq(t, out),
            Part::Param(p) => param(s, p, out),
            Part::Subst(sub) => subst(s, sub, out),
            Part::Proc(p) => proc_subst(s, p, out),
            Part::Arith(a) => arith_in(s, a, out, a.quoted),
            Part::Array(a) => array(s, a, out),
        }
    }
}

fn array(s: &Script, a: &ArrayLit, out: &mut String) {
    out.push('(');
    for (i, e) in a.elems.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if let Some(k) = &e.index {
            out.push('[');
            arith_text(s, k, out);
            out.push_str("]=");
        }
        word(s, &e.value, out);
    }
    out.push(')');
}

/// An arithmetic expression's text: its parts as written.
fn arith_text(s: &Script, w: &Word, out: &mut String) {
    for p in &w.parts {
        match p {
            Part::Lit(t) | Part::Quoted(t) => out.push_str(t),
            Part::Param(p) => param_in(s, p, out, false),
            Part::Subst(sub) => subst_in(s, sub, out, false),
            Part::Proc(p) => proc_subst(s, p, out),
            Part::Arith(a) => arith_in(s, a, out, false),
            Part::Array(a) => array(s, a, out),
        }
    }
}

fn arith_in(s: &Script, a: &Arith, out: &mut String, wrap: bool) {
    if wrap {
        out.push('"');
    }
    out.push_str("$((");
    arith_text(s, &a.expr, out);
    out.push_str("))");
    if wrap {
        out.push('"');
    }
}

/// A word whose parts are all quoted (a here-document body).
fn quoted_word(s: &Script, w: &Word, out: &mut String) {
    out.push('"');
    for p in &w.parts {
        match p {
            Part::Lit(t) | Part::Quoted(t) => {
                for c in t.chars() {
                    if matches!(c, '"' | '\\' | '$' | '`') {
                        out.push('\\');
                    }
                    out.push(c);
                }
            }
            Part::Param(p) => param_in(s, p, out, false),
            Part::Subst(sub) => subst_in(s, sub, out, false),
            Part::Proc(p) => proc_subst(s, p, out),
            Part::Arith(a) => arith_in(s, a, out, false),
            Part::Array(a) => array(s, a, out),
        }
    }
    out.push('"');
}

fn param(s: &Script, p: &Param, out: &mut String) {
    param_in(s, p, out, p.quoted)
}

fn param_in(s: &Script, p: &Param, out: &mut String, wrap: bool) {
    if wrap {
        out.push('"');
    }
    out.push_str("${");
    if p.op == ParamOp::Length {
        out.push('#');
    }
    if matches!(p.op, ParamOp::Keys | ParamOp::Indirect) {
        out.push('!');
    }
    out.push_str(&p.name);
    match &p.index {
        Some(Subscript::All) => out.push_str("[@]"),
        Some(Subscript::Star) => out.push_str("[*]"),
        Some(Subscript::Expr(w)) => {
            out.push('[');
            arith_text(s, w, out);
            out.push(']');
        }
        None => {}
    }
    let op = match p.op {
        ParamOp::Plain | ParamOp::Length | ParamOp::Keys | ParamOp::Indirect => "",
        ParamOp::Substring => ":",
        ParamOp::Replace { mode } => match mode {
            ReplaceMode::First => "/",
            ReplaceMode::All => "//",
            ReplaceMode::Prefix => "/#",
            ReplaceMode::Suffix => "/%",
        },
        ParamOp::Case { upper, all } => match (upper, all) {
            (true, false) => "^",
            (true, true) => "^^",
            (false, false) => ",",
            (false, true) => ",,",
        },
        ParamOp::Default { colon } => {
            if colon {
                ":-"
            } else {
                "-"
            }
        }
        ParamOp::Assign { colon } => {
            if colon {
                ":="
            } else {
                "="
            }
        }
        ParamOp::Alternative { colon } => {
            if colon {
                ":+"
            } else {
                "+"
            }
        }
        ParamOp::Error { colon } => {
            if colon {
                ":?"
            } else {
                "?"
            }
        }
        ParamOp::TrimPrefix { longest } => {
            if longest {
                "##"
            } else {
                "#"
            }
        }
        ParamOp::TrimSuffix { longest } => {
            if longest {
                "%%"
            } else {
                "%"
            }
        }
    };
    out.push_str(op);
    let second = match p.op {
        ParamOp::Substring => ":",
        _ => "/",
    };
    operand_text(s, p, p.arg.as_ref(), "/", out);
    if let Some(r) = &p.rep {
        out.push_str(second);
        operand_text(s, p, Some(r), "&", out);
    }
    out.push('}');
    if wrap {
        out.push('"');
    }
}

/// An operand of `${...}`; `special` is escaped where it would end the
/// operand or change its meaning.
fn operand_text(s: &Script, p: &Param, arg: Option<&Word>, special: &str, out: &mut String) {
    let replace = matches!(p.op, ParamOp::Replace { .. });
    if let Some(a) = arg {
        if p.quoted {
            // Inside double quotes: keep the operand's text double-quoted.
            for part in &a.parts {
                match part {
                    // A paired single-quoted run stays as it is (bash pairs
                    // the quotes there and keeps them).
                    Part::Quoted(t) if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') => {
                        out.push_str(t);
                    }
                    Part::Lit(t) => {
                        for c in t.chars() {
                            if matches!(c, '"' | '\\' | '$' | '`' | '}')
                                || (replace && c == '/' && special == "/")
                            {
                                out.push('\\');
                            }
                            out.push(c);
                        }
                    }
                    Part::Quoted(t) => {
                        for c in t.chars() {
                            if matches!(c, '"' | '\\' | '$' | '`' | '}')
                                || (replace && special.contains(c))
                            {
                                out.push('\\');
                            }
                            out.push(c);
                        }
                    }
                    Part::Param(p) => param_in(s, p, out, false),
                    Part::Subst(sub) => subst_in(s, sub, out, false),
                    Part::Proc(p) => proc_subst(s, p, out),
                    Part::Arith(a) => arith_in(s, a, out, false),
                    Part::Array(a) => array(s, a, out),
                }
            }
        } else {
            word(s, a, out);
        }
    }
}

fn subst(s: &Script, sub: &Subst, out: &mut String) {
    subst_in(s, sub, out, sub.quoted)
}

fn subst_in(s: &Script, sub: &Subst, out: &mut String, wrap: bool) {
    if wrap {
        out.push('"');
    }
    out.push_str("$(");
    list(s, &sub.body, out);
    out.push(')');
    if wrap {
        out.push('"');
    }
}

fn proc_subst(s: &Script, p: &ProcSubst, out: &mut String) {
    out.push_str(if p.output { ">(" } else { "<(" });
    list(s, &p.body, out);
    out.push(')');
}

/// The structure as parsed, with every word and redirection in its
/// original spelling: what bash's `declare -f` prints for this rendering
/// and for the original must be the same when agent-rsh parsed it as bash
/// does (the parser's oracle in the tests and the fuzz target). None for
/// scripts whose spans are not exact (here-documents, backquotes).
pub fn verbatim(s: &Script, src: &str) -> Option<String> {
    if !s.heredocs.is_empty() || src.contains('`') {
        return None;
    }
    let mut out = String::new();
    v_list(&s.body, src, &mut out)?;
    Some(out)
}

fn span(src: &str, from: usize, to: usize) -> Option<&str> {
    src.get(from..to)
}

fn v_list(l: &List, src: &str, out: &mut String) -> Option<()> {
    for (i, ao) in l.iter().enumerate() {
        if i > 0 {
            out.push_str(separator(&l[i - 1]));
        }
        v_pipeline(&ao.first, src, out)?;
        for (c, p) in &ao.rest {
            out.push_str(match c {
                Connector::And => " && ",
                Connector::Or => " || ",
            });
            v_pipeline(p, src, out)?;
        }
        if ao.background {
            out.push_str(" &");
        }
    }
    Some(())
}

fn v_pipeline(p: &Pipeline, src: &str, out: &mut String) -> Option<()> {
    match p.timed {
        Some(true) => out.push_str("time -p "),
        Some(false) => out.push_str("time "),
        None => {}
    }
    if p.negated {
        out.push_str("! ");
    }
    for (i, st) in p.stages.iter().enumerate() {
        if i > 0 {
            out.push_str(if p.stages[i - 1].stderr_too {
                " |& "
            } else {
                " | "
            });
        }
        v_command(&st.command, src, out)?;
    }
    Some(())
}

fn v_body(l: &List, src: &str, out: &mut String) -> Option<()> {
    v_list(l, src, out)?;
    out.push_str(end_of(l));
    Some(())
}

fn v_word(w: &Word, src: &str, out: &mut String) -> Option<()> {
    out.push_str(span(src, w.offset, w.end)?);
    Some(())
}

fn v_redirects(rs: &[Redirect], src: &str, out: &mut String) -> Option<()> {
    for r in rs {
        let RedirTarget::Word(w) = &r.target else {
            return None;
        };
        out.push(' ');
        out.push_str(span(src, r.offset, w.end)?);
    }
    Some(())
}

fn v_command(c: &Command, src: &str, out: &mut String) -> Option<()> {
    match c {
        // bash prints arrays and arithmetic loops in its own spacing.
        Command::ArithFor { .. } => return None,
        Command::Simple(sc)
            if sc
                .assignments
                .iter()
                .map(|a| &a.value)
                .chain(&sc.words)
                .any(|w| w.parts.iter().any(|p| matches!(p, Part::Array(_)))) =>
        {
            return None;
        }
        Command::Simple(sc) => {
            let mut items: Vec<(usize, usize)> = Vec::new();
            for a in &sc.assignments {
                items.push((a.offset, a.value.end));
            }
            // `(( text ))`: bash prints the text between the parentheses
            // as written, spaces included.
            match sc.words.as_slice() {
                [open, .., close] if open.is_bare("((") && close.is_bare("))") => {
                    items.push((open.offset, close.end));
                }
                words => items.extend(words.iter().map(|w| (w.offset, w.end))),
            }
            for r in &sc.redirects {
                let RedirTarget::Word(w) = &r.target else {
                    return None;
                };
                items.push((r.offset, w.end));
            }
            // In source order, as bash prints them.
            items.sort();
            for (i, (a, b)) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(span(src, a, b)?);
            }
            return Some(());
        }
        Command::Subshell { body, .. } => {
            out.push_str("( ");
            v_list(body, src, out)?;
            out.push_str(" )");
        }
        Command::Group { body, .. } => {
            out.push_str("{ ");
            v_body(body, src, out)?;
            out.push('}');
        }
        Command::If {
            branches,
            otherwise,
            ..
        } => {
            for (i, (c, b)) in branches.iter().enumerate() {
                out.push_str(if i == 0 { "if " } else { "elif " });
                v_body(c, src, out)?;
                out.push_str("then ");
                v_body(b, src, out)?;
            }
            if let Some(o) = otherwise {
                out.push_str("else ");
                v_body(o, src, out)?;
            }
            out.push_str("fi");
        }
        Command::While {
            until,
            condition,
            body,
            ..
        } => {
            out.push_str(if *until { "until " } else { "while " });
            v_body(condition, src, out)?;
            out.push_str("do ");
            v_body(body, src, out)?;
            out.push_str("done");
        }
        Command::For {
            name, words, body, ..
        } => {
            let _ = write!(out, "for {name}");
            if let Some(ws) = words {
                out.push_str(" in");
                for w in ws {
                    out.push(' ');
                    v_word(w, src, out)?;
                }
            }
            out.push_str("; do ");
            v_body(body, src, out)?;
            out.push_str("done");
        }
        Command::Case { word, arms, .. } => {
            out.push_str("case ");
            v_word(word, src, out)?;
            out.push_str(" in ");
            for a in arms {
                for (i, p) in a.patterns.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    v_word(p, src, out)?;
                }
                out.push_str(") ");
                if !a.body.is_empty() {
                    v_body(&a.body, src, out)?;
                }
                out.push_str(if a.fall_through { ";& " } else { ";; " });
            }
            out.push_str("esac");
        }
        Command::Function { name, body, .. } => {
            let _ = write!(out, "{name} () ");
            v_command(body, src, out)?;
        }
    }
    v_redirects(c.redirects(), src, out)
}
