//! The builtins bash runs itself and agent-rsh runs the same way, in the
//! interpreter's own (confined) process: `echo`, `printf`, `test`/`[`,
//! `[[ ]]`, `(( ))` and `let`, `read`, `command -v`/`-V`, `type`, `hash`,
//! `jobs`, `shift`, `local`, `declare`/`typeset`. File tests (`-f`, `-r`,
//! `-nt`, ...) are system calls of the confined process, so the kernel
//! bounds what they can learn. Every name a builtin assigns is screened as
//! an assignment is.

use super::ShellError;
use super::*;
use crate::script::arith;
use crate::script::parse::{is_binary, is_unary};

/// Reserved words, for `type` and `command -v`.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "{", "}", "!", "[[", "]]", "coproc",
];

/// An arithmetic error of `((` or `let` as bash prints it: after the
/// builtin's name, except an assignment to a read-only name, which bash
/// reports as any assignment.
fn arith_message(builtin: &str, m: &str) -> String {
    if m.ends_with(": readonly variable") {
        m.to_string()
    } else {
        format!("{builtin}: {m}")
    }
}

impl Interp<'_> {
    /// The builtins of this file; `argv[0]` names one of them.
    pub(super) fn more_builtin(
        &mut self,
        c: &SimpleCommand,
        argv: &[String],
        offsets: &[usize],
    ) -> R<i32> {
        let args = &argv[1..];
        match argv[0].as_str() {
            "echo" => Ok(echo(args)),
            "printf" => self.printf(args, offsets),
            "test" => Ok(self.test_builtin("test", args)),
            "[" => {
                if args.last().map(String::as_str) != Some("]") {
                    say("[: missing `]'");
                    return Ok(2);
                }
                Ok(self.test_builtin("[", &args[..args.len() - 1]))
            }
            "[[" => self.cond(c),
            "((" => {
                let inner = &args[..args.len().saturating_sub(1)];
                let expr = inner.join(" ");
                match self.arith_eval(&expr)? {
                    Ok(v) => Ok(i32::from(v == 0)),
                    Err(m) => {
                        say(&arith_message("((", &m.0));
                        Ok(1)
                    }
                }
            }
            "let" => {
                if args.is_empty() {
                    say("let: expression expected");
                    return Ok(1);
                }
                let mut last = 0;
                for a in args {
                    match self.arith_eval(a)? {
                        Ok(v) => last = v,
                        Err(m) => {
                            say(&arith_message("let", &m.0));
                            return Ok(1);
                        }
                    }
                }
                Ok(i32::from(last == 0))
            }
            "read" => self.read(c, args, offsets),
            "getopts" => self.getopts(c, args, offsets),
            "command" => self.command_builtin(c, args, offsets),
            "type" => self.type_builtin(args),
            "hash" => self.hash_builtin(args),
            "jobs" => Ok(self.jobs_builtin(args)),
            // No positional parameters here: `shift` has nothing to shift.
            "shift" => Ok(match args.first().map(|a| a.trim().parse::<i64>()) {
                None => 1,
                Some(Ok(0)) => 0,
                Some(Ok(n)) if n > 0 => 1,
                Some(_) => {
                    say(&format!("shift: {}: shift count out of range", args[0]));
                    1
                }
            }),
            "local" => self.local(c, args, offsets),
            "declare" | "typeset" | "readonly" => self.declare(c, argv, offsets),
            "mapfile" | "readarray" => self.mapfile(argv, offsets),
            "pushd" | "popd" | "dirs" => self.dirs_builtin(c, argv, offsets),
            "umask" => Ok(umask(args)),
            "ulimit" => Ok(ulimit(args)),
            // A shell that is not interactive keeps no history: bash -c
            // 'history' prints nothing.
            "history" => Ok(0),
            "help" => Ok(help(args)),
            "shopt" => Ok(self.shopt(args)),
            "alias" => Ok(self.alias(args)),
            "unalias" => Ok(self.unalias(args)),
            _ => Ok(0),
        }
    }

    /// `alias [-p] [NAME[=TEXT]...]`: defines and prints aliases as bash
    /// does when it is not interactive, where they are never expanded.
    fn alias(&mut self, args: &[String]) -> i32 {
        let shown =
            |name: &str, text: &str| format!("alias {name}='{}'\n", text.replace('\'', "'\\''"));
        let args: Vec<&String> = args.iter().skip_while(|a| *a == "-p").collect();
        if args.is_empty() {
            let all: String = self.aliases.iter().map(|(n, t)| shown(n, t)).collect();
            return print_out(&all);
        }
        let (mut st, mut out) = (0, String::new());
        for a in args {
            match a.split_once('=') {
                Some((name, text)) if !name.is_empty() => {
                    self.aliases.insert(name.to_string(), text.to_string());
                }
                _ => match self.aliases.get(a.as_str()) {
                    Some(text) => out.push_str(&shown(a, text)),
                    None => {
                        say(&format!("alias: {a}: not found"));
                        st = 1;
                    }
                },
            }
        }
        if print_out(&out) != 0 {
            return 1;
        }
        st
    }

    /// `unalias [-a] NAME...`.
    fn unalias(&mut self, args: &[String]) -> i32 {
        if args.is_empty() {
            say("unalias: usage: unalias [-a] name [name ...]");
            return 2;
        }
        if args.iter().any(|a| a == "-a") {
            self.aliases.clear();
            return 0;
        }
        let mut st = 0;
        for a in args {
            if self.aliases.remove(a.as_str()).is_none() {
                say(&format!("unalias: {a}: not found"));
                st = 1;
            }
        }
        st
    }

    /// `shopt [-s|-u] [-p] [-q] [NAME...]`: of bash's options, `globstar`
    /// (`**` matches any depth) is the one this interpreter has; setting
    /// another fails and says so, so a script never runs believing it on.
    fn shopt(&mut self, args: &[String]) -> i32 {
        let (mut set, mut quiet, mut print) = (None, false, false);
        let mut names = Vec::new();
        for a in args {
            match a.as_str() {
                "-s" => set = Some(true),
                "-u" => set = Some(false),
                "-q" => quiet = true,
                "-p" => print = true,
                o if o.starts_with('-') => {
                    say(&format!("shopt: {o}: invalid option"));
                    return 2;
                }
                n => names.push(n),
            }
        }
        if names.is_empty() {
            names.push("globstar");
        }
        let mut st = 0;
        let mut out = String::new();
        for n in names {
            if n != "globstar" {
                say(&format!(
                    "shopt: {n}: agent-rsh's interpreter has only the globstar option; write the script without it"
                ));
                st = 1;
                continue;
            }
            match set {
                Some(on) => self.fs.globstar = on,
                None if quiet => st = if self.fs.globstar { st } else { 1 },
                None if print => out.push_str(&format!(
                    "shopt {} globstar\n",
                    if self.fs.globstar { "-s" } else { "-u" }
                )),
                None => out.push_str(&format!(
                    "globstar       \t{}\n",
                    if self.fs.globstar { "on" } else { "off" }
                )),
            }
        }
        write_fd(1, out.as_bytes());
        st
    }

    /// The top-level list, line by line as bash reads `bash -c`: an
    /// arithmetic error in `$(( ))` abandons the rest of its line, and the
    /// next line runs with status 1.
    pub(super) fn exec_lines(&mut self, l: &List, src: &str) -> R<i32> {
        let mut skip_line = false;
        for ao in l {
            if skip_line {
                if !starts_line(src, ao.first.offset) {
                    continue;
                }
                skip_line = false;
            }
            match self.exec_and_or(ao).and_then(|s| {
                self.status = s;
                self.run_pending_traps()
            }) {
                Ok(()) => {}
                Err(Unwind::Abort) if !self.subshell => {
                    self.status = 1;
                    skip_line = true;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(self.status)
    }

    fn assign_screened(&mut self, name: &str, value: String, offset: usize) -> R<()> {
        if let Err(d) = verify::screen_name(&self.policy, name, offset) {
            return Err(self.deny(d));
        }
        if self.readonly.contains(name) {
            return Err(self.readonly_failed(name, Unwind::Failed(1)));
        }
        self.set_var(name, value);
        Ok(())
    }

    /// An arithmetic expression: its value, or bash's message.
    fn arith_eval(&mut self, expr: &str) -> R<Result<i64, ShellError>> {
        match expand::arith(expr, self) {
            Ok(v) => Ok(Ok(v)),
            // An assignment to a read-only name under `set -e`.
            Err(arith::Error::Eval(m)) if std::mem::take(&mut self.exit_now) => {
                say(&m);
                Err(Unwind::Exit(1))
            }
            Err(arith::Error::Eval(m)) => Ok(Err(m.into())),
            Err(arith::Error::Denied(d)) => Err(self.deny(d)),
            Err(arith::Error::Unbound(n)) => {
                say(&format!("{n}: unbound variable"));
                Err(Unwind::Fatal)
            }
        }
    }

    // ---- printf ----

    fn printf(&mut self, args: &[String], offsets: &[usize]) -> R<i32> {
        const USAGE: &str = "printf: usage: printf [-v var] format [arguments]";
        let mut i = 0;
        let mut var = None;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if a == "-v" {
                let Some(n) = args.get(i + 1) else {
                    say("printf: -v: option requires an argument");
                    say(USAGE);
                    return Ok(2);
                };
                var = Some((n.clone(), offsets.get(i + 2).copied().unwrap_or(0)));
                i += 2;
                continue;
            }
            if let Some(rest) = a.strip_prefix("-v") {
                var = Some((rest.to_string(), offsets.get(i + 1).copied().unwrap_or(0)));
                i += 1;
                continue;
            }
            if a.len() > 1 && a.starts_with('-') {
                let opt: String = a.chars().take(2).collect();
                say(&format!("printf: {opt}: invalid option"));
                say(USAGE);
                return Ok(2);
            }
            break;
        }
        let Some(format) = args.get(i) else {
            say(USAGE);
            return Ok(2);
        };
        if let Some((n, _)) = &var
            && !crate::lex::is_identifier(n)
        {
            say(&format!("printf: `{n}': not a valid identifier"));
            return Ok(2);
        }
        let (out, st) = printf_format(format, &args[i + 1..], var.is_none());
        match var {
            Some((n, off)) => {
                // A variable ends at a NUL byte, as in bash.
                let end = out.iter().position(|b| *b == 0).unwrap_or(out.len());
                let v = String::from_utf8_lossy(&out[..end]).into_owned();
                self.assign_screened(&n, v, off)?;
            }
            None => write_fd(1, &out),
        }
        Ok(st)
    }

    // ---- test and [ ----

    fn test_builtin(&mut self, name: &str, args: &[String]) -> i32 {
        let mut t = Test {
            me: self,
            args,
            pos: 0,
        };
        let r = match args.len() {
            0 => Ok(false),
            1 => Ok(!args[0].is_empty()),
            2 => t.two(0),
            3 => t.three(0),
            4 => {
                if args[0] == "!" {
                    t.three(1).map(|v| !v)
                } else if args[0] == "(" && args[3] == ")" {
                    t.two(1)
                } else {
                    t.full()
                }
            }
            _ => t.full(),
        };
        match r {
            Ok(v) => i32::from(!v),
            Err(m) => {
                say(&format!("{name}: {m}"));
                2
            }
        }
    }

    fn unary_test(&mut self, op: &str, arg: &str) -> bool {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = || std::fs::metadata(arg);
        let access = |mode: i32| {
            let p = cstr(arg);
            // SAFETY: access with a NUL-terminated path.
            !arg.is_empty() && unsafe { libc::access(p.as_ptr(), mode) } == 0
        };
        match op {
            "-z" => arg.is_empty(),
            "-n" => !arg.is_empty(),
            "-e" | "-a" => meta().is_ok(),
            "-f" => meta().is_ok_and(|m| m.is_file()),
            "-d" => meta().is_ok_and(|m| m.is_dir()),
            "-b" => meta().is_ok_and(|m| m.file_type().is_block_device()),
            "-c" => meta().is_ok_and(|m| m.file_type().is_char_device()),
            "-p" => meta().is_ok_and(|m| m.file_type().is_fifo()),
            "-S" => meta().is_ok_and(|m| m.file_type().is_socket()),
            "-h" | "-L" => std::fs::symlink_metadata(arg).is_ok_and(|m| m.file_type().is_symlink()),
            "-s" => meta().is_ok_and(|m| m.len() > 0),
            "-g" => meta().is_ok_and(|m| m.mode() & 0o2000 != 0),
            "-u" => meta().is_ok_and(|m| m.mode() & 0o4000 != 0),
            "-k" => meta().is_ok_and(|m| m.mode() & 0o1000 != 0),
            // SAFETY: geteuid/getegid have no memory effects.
            "-O" => meta().is_ok_and(|m| m.uid() == unsafe { libc::geteuid() }),
            "-G" => meta().is_ok_and(|m| m.gid() == unsafe { libc::getegid() }),
            "-N" => meta().is_ok_and(|m| (m.mtime(), m.mtime_nsec()) > (m.atime(), m.atime_nsec())),
            "-r" => access(libc::R_OK),
            "-w" => access(libc::W_OK),
            "-x" => access(libc::X_OK),
            "-t" => arg
                .trim()
                .parse::<i32>()
                // SAFETY: isatty has no memory effects.
                .is_ok_and(|fd| unsafe { libc::isatty(fd) } == 1),
            "-v" => self.var(arg).is_some(),
            "-o" => match arg {
                "errexit" => self.opts.errexit,
                "nounset" => self.opts.nounset,
                "pipefail" => self.opts.pipefail,
                "noglob" => self.opts.noglob,
                "braceexpand" | "hashall" | "interactive-comments" => true,
                _ => false,
            },
            _ => false,
        }
    }

    // ---- [[ ]] ----

    fn cond(&mut self, c: &SimpleCommand) -> R<i32> {
        let words = &c.words[1..c.words.len().saturating_sub(1)];
        let mut p = Cond {
            words,
            pos: 0,
            failed: None,
        };
        let v = p.or(self, true)?;
        if let Some(st) = p.failed {
            return Ok(st);
        }
        if p.pos < words.len() {
            say(&format!(
                "syntax error in conditional expression near `{}'",
                words[p.pos].literal().unwrap_or_default()
            ));
            return Ok(2);
        }
        Ok(i32::from(!v))
    }

    // ---- getopts ----

    /// `getopts OPTSTRING NAME [ARG...]` as bash runs it: one option per
    /// call from ARG (or the positional parameters), OPTIND and OPTARG
    /// set, a letter inside a group (`-ab`) remembered between calls.
    fn getopts(&mut self, c: &SimpleCommand, args: &[String], offsets: &[usize]) -> R<i32> {
        let [spec, name, rest @ ..] = args else {
            say("getopts: usage: getopts optstring name [arg ...]");
            return Ok(2);
        };
        let at = offsets.get(2).copied().unwrap_or(c.offset);
        if !crate::lex::is_identifier(name) {
            say(&format!("getopts: `{name}': not a valid identifier"));
            return Ok(1);
        }
        let words: Vec<String> = if rest.is_empty() {
            self.positional[1..].to_vec()
        } else {
            rest.to_vec()
        };
        let silent = spec.starts_with(':');
        let mut optind = self
            .var("OPTIND")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
        // OPTIND changed by the script (`OPTIND=1` to start again): a new
        // argument, from its first letter.
        let mut pos = if self.getopts_at.0 == optind {
            self.getopts_at.1
        } else {
            1
        };
        let done = |me: &mut Self, optind: usize| -> R<i32> {
            me.assign_screened(name, "?".into(), at)?;
            me.set_var("OPTIND", optind.to_string());
            me.getopts_at = (optind, 1);
            Ok(1)
        };
        let Some(word) = words.get(optind - 1).cloned() else {
            // Past the last word: OPTIND is one past it, as bash sets it.
            return done(self, words.len() + 1);
        };
        if pos == 1 {
            if word == "--" {
                return done(self, optind + 1);
            }
            if !word.starts_with('-') || word == "-" {
                return done(self, optind);
            }
        }
        let letters: Vec<char> = word.chars().collect();
        let Some(&letter) = letters.get(pos) else {
            return done(self, optind);
        };
        pos += 1;
        let at_end = pos >= letters.len();
        let known = letter != ':' && spec.contains(letter);
        let takes =
            known && spec[spec.find(letter).unwrap_or(0) + letter.len_utf8()..].starts_with(':');
        let argv0 = self.positional[0].clone();
        let mut value = letter.to_string();
        let mut optarg = None;
        if !known {
            if silent {
                optarg = Some(letter.to_string());
            } else {
                write_fd(
                    2,
                    format!("{argv0}: illegal option -- {letter}\n").as_bytes(),
                );
            }
            value = "?".into();
            if at_end {
                optind += 1;
                pos = 1;
            }
        } else if takes {
            if !at_end {
                optarg = Some(letters[pos..].iter().collect());
                optind += 1;
            } else if let Some(next) = words.get(optind) {
                optarg = Some(next.clone());
                optind += 2;
            } else {
                if silent {
                    value = ":".into();
                    optarg = Some(letter.to_string());
                } else {
                    write_fd(
                        2,
                        format!("{argv0}: option requires an argument -- {letter}\n").as_bytes(),
                    );
                    value = "?".into();
                }
                optind += 1;
            }
            pos = 1;
        } else if at_end {
            optind += 1;
            pos = 1;
        }
        self.assign_screened(name, value, at)?;
        match optarg {
            Some(v) => self.set_var("OPTARG", v),
            None => {
                self.vars.remove("OPTARG");
            }
        }
        self.set_var("OPTIND", optind.to_string());
        self.getopts_at = (optind, pos);
        Ok(0)
    }

    // ---- read ----

    fn read(&mut self, c: &SimpleCommand, args: &[String], offsets: &[usize]) -> R<i32> {
        let mut raw = false;
        let mut delim: Option<u8> = Some(b'\n');
        let mut limit: Option<usize> = None;
        let mut fd: RawFd = 0;
        let mut array: Option<String> = None;
        let mut i = 0;
        let usage = "read: usage: read [-ers] [-a array] [-d delim] [-i text] [-n nchars] [-N nchars] [-p prompt] [-t timeout] [-u fd] [name ...]";
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a.len() < 2 {
                break;
            }
            let flags: Vec<char> = a[1..].chars().collect();
            let mut j = 0;
            while j < flags.len() {
                let f = flags[j];
                let takes = matches!(f, 'a' | 'd' | 'i' | 'n' | 'N' | 'p' | 't' | 'u');
                let value = if takes {
                    let rest: String = flags[j + 1..].iter().collect();
                    if !rest.is_empty() {
                        j = flags.len();
                        Some(rest)
                    } else {
                        i += 1;
                        match args.get(i) {
                            Some(v) => Some(v.clone()),
                            None => {
                                say(&format!("read: -{f}: option requires an argument"));
                                say(usage);
                                return Ok(2);
                            }
                        }
                    }
                } else {
                    None
                };
                match f {
                    'r' => raw = true,
                    's' | 'e' => {}
                    'd' => delim = value.and_then(|v| v.bytes().next()).or(Some(0)),
                    'n' | 'N' => match value.as_deref().map(str::trim).map(str::parse::<usize>) {
                        Some(Ok(n)) => {
                            limit = Some(n);
                            if f == 'N' {
                                delim = None;
                            }
                        }
                        _ => {
                            say(&format!(
                                "read: {}: invalid number",
                                value.unwrap_or_default()
                            ));
                            return Ok(1);
                        }
                    },
                    'u' => match value.as_deref().map(str::trim).map(str::parse::<RawFd>) {
                        Some(Ok(n)) if n >= 0 => fd = n,
                        _ => {
                            say(&format!(
                                "read: {}: invalid file descriptor specification",
                                value.unwrap_or_default()
                            ));
                            return Ok(1);
                        }
                    },
                    'p' => {
                        // SAFETY: isatty has no memory effects.
                        if unsafe { libc::isatty(fd) } == 1 {
                            write_fd(2, value.unwrap_or_default().as_bytes());
                        }
                    }
                    'i' => {}
                    'a' => array = value,
                    't' => {
                        let mut d = Denial::new(
                            "syntax.unsupported",
                            "`read -t`: timeouts are not supported",
                            "read without -t; the run's own timeout bounds the wait",
                        );
                        d.offset = offsets.get(i + 1).copied().or(Some(c.offset));
                        return Err(self.deny(d));
                    }
                    _ => {
                        say(&format!("read: -{f}: invalid option"));
                        say(usage);
                        return Ok(2);
                    }
                }
                j += 1;
            }
            i += 1;
        }
        let names = &args[i.min(args.len())..];
        for n in names.iter().chain(&array) {
            if !crate::lex::is_identifier(n) {
                say(&format!("read: `{n}': not a valid identifier"));
                return Ok(1);
            }
        }
        // Byte by byte: what follows the line stays for the next reader.
        let mut chars: Vec<(u8, bool)> = Vec::new();
        let mut eof = false;
        let mut escaped = false;
        loop {
            if limit.is_some_and(|n| chars.len() >= n) {
                break;
            }
            let mut b = [0u8; 1];
            // SAFETY: read into a stack byte.
            let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
            if n < 0 && last_errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                eof = true;
                break;
            }
            let b = b[0];
            if escaped {
                escaped = false;
                if b == b'\n' {
                    continue;
                }
                chars.push((b, true));
                continue;
            }
            if !raw && b == b'\\' {
                escaped = true;
                continue;
            }
            if Some(b) == delim {
                break;
            }
            if b == 0 {
                continue;
            }
            chars.push((b, false));
        }
        let ifs = expand::ifs(self);
        let text = |cs: &[(u8, bool)]| {
            String::from_utf8_lossy(&cs.iter().map(|c| c.0).collect::<Vec<_>>()).into_owned()
        };
        let at = offsets.first().copied().unwrap_or(c.offset);
        let is_ifs = |c: &(u8, bool)| !c.1 && ifs.as_bytes().contains(&c.0);
        let is_white = |c: &(u8, bool)| is_ifs(c) && matches!(c.0, b' ' | b'\t' | b'\n');
        let mut k = 0;
        while k < chars.len() && is_white(&chars[k]) {
            k += 1;
        }
        if let Some(name) = array {
            // `read -a NAME`: every field an element.
            if let Err(d) = verify::screen_name(&self.policy, &name, at) {
                return Err(self.deny(d));
            }
            let mut items = Vec::new();
            while k < chars.len() {
                let start = k;
                while k < chars.len() && !is_ifs(&chars[k]) {
                    k += 1;
                }
                items.push((None, text(&chars[start..k])));
                while k < chars.len() && is_white(&chars[k]) {
                    k += 1;
                }
                if k < chars.len() && is_ifs(&chars[k]) {
                    k += 1;
                    while k < chars.len() && is_white(&chars[k]) {
                        k += 1;
                    }
                }
            }
            self.set_array(&name, items, false, Some(false))?;
            return Ok(i32::from(eof));
        }
        if names.is_empty() {
            self.assign_screened("REPLY", text(&chars), at)?;
            return Ok(i32::from(eof));
        }
        for (ni, n) in names.iter().enumerate() {
            let off = offsets.get(i + ni + 1).copied().unwrap_or(at);
            if ni + 1 == names.len() {
                let mut rest = &chars[k.min(chars.len())..];
                while rest.last().is_some_and(is_white) {
                    rest = &rest[..rest.len() - 1];
                }
                // One trailing non-white separator goes (`a:b:` gives `b`).
                if rest.len() >= 2
                    && rest.last().is_some_and(|c| is_ifs(c) && !is_white(c))
                    && !rest[..rest.len() - 1].iter().any(is_ifs)
                {
                    rest = &rest[..rest.len() - 1];
                }
                let v = text(rest);
                self.assign_screened(n, v, off)?;
                break;
            }
            let start = k;
            while k < chars.len() && !is_ifs(&chars[k]) {
                k += 1;
            }
            let v = text(&chars[start..k]);
            while k < chars.len() && is_white(&chars[k]) {
                k += 1;
            }
            if k < chars.len() && is_ifs(&chars[k]) {
                k += 1;
                while k < chars.len() && is_white(&chars[k]) {
                    k += 1;
                }
            }
            self.assign_screened(n, v, off)?;
        }
        Ok(i32::from(eof))
    }

    // ---- command, type, hash ----

    /// What a name is: `keyword`, `builtin`, or the program's path as the
    /// policy resolves it. A program the policy refuses is not found.
    fn what_is(&mut self, name: &str) -> Option<(&'static str, Option<PathBuf>)> {
        if KEYWORDS.contains(&name) {
            return Some(("keyword", None));
        }
        if self.functions.contains_key(name) {
            return Some(("function", None));
        }
        if is_builtin(name) {
            return Some(("builtin", None));
        }
        match self.resolve(name) {
            Ok(p) => {
                let allowed = {
                    let (policy, cache) = (&self.policy, &mut self.cache);
                    let mut resolve = |n: &str| resolve_cached(policy, cache, n);
                    judge::judge(policy, &[name.to_string()], &mut resolve, false)
                        .denial
                        .is_none()
                };
                allowed.then_some(("file", Some(p)))
            }
            Err(_) => None,
        }
    }

    fn command_builtin(&mut self, c: &SimpleCommand, args: &[String], offsets: &[usize]) -> R<i32> {
        let (mut v, mut big_v) = (false, false);
        let mut i = 0;
        while let Some(a) = args.get(i) {
            match a.as_str() {
                "-v" => v = true,
                "-V" => big_v = true,
                "-p" => {}
                "--" => {
                    i += 1;
                    break;
                }
                _ => break,
            }
            i += 1;
        }
        if !v && !big_v {
            if i >= args.len() {
                return Ok(0);
            }
            let mut d = Denial::new(
                "syntax.unsupported",
                format!("`command {}` is not supported", args[i]),
                "write the command without `command` in front; to ask whether a program is there, use `command -v NAME`",
            );
            d.offset = offsets.get(1).copied().or(Some(c.offset));
            return Err(self.deny(d));
        }
        let mut st = 0;
        for name in &args[i..] {
            match self.what_is(name) {
                Some((kind, path)) => {
                    let line = if big_v {
                        describe(name, kind, path.as_deref())
                    } else {
                        path.map_or(name.clone(), |p| p.display().to_string())
                    };
                    self.out(&format!("{line}\n"));
                }
                None => {
                    if big_v {
                        say(&format!("command: {name}: not found"));
                    }
                    st = 1;
                }
            }
        }
        Ok(st)
    }

    fn type_builtin(&mut self, args: &[String]) -> R<i32> {
        let mut mode = ' ';
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a.len() < 2 {
                break;
            }
            for f in a[1..].chars() {
                match f {
                    't' | 'p' | 'P' => mode = f,
                    'a' | 'f' => {}
                    _ => {
                        say(&format!("type: -{f}: invalid option"));
                        say("type: usage: type [-afptP] name [name ...]");
                        return Ok(2);
                    }
                }
            }
            i += 1;
        }
        let mut st = 0;
        for name in &args[i..] {
            let found = self.what_is(name);
            match (mode, found) {
                ('t', Some((kind, _))) => self.out(&format!("{kind}\n")),
                ('p', Some((_, Some(p)))) | ('P', Some((_, Some(p)))) => {
                    self.out(&format!("{}\n", p.display()))
                }
                ('p', Some(_)) => {}
                ('P', Some(_)) => {
                    // -P searches the path even for builtins.
                    match self.resolve(name) {
                        Ok(p) => self.out(&format!("{}\n", p.display())),
                        Err(_) => st = 1,
                    }
                }
                (' ', Some((kind, path))) => {
                    let line = describe(name, kind, path.as_deref());
                    self.out(&format!("{line}\n"));
                }
                (' ', None) => {
                    say(&format!("type: {name}: not found"));
                    st = 1;
                }
                _ => st = 1,
            }
        }
        Ok(st)
    }

    fn hash_builtin(&mut self, args: &[String]) -> R<i32> {
        let mut st = 0;
        for a in args {
            if a == "-r" {
                continue;
            }
            if KEYWORDS.contains(&a.as_str()) || is_builtin(a) {
                continue;
            }
            if !matches!(self.what_is(a), Some(("file", _))) {
                say(&format!("hash: {a}: not found"));
                st = 1;
            }
        }
        if args.is_empty() {
            say("hash: hash table empty");
        }
        Ok(st)
    }

    // ---- declare ----

    fn declare(&mut self, c: &SimpleCommand, argv: &[String], offsets: &[usize]) -> R<i32> {
        let mut export = false;
        let mut kind: Option<bool> = None;
        let mut print = false;
        // `readonly` is `declare -r` at the shell's level.
        let mut global = argv[0] == "readonly";
        let mut readonly = global;
        let mut st = 0;
        let mut names = 0;
        for (i, a) in argv.iter().enumerate().skip(1) {
            let off = offsets.get(i).copied().unwrap_or(c.offset);
            let array = self.decl_arrays.iter().position(|(at, _, _)| *at == i);
            if array.is_none()
                && let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+'))
                && !flags.is_empty()
                && !a.contains('=')
            {
                for f in flags.chars() {
                    match f {
                        'x' => export = a.starts_with('-'),
                        'g' => global = true,
                        'a' => kind = Some(false),
                        'A' => kind = Some(true),
                        'p' => print = true,
                        'r' if a.starts_with('-') => readonly = true,
                        _ => {
                            let mut d = Denial::new(
                                "syntax.unsupported",
                                format!("`{} -{f}` is not supported", argv[0]),
                                "use plain variables: `NAME=value`, `export NAME=value`, arrays with -a or -A; compute numbers with $((...))",
                            );
                            d.offset = Some(off);
                            return Err(self.deny(d));
                        }
                    }
                }
                continue;
            }
            names += 1;
            if print {
                match self.declaration_of(a) {
                    Some(line) => self.out(&line),
                    None => {
                        say(&format!("{}: {a}: not found", argv[0]));
                        st = 1;
                    }
                }
                continue;
            }
            if !global && !self.locals.is_empty() {
                self.declare_local(a, off);
            }
            let one = self.declare_one(&argv[0], i, a, off, kind, export)?;
            if one == 0 && readonly {
                let n = a.split(['=', '+']).next().unwrap_or(a);
                self.readonly.insert(n.to_string());
            }
            st |= one;
        }
        if names == 0 && argv[0] == "readonly" {
            // `readonly` / `readonly -p`: the shell's read-only names
            // (bash's own, as BASHOPTS or UID, are not variables here).
            let names: Vec<String> = self.readonly.iter().cloned().collect();
            for n in names {
                let line = self
                    .declaration_of(&n)
                    .unwrap_or_else(|| format!("declare -r {n}\n"));
                self.out(&line);
            }
            return Ok(0);
        }
        if names == 0 {
            let mut d = Denial::new(
                "syntax.unsupported",
                format!("`{}` without names", argv[0]),
                "print a variable with `echo \"$NAME\"` or `declare -p NAME`, or the environment with an allowed program such as `env`",
            );
            d.offset = Some(c.offset);
            return Err(self.deny(d));
        }
        Ok(st)
    }

    /// One NAME, NAME=value or NAME=(...) of `declare`/`local` (argument
    /// `i`): the array kind asked for (Some(true): associative), whether
    /// it is exported.
    pub(super) fn declare_one(
        &mut self,
        builtin: &str,
        i: usize,
        a: &str,
        off: usize,
        kind: Option<bool>,
        export: bool,
    ) -> R<i32> {
        let literal = self
            .decl_arrays
            .iter()
            .position(|(at, _, _)| *at == i)
            .map(|k| self.decl_arrays.remove(k));
        let (n, v) = match (&literal, a.split_once('=')) {
            (Some(_), _) => (a, None),
            (None, Some((n, v))) => (n, Some(v)),
            (None, None) => (a, None),
        };
        let (n, append) = match n.strip_suffix('+') {
            Some(n) => (n, true),
            None => (n, false),
        };
        if !crate::lex::is_identifier(n) {
            say(&format!("{builtin}: `{a}': not a valid identifier"));
            return Ok(1);
        }
        if let Err(d) = verify::screen_name(&self.policy, n, off) {
            return Err(self.deny(d));
        }
        // A read-only name takes no value, and no local of its name.
        if self.readonly.contains(n) && (v.is_some() || literal.is_some() || builtin == "local") {
            // `readonly NAME=v` fails as an assignment does (`set -e` ends
            // the shell); `declare` and `local` fail with 1.
            if builtin == "readonly" {
                return Err(self.readonly_failed(n, Unwind::Failed(1)));
            }
            say(&format!("{builtin}: {n}: readonly variable"));
            return Ok(1);
        }
        let existing = self.vars.get(n).map(|v| match &v.array {
            Some(Array::Assoc(_)) => Some(true),
            Some(Array::Indexed(_)) => Some(false),
            None => None,
        });
        if kind == Some(true) && existing == Some(Some(false)) {
            say(&format!(
                "{builtin}: {n}: cannot convert indexed to associative array"
            ));
            return Ok(1);
        }
        if let Some((_, items, app)) = literal {
            self.set_array(n, items, app, kind)?;
        } else if let Some(k) = kind
            && existing.flatten().is_none()
        {
            // `declare -a NAME`: an (empty) array, keeping a value as its
            // element 0.
            let old = self.var(n);
            let items = old
                .map(|v| (Some("0".to_string()), v))
                .into_iter()
                .collect();
            self.set_array(n, items, false, Some(k))?;
        }
        if let Some(v) = v {
            let v = if append {
                format!("{}{v}", self.var(n).unwrap_or_default())
            } else {
                v.to_string()
            };
            self.set_var(n, v);
        }
        let var = self.vars.entry(n.to_string()).or_default();
        if export {
            var.exported = true;
        }
        Ok(0)
    }

    /// `declare -p NAME`'s line, as bash prints it.
    fn declaration_of(&self, name: &str) -> Option<String> {
        let v = self.vars.get(name)?;
        let q = |s: &str| {
            let mut o = String::from("\"");
            for ch in s.chars() {
                if matches!(ch, '"' | '\\' | '$' | '`') {
                    o.push('\\');
                }
                o.push(ch);
            }
            o.push('"');
            o
        };
        let x = match (self.readonly.contains(name), v.exported) {
            (true, true) => "rx",
            (true, false) => "r",
            (false, true) => "x",
            (false, false) => "",
        };
        Some(match &v.array {
            Some(Array::Indexed(m)) => {
                let body: Vec<String> = m.iter().map(|(k, e)| format!("[{k}]={}", q(e))).collect();
                format!("declare -a{x} {name}=({})\n", body.join(" "))
            }
            Some(Array::Assoc(m)) => {
                let body: String = m
                    .iter()
                    .map(|(k, e)| format!("[{}]={} ", xtrace_quote(k), q(e)))
                    .collect();
                format!("declare -A{x} {name}=({body})\n")
            }
            None => {
                let flags = if x.is_empty() {
                    "--".to_string()
                } else {
                    format!("-{x}")
                };
                match &v.value {
                    Some(val) => format!("declare {flags} {name}={}\n", q(val)),
                    None => format!("declare {flags} {name}\n"),
                }
            }
        })
    }

    /// `mapfile`/`readarray [-t] [-d DELIM] [-n COUNT] [-s SKIP] [-u FD]
    /// [NAME]`: the lines of the input into an array (MAPFILE).
    fn mapfile(&mut self, argv: &[String], offsets: &[usize]) -> R<i32> {
        let me = argv[0].as_str();
        let mut trim = false;
        let mut delim = b'\n';
        let mut count: Option<usize> = None;
        let mut skip = 0usize;
        let mut fd: RawFd = 0;
        let mut i = 1;
        while let Some(a) = argv.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a.len() < 2 {
                break;
            }
            let f = a.as_bytes()[1];
            let value = if matches!(f, b'd' | b'n' | b's' | b'u' | b'O' | b'C' | b'c') {
                if a.len() > 2 {
                    Some(a[2..].to_string())
                } else {
                    i += 1;
                    match argv.get(i) {
                        Some(v) => Some(v.clone()),
                        None => {
                            say(&format!(
                                "{me}: -{}: option requires an argument",
                                f as char
                            ));
                            return Ok(2);
                        }
                    }
                }
            } else {
                None
            };
            let number =
                |v: &Option<String>| v.as_deref().and_then(|v| v.trim().parse::<usize>().ok());
            match f {
                b't' if a.len() == 2 => trim = true,
                b'd' => delim = value.and_then(|v| v.bytes().next()).unwrap_or(0),
                b'n' => match number(&value) {
                    Some(0) => count = None,
                    Some(n) => count = Some(n),
                    None => {
                        say(&format!(
                            "{me}: {}: invalid line count",
                            value.unwrap_or_default()
                        ));
                        return Ok(1);
                    }
                },
                b's' => match number(&value) {
                    Some(n) => skip = n,
                    None => {
                        say(&format!(
                            "{me}: {}: invalid line count",
                            value.unwrap_or_default()
                        ));
                        return Ok(1);
                    }
                },
                b'u' => match value
                    .as_deref()
                    .and_then(|v| v.trim().parse::<RawFd>().ok())
                {
                    Some(n) if n >= 0 => fd = n,
                    _ => {
                        say(&format!(
                            "{me}: {}: invalid file descriptor specification",
                            value.unwrap_or_default()
                        ));
                        return Ok(1);
                    }
                },
                _ => {
                    let mut d = Denial::new(
                        "syntax.unsupported",
                        format!("`{me} {a}` is not supported"),
                        "use mapfile -t NAME (with -d, -n, -s or -u)",
                    );
                    d.offset = offsets.get(i).copied();
                    return Err(self.deny(d));
                }
            }
            i += 1;
        }
        let name = argv
            .get(i)
            .cloned()
            .unwrap_or_else(|| "MAPFILE".to_string());
        let at = offsets.get(i).or(offsets.first()).copied().unwrap_or(0);
        if !crate::lex::is_identifier(&name) {
            say(&format!("{me}: `{name}': not a valid identifier"));
            return Ok(1);
        }
        if let Err(d) = verify::screen_name(&self.policy, &name, at) {
            return Err(self.deny(d));
        }
        // Byte by byte, as `read` does: what follows the last line taken
        // stays for the next reader.
        let mut items: Vec<(Option<String>, String)> = Vec::new();
        let mut line: Vec<u8> = Vec::new();
        let mut seen = 0usize;
        let mut buf = [0u8; 1];
        loop {
            if count.is_some_and(|n| items.len() >= n) {
                break;
            }
            // SAFETY: read into a stack byte.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), 1) };
            if n < 0 && last_errno() == libc::EINTR {
                continue;
            }
            let end = n <= 0;
            if !end && buf[0] != 0 {
                line.push(buf[0]);
            }
            if end || buf[0] == delim {
                if end && line.is_empty() {
                    break;
                }
                if trim && line.last() == Some(&delim) {
                    line.pop();
                }
                seen += 1;
                if seen > skip {
                    items.push((None, String::from_utf8_lossy(&line).into_owned()));
                    if items.len() > expand::MAX_ARRAY_ELEMENTS {
                        say(&format!(
                            "{me}: an array holds at most {} elements",
                            expand::MAX_ARRAY_ELEMENTS
                        ));
                        return Ok(1);
                    }
                }
                line.clear();
                if end {
                    break;
                }
            }
        }
        self.set_array(&name, items, false, Some(false))?;
        Ok(0)
    }

    /// `pushd DIR`, `pushd` (swap), `popd`, `dirs` (`-c`, `-l`, `-p`,
    /// `-v`): a stack of directories inside the workspace, printed as
    /// bash prints it.
    fn dirs_builtin(&mut self, c: &SimpleCommand, argv: &[String], offsets: &[usize]) -> R<i32> {
        let me = argv[0].as_str();
        let args: Vec<&String> = argv[1..].iter().filter(|a| *a != "--").collect();
        match me {
            "pushd" => {
                let old = self.cwd.clone();
                let target = match args.first() {
                    Some(t) if t.starts_with(['+', '-']) && t.len() > 1 => {
                        say(&format!(
                            "pushd: {t}: options and rotating the stack are not supported"
                        ));
                        return Ok(1);
                    }
                    Some(t) => t.to_string(),
                    None => match self.dir_stack.pop() {
                        Some(top) => top.display().to_string(),
                        None => {
                            say("pushd: no other directory");
                            return Ok(1);
                        }
                    },
                };
                // bash names pushd in the message of a directory it
                // cannot enter (cd names itself).
                let missing = match std::fs::metadata(self.cwd.join(&target)) {
                    Ok(m) if m.is_dir() => None,
                    Ok(_) => Some(errno_text(libc::ENOTDIR)),
                    Err(e) => Some(errno_text(e.raw_os_error().unwrap_or(libc::ENOENT))),
                };
                if let Some(why) = missing {
                    say(&format!("pushd: {target}: {why}"));
                    return Ok(1);
                }
                let cd = vec!["cd".to_string(), target];
                let cd_offsets = vec![c.offset, offsets.get(1).copied().unwrap_or(c.offset)];
                let st = self.builtin(c, &cd, &cd_offsets)?;
                if st != 0 {
                    return Ok(st);
                }
                self.dir_stack.push(old);
            }
            "popd" => {
                if let Some(t) = args.first() {
                    say(&format!("popd: {t}: invalid argument"));
                    return Ok(2);
                }
                let Some(top) = self.dir_stack.pop() else {
                    say("popd: directory stack empty");
                    return Ok(1);
                };
                let cd = vec!["cd".to_string(), top.display().to_string()];
                let st = self.builtin(c, &cd, &[c.offset, c.offset])?;
                if st != 0 {
                    return Ok(st);
                }
            }
            _ => {
                if args.iter().any(|a| *a == "-c") {
                    self.dir_stack.clear();
                    return Ok(0);
                }
            }
        }
        let home = self.var("HOME").unwrap_or_default();
        let long = args.iter().any(|a| a.starts_with('-') && a.contains('l'));
        let show = |p: &Path| {
            let t = p.display().to_string();
            if !long && !home.is_empty() && (t == home || t.starts_with(&format!("{home}/"))) {
                format!("~{}", &t[home.len()..])
            } else {
                t
            }
        };
        let all: Vec<String> = std::iter::once(self.cwd.as_path())
            .chain(self.dir_stack.iter().rev().map(PathBuf::as_path))
            .map(show)
            .collect();
        let text = if args.iter().any(|a| a.starts_with('-') && a.contains('v')) {
            all.iter()
                .enumerate()
                .map(|(i, d)| format!("{i:2}  {d}\n"))
                .collect()
        } else if args.iter().any(|a| a.starts_with('-') && a.contains('p')) {
            all.iter().map(|d| format!("{d}\n")).collect()
        } else {
            format!("{}\n", all.join(" "))
        };
        self.out(&text);
        Ok(0)
    }
}

/// Whether the command at `offset` is the first of its line.
fn starts_line(src: &str, offset: usize) -> bool {
    let before = src.get(..offset).unwrap_or("");
    before
        .trim_end_matches([' ', '\t'])
        .chars()
        .next_back()
        .is_none_or(|c| c == '\n')
}

/// Whether `name` is a builtin the interpreter runs.
fn is_builtin(name: &str) -> bool {
    (verify::BUILTINS.contains(&name) && !matches!(name, "((" | "[["))
        || verify::refused_builtin(name).is_some()
        || name == "exec"
}

/// `type NAME`'s sentence.
fn describe(name: &str, kind: &str, path: Option<&Path>) -> String {
    match (kind, path) {
        ("keyword", _) => format!("{name} is a shell keyword"),
        ("builtin", _) => format!("{name} is a shell builtin"),
        // bash prints the body too.
        ("function", _) => format!("{name} is a function"),
        (_, Some(p)) => format!("{name} is {}", p.display()),
        _ => name.to_string(),
    }
}

// ---- test's grammar ----

struct Test<'a, 'b, 's> {
    me: &'a mut Interp<'s>,
    args: &'b [String],
    pos: usize,
}

/// test's integers: blanks around an optional sign and decimal digits.
fn test_int(s: &str) -> Result<i64, ShellError> {
    let t = s.trim_matches([' ', '\t', '\n']);
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s}: integer expression expected").into());
    }
    t.parse::<i64>()
        .map_err(|_| format!("{s}: integer expression expected").into())
}

fn file_times(p: &str) -> Option<(i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p)
        .ok()
        .map(|m| (m.mtime(), m.mtime_nsec()))
}

/// A binary test with its operands already expanded (`[[` turns `==` into
/// a pattern match before it comes here).
fn binary_test(op: &str, a: &str, b: &str, ints: (i64, i64)) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (x, y) = ints;
    match op {
        "=" | "==" => a == b,
        "!=" => a != b,
        "<" => a.as_bytes() < b.as_bytes(),
        ">" => a.as_bytes() > b.as_bytes(),
        "-eq" => x == y,
        "-ne" => x != y,
        "-lt" => x < y,
        "-le" => x <= y,
        "-gt" => x > y,
        "-ge" => x >= y,
        "-nt" => match (file_times(a), file_times(b)) {
            (Some(s), Some(t)) => s > t,
            (Some(_), None) => true,
            _ => false,
        },
        "-ot" => match (file_times(a), file_times(b)) {
            (Some(s), Some(t)) => s < t,
            (None, Some(_)) => true,
            _ => false,
        },
        "-ef" => match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(s), Ok(t)) => s.dev() == t.dev() && s.ino() == t.ino(),
            _ => false,
        },
        _ => false,
    }
}

impl Test<'_, '_, '_> {
    fn arg(&self, i: usize) -> &str {
        self.args.get(i).map(String::as_str).unwrap_or("")
    }

    fn binary(&mut self, i: usize) -> Result<bool, ShellError> {
        let (a, op, b) = (self.arg(i), self.arg(i + 1), self.arg(i + 2));
        let ints = if op.starts_with('-') && !matches!(op, "-nt" | "-ot" | "-ef") {
            (test_int(a)?, test_int(b)?)
        } else {
            (0, 0)
        };
        Ok(binary_test(op, a, b, ints))
    }

    fn two(&mut self, i: usize) -> Result<bool, ShellError> {
        let (a, b) = (self.arg(i).to_string(), self.arg(i + 1).to_string());
        if a == "!" {
            return Ok(b.is_empty());
        }
        if is_unary(&a) {
            return Ok(self.me.unary_test(&a, &b));
        }
        Err(format!("{a}: unary operator expected").into())
    }

    fn three(&mut self, i: usize) -> Result<bool, ShellError> {
        let op = self.arg(i + 1);
        if is_binary(op) {
            return self.binary(i);
        }
        if op == "-a" {
            return Ok(!self.arg(i).is_empty() && !self.arg(i + 2).is_empty());
        }
        if op == "-o" {
            return Ok(!self.arg(i).is_empty() || !self.arg(i + 2).is_empty());
        }
        if self.arg(i) == "!" {
            return self.two(i + 1).map(|v| !v);
        }
        if self.arg(i) == "(" && self.arg(i + 2) == ")" {
            return Ok(!self.arg(i + 1).is_empty());
        }
        Err(format!("{op}: binary operator expected").into())
    }

    fn full(&mut self) -> Result<bool, ShellError> {
        let v = self.or()?;
        if self.pos < self.args.len() {
            return Err("too many arguments".into());
        }
        Ok(v)
    }

    fn or(&mut self) -> Result<bool, ShellError> {
        let mut v = self.and()?;
        while self.arg(self.pos) == "-o" && self.pos < self.args.len() {
            self.pos += 1;
            let r = self.and()?;
            v = v || r;
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<bool, ShellError> {
        let mut v = self.term()?;
        while self.arg(self.pos) == "-a" && self.pos < self.args.len() {
            self.pos += 1;
            let r = self.term()?;
            v = v && r;
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<bool, ShellError> {
        let n = self.args.len();
        if self.pos >= n {
            return Err("argument expected".into());
        }
        if self.arg(self.pos) == "!" {
            self.pos += 1;
            return self.term().map(|v| !v);
        }
        if self.arg(self.pos) == "(" {
            self.pos += 1;
            let v = self.or()?;
            if self.arg(self.pos) != ")" || self.pos >= n {
                return Err(match self.args.get(self.pos) {
                    Some(t) => format!("`)' expected, found {t}").into(),
                    None => "`)' expected".into(),
                });
            }
            self.pos += 1;
            return Ok(v);
        }
        if self.pos + 3 <= n && is_binary(self.arg(self.pos + 1)) {
            let v = self.binary(self.pos)?;
            self.pos += 3;
            return Ok(v);
        }
        if is_unary(self.arg(self.pos)) {
            if self.pos + 1 >= n {
                return Err(format!("{}: argument expected", self.arg(self.pos)).into());
            }
            let (op, a) = (
                self.arg(self.pos).to_string(),
                self.arg(self.pos + 1).to_string(),
            );
            self.pos += 2;
            return Ok(self.me.unary_test(&op, &a));
        }
        let v = !self.arg(self.pos).is_empty();
        self.pos += 1;
        Ok(v)
    }
}

// ---- [[ ]]'s grammar ----

struct Cond<'w> {
    words: &'w [Word],
    pos: usize,
    /// An error's status (2): the message is printed.
    failed: Option<i32>,
}

impl Cond<'_> {
    fn is(&self, op: &str) -> bool {
        self.words.get(self.pos).is_some_and(|w| w.is_bare(op))
    }

    fn fail(&mut self, msg: &str) -> bool {
        if self.failed.is_none() {
            say(msg);
            self.failed = Some(2);
        }
        false
    }

    /// `run` false: a branch `&&`/`||` skips; nothing is expanded.
    fn or(&mut self, me: &mut Interp, run: bool) -> R<bool> {
        let mut v = self.and(me, run)?;
        while self.is("||") {
            self.pos += 1;
            let r = self.and(me, run && !v)?;
            v = v || r;
        }
        Ok(v)
    }

    fn and(&mut self, me: &mut Interp, run: bool) -> R<bool> {
        let mut v = self.not(me, run)?;
        while self.is("&&") {
            self.pos += 1;
            let r = self.not(me, run && v)?;
            v = v && r;
        }
        Ok(v)
    }

    fn not(&mut self, me: &mut Interp, run: bool) -> R<bool> {
        if self.is("!") {
            self.pos += 1;
            return Ok(!self.not(me, run)?);
        }
        self.primary(me, run)
    }

    fn primary(&mut self, me: &mut Interp, run: bool) -> R<bool> {
        let n = self.words.len();
        if self.pos >= n {
            return Ok(self.fail("unexpected argument to conditional expression"));
        }
        if self.is("(") {
            self.pos += 1;
            let v = self.or(me, run)?;
            if !self.is(")") {
                return Ok(self.fail("syntax error in conditional expression"));
            }
            self.pos += 1;
            return Ok(v);
        }
        let w = &self.words[self.pos];
        let op_of = |w: &Word| -> Option<String> {
            let [Part::Lit(t)] = w.parts.as_slice() else {
                return None;
            };
            Some(t.clone())
        };
        // A binary operator after this word.
        if let Some(op) = self.words.get(self.pos + 1).and_then(op_of)
            && (is_binary(&op) || op == "=~")
            && self.pos + 2 < n
        {
            let rhs = &self.words[self.pos + 2];
            self.pos += 3;
            if !run {
                return Ok(false);
            }
            let a = me.string(w, Tilde::Word)?;
            return match op.as_str() {
                "=" | "==" | "!=" => {
                    let pat = me.expand_result(|sh| expand::pattern(rhs, sh))?;
                    let m = pat.matches(&a);
                    Ok(if op == "!=" { !m } else { m })
                }
                "=~" => {
                    let chars = me.expand_result(|sh| expand::pattern_chars(rhs, sh))?;
                    let mut re = String::from("(?s)");
                    for (c, active) in chars {
                        if active {
                            re.push(c);
                        } else {
                            re.push_str(&regex::escape(&c.to_string()));
                        }
                    }
                    match regex::Regex::new(&re) {
                        Ok(r) => match r.captures(&a) {
                            Some(caps) => {
                                // The whole match, then each group (an
                                // unmatched group is empty, as in bash).
                                let items = caps
                                    .iter()
                                    .map(|m| (None, m.map_or("", |m| m.as_str()).to_string()))
                                    .collect();
                                me.set_array("BASH_REMATCH", items, false, Some(false))?;
                                Ok(true)
                            }
                            None => {
                                me.vars.remove("BASH_REMATCH");
                                Ok(false)
                            }
                        },
                        Err(_) => {
                            self.failed = Some(2);
                            Ok(false)
                        }
                    }
                }
                _ => {
                    let b = me.string(rhs, Tilde::Word)?;
                    let ints =
                        if op.starts_with('-') && !matches!(op.as_str(), "-nt" | "-ot" | "-ef") {
                            let x = me.arith_eval(&a)?;
                            let y = me.arith_eval(&b)?;
                            match (x, y) {
                                (Ok(x), Ok(y)) => (x, y),
                                (Err(m), _) | (_, Err(m)) => {
                                    say(&m.0);
                                    self.failed = Some(1);
                                    return Ok(false);
                                }
                            }
                        } else {
                            (0, 0)
                        };
                    Ok(binary_test(&op, &a, &b, ints))
                }
            };
        }
        // A unary operator with its operand.
        if let Some(op) = op_of(w)
            && is_unary(&op)
            && self.pos + 1 < n
            && !self.words[self.pos + 1].is_bare("&&")
            && !self.words[self.pos + 1].is_bare("||")
            && !self.words[self.pos + 1].is_bare(")")
        {
            let arg = &self.words[self.pos + 1];
            self.pos += 2;
            if !run {
                return Ok(false);
            }
            let a = me.string(arg, Tilde::Word)?;
            return Ok(me.unary_test(&op, &a));
        }
        self.pos += 1;
        if !run {
            return Ok(false);
        }
        Ok(!me.string(w, Tilde::Word)?.is_empty())
    }
}

// ---- echo and printf: pure ----

/// bash's `echo`: options `-n`, `-e`, `-E` while they lead.
fn echo(args: &[String]) -> i32 {
    let (mut newline, mut escapes) = (true, false);
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let Some(flags) = a.strip_prefix('-') else {
            break;
        };
        if flags.is_empty() || !flags.chars().all(|c| matches!(c, 'n' | 'e' | 'E')) {
            break;
        }
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        i += 1;
    }
    let mut out = Vec::new();
    for (k, a) in args[i..].iter().enumerate() {
        if k > 0 {
            out.push(b' ');
        }
        if escapes {
            if unescape(a.as_bytes(), Escapes::Echo, &mut out) {
                write_fd(1, &out);
                return 0;
            }
        } else {
            out.extend_from_slice(a.as_bytes());
        }
    }
    if newline {
        out.push(b'\n');
    }
    write_fd(1, &out);
    0
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Escapes {
    /// `echo -e`: `\0NNN` octal.
    Echo,
    /// `printf`'s `%b`: `\0NNN` and `\NNN`.
    Bexpand,
    /// `printf`'s format: `\NNN`, no `\c`.
    Format,
}

/// Backslash escapes into `out`; true when `\c` stops all output.
fn unescape(s: &[u8], mode: Escapes, out: &mut Vec<u8>) -> bool {
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c != b'\\' || i + 1 >= s.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let e = s[i + 1];
        i += 2;
        let simple = match e {
            b'a' => Some(7),
            b'b' => Some(8),
            b'e' | b'E' => Some(27),
            b'f' => Some(12),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(11),
            b'\\' => Some(b'\\'),
            b'"' | b'\'' | b'?' if mode == Escapes::Format => Some(e),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            continue;
        }
        match e {
            b'c' if mode != Escapes::Format => return true,
            b'0'..=b'7' => {
                // `\0NNN` (echo, %b) takes up to three digits after the 0;
                // `\NNN` (format, %b) up to three in all.
                let (start, max) = if e == b'0' && mode != Escapes::Format {
                    (i, 3)
                } else if mode == Escapes::Echo {
                    out.push(b'\\');
                    out.push(e);
                    continue;
                } else {
                    (i - 1, 3)
                };
                let mut v: u32 = 0;
                let mut j = start;
                while j < s.len() && j < start + max && (b'0'..=b'7').contains(&s[j]) {
                    v = v * 8 + u32::from(s[j] - b'0');
                    j += 1;
                }
                out.push((v & 0xff) as u8);
                i = j;
            }
            b'x' => {
                let mut v: u32 = 0;
                let mut j = i;
                while j < s.len() && j < i + 2 && s[j].is_ascii_hexdigit() {
                    v = v * 16 + (s[j] as char).to_digit(16).unwrap_or(0);
                    j += 1;
                }
                if j == i {
                    out.extend_from_slice(b"\\x");
                } else {
                    out.push(v as u8);
                    i = j;
                }
            }
            b'u' | b'U' => {
                let max = if e == b'u' { 4 } else { 8 };
                let mut v: u32 = 0;
                let mut j = i;
                while j < s.len() && j < i + max && s[j].is_ascii_hexdigit() {
                    v = v * 16 + (s[j] as char).to_digit(16).unwrap_or(0);
                    j += 1;
                }
                if j == i {
                    out.push(b'\\');
                    out.push(e);
                } else {
                    let ch = char::from_u32(v).unwrap_or('?');
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    i = j;
                }
            }
            _ => {
                out.push(b'\\');
                out.push(e);
            }
        }
    }
    false
}

/// An integer argument as bash's printf reads it; the error when it is
/// not one (the value is then what could be read).
fn int_arg(a: &str) -> (i64, Option<String>) {
    let bytes = a.as_bytes();
    if let Some(&q) = bytes.first()
        && (q == b'\'' || q == b'"')
    {
        return (a[1..].chars().next().map_or(0, |c| c as i64), None);
    }
    let t = a.trim_start_matches([' ', '\t', '\n']);
    if t.is_empty() {
        return if a.is_empty() {
            (0, None)
        } else {
            (0, Some(format!("printf: {a}: invalid number")))
        };
    }
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (base, digits) =
        if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            (16, h)
        } else if body.starts_with('0') {
            (8, body)
        } else {
            (10, body)
        };
    let mut v: i64 = 0;
    let mut n = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(base) else { break };
        v = v.wrapping_mul(i64::from(base)).wrapping_add(i64::from(d));
        n += 1;
    }
    let v = if neg { v.wrapping_neg() } else { v };
    if n == 0 || n < digits.chars().count() {
        return (v, Some(format!("printf: {a}: invalid number")));
    }
    (v, None)
}

fn float_arg(a: &str) -> (f64, Option<String>) {
    if let Some(&q) = a.as_bytes().first()
        && (q == b'\'' || q == b'"')
    {
        return (a[1..].chars().next().map_or(0.0, |c| c as u32 as f64), None);
    }
    let t = a.trim_start_matches([' ', '\t', '\n']);
    if t.is_empty() {
        return if a.is_empty() {
            (0.0, None)
        } else {
            (0.0, Some(format!("printf: {a}: invalid number")))
        };
    }
    if let Ok(v) = t.parse::<f64>() {
        return (v, None);
    }
    if t.starts_with("0x") || t.starts_with("-0x") {
        let (v, e) = int_arg(t);
        return (v as f64, e);
    }
    for end in (1..t.len()).rev() {
        if t.is_char_boundary(end)
            && let Ok(v) = t[..end].parse::<f64>()
        {
            return (v, Some(format!("printf: {a}: invalid number")));
        }
    }
    (0.0, Some(format!("printf: {a}: invalid number")))
}

#[derive(Default)]
struct Spec {
    minus: bool,
    plus: bool,
    space: bool,
    hash: bool,
    zero: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

fn pad(spec: &Spec, body: &str, out: &mut Vec<u8>) {
    let w = spec.width.unwrap_or(0);
    let len = body.chars().count();
    if len >= w {
        out.extend_from_slice(body.as_bytes());
    } else if spec.minus {
        out.extend_from_slice(body.as_bytes());
        out.extend(std::iter::repeat_n(b' ', w - len));
    } else {
        out.extend(std::iter::repeat_n(b' ', w - len));
        out.extend_from_slice(body.as_bytes());
    }
}

/// A number's sign/prefix and digits, padded as C's printf pads them.
fn pad_number(spec: &Spec, prefix: &str, digits: &str, zero_ok: bool, out: &mut Vec<u8>) {
    let w = spec.width.unwrap_or(0);
    let len = prefix.len() + digits.len();
    if spec.zero && !spec.minus && zero_ok && len < w {
        let mut s = String::from(prefix);
        s.extend(std::iter::repeat_n('0', w - len));
        s.push_str(digits);
        out.extend_from_slice(s.as_bytes());
    } else {
        pad(spec, &format!("{prefix}{digits}"), out);
    }
}

/// `%e` with C's exponent (`e+05`).
fn c_exp(v: f64, prec: usize, upper: bool) -> String {
    let s = format!("{v:.prec$e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    let r = format!("{m}e{sign}{:02}", e.abs());
    if upper { r.to_uppercase() } else { r }
}

fn c_float(conv: char, spec: &Spec, v: f64) -> String {
    let upper = conv.is_ascii_uppercase();
    if !v.is_finite() {
        let s = if v.is_nan() {
            "nan".to_string()
        } else if v < 0.0 {
            "-inf".to_string()
        } else {
            "inf".to_string()
        };
        return if upper { s.to_uppercase() } else { s };
    }
    let prec = spec.prec.unwrap_or(6);
    match conv.to_ascii_lowercase() {
        'f' => {
            let s = format!("{v:.prec$}");
            if spec.hash && prec == 0 {
                format!("{s}.")
            } else {
                s
            }
        }
        'e' => c_exp(v, prec, upper),
        _ => {
            let p = if prec == 0 { 1 } else { prec };
            let e = c_exp(v, p - 1, false);
            let x: i32 = e
                .rsplit_once('e')
                .and_then(|(_, x)| x.parse().ok())
                .unwrap_or(0);
            let mut s = if (p as i32) > x && x >= -4 {
                let fp = (p as i32 - 1 - x).max(0) as usize;
                format!("{v:.fp$}")
            } else {
                c_exp(v, p - 1, upper)
            };
            if !spec.hash {
                let (mant, exp) = match s.find(['e', 'E']) {
                    Some(i) => (s[..i].to_string(), s[i..].to_string()),
                    None => (s.clone(), String::new()),
                };
                let mant = if mant.contains('.') {
                    mant.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    mant
                };
                s = format!("{mant}{exp}");
            }
            s
        }
    }
}

/// bash's `%q`: a word the shell reads back as the same text.
fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    if s.chars().any(|c| c.is_control()) {
        let mut out = String::from("$'");
        for c in s.chars() {
            match c {
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\x1b' => out.push_str("\\E"),
                '\x0c' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\x0b' => out.push_str("\\v"),
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                c if c.is_control() => out.push_str(&format!("\\{:03o}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('\'');
        return out;
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        let special = matches!(
            c,
            ' ' | '\t'
                | '\n'
                | '\''
                | '"'
                | '\\'
                | '|'
                | '&'
                | ';'
                | '('
                | ')'
                | '<'
                | '>'
                | '!'
                | '{'
                | '}'
                | '*'
                | '['
                | ']'
                | '?'
                | '^'
                | '$'
                | '`'
                | ','
        ) || (i == 0 && matches!(c, '~' | '#'));
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Where printf is in its format and its arguments.
struct Cursor<'a> {
    f: &'a [u8],
    format: &'a str,
    args: &'a [String],
    i: usize,
    next: usize,
    consumed: bool,
    st: i32,
}

impl Cursor<'_> {
    /// A width or precision: digits, or `*` (the next argument).
    fn number(&mut self) -> Option<usize> {
        if self.f.get(self.i) == Some(&b'*') {
            self.i += 1;
            let a = self.args.get(self.next).map(String::as_str).unwrap_or("");
            if self.next < self.args.len() {
                self.consumed = true;
            }
            self.next += 1;
            let (v, e) = int_arg(a);
            if let Some(e) = e {
                say(&e);
                self.st = 1;
            }
            return Some(v as usize);
        }
        let s = self.i;
        while self.f.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        (self.i > s).then(|| self.format[s..self.i].parse().unwrap_or(0))
    }
}

/// Runs a printf format over its arguments, reusing the format while
/// arguments are left; the output and the status. `direct`: the output
/// goes to standard output (not `-v`) and is written after each pass of the
/// format, as bash's is, so a pass's complaints come before its output and
/// after the previous pass's.
fn printf_format(format: &str, args: &[String], direct: bool) -> (Vec<u8>, i32) {
    let mut out = Vec::new();
    let mut st = 0;
    let mut next = 0;
    let f = format.as_bytes();
    loop {
        let mut consumed = false;
        let mut i = 0;
        while i < f.len() {
            let c = f[i];
            if c == b'\\' {
                // One escape at a time.
                let mut j = i + 1;
                if j < f.len() {
                    let e = f[j];
                    j += 1;
                    let max = match e {
                        b'0'..=b'7' => 2,
                        b'x' => 2,
                        b'u' => 4,
                        b'U' => 8,
                        _ => 0,
                    };
                    let mut k = 0;
                    while k < max
                        && j < f.len()
                        && (if matches!(e, b'0'..=b'7') {
                            (b'0'..=b'7').contains(&f[j])
                        } else {
                            f[j].is_ascii_hexdigit()
                        })
                    {
                        j += 1;
                        k += 1;
                    }
                }
                unescape(&f[i..j], Escapes::Format, &mut out);
                i = j;
                continue;
            }
            if c != b'%' {
                out.push(c);
                i += 1;
                continue;
            }
            i += 1;
            if f.get(i) == Some(&b'%') {
                out.push(b'%');
                i += 1;
                continue;
            }
            let mut spec = Spec::default();
            while let Some(&fl) = f.get(i) {
                match fl {
                    b'-' => spec.minus = true,
                    b'+' => spec.plus = true,
                    b' ' => spec.space = true,
                    b'#' => spec.hash = true,
                    b'0' => spec.zero = true,
                    b'\'' => {}
                    _ => break,
                }
                i += 1;
            }
            let mut cur = Cursor {
                f,
                format,
                args,
                i,
                next,
                consumed,
                st,
            };
            spec.width = cur.number();
            if let Some(w) = spec.width
                && (w as i64) < 0
            {
                spec.minus = true;
                spec.width = Some((w as i64).unsigned_abs() as usize);
            }
            if f.get(cur.i) == Some(&b'.') {
                cur.i += 1;
                spec.prec = Some(cur.number().unwrap_or(0));
            }
            (i, next, consumed, st) = (cur.i, cur.next, cur.consumed, cur.st);
            while f.get(i).is_some_and(|c| b"hlLjzt".contains(c)) {
                i += 1;
            }
            let Some(&conv) = f.get(i) else {
                say("printf: `%': missing format character");
                return (out, 1);
            };
            i += 1;
            let arg = args.get(next).cloned();
            if arg.is_some() {
                consumed = true;
            }
            let conv = conv as char;
            if !"diouxXcsbqeEfFgGaA".contains(conv) {
                say(&format!("printf: `{conv}': invalid format character"));
                return (out, 1);
            }
            next += 1;
            let a = arg.unwrap_or_default();
            match conv {
                's' => {
                    let s: String = match spec.prec {
                        Some(p) => a.chars().take(p).collect(),
                        None => a,
                    };
                    pad(&spec, &s, &mut out);
                }
                'q' => pad(&spec, &shell_quote(&a), &mut out),
                'b' => {
                    let mut b = Vec::new();
                    let stop = unescape(a.as_bytes(), Escapes::Bexpand, &mut b);
                    let s = String::from_utf8_lossy(&b).into_owned();
                    let s: String = match spec.prec {
                        Some(p) => s.chars().take(p).collect(),
                        None => s,
                    };
                    pad(&spec, &s, &mut out);
                    if stop {
                        return (out, st);
                    }
                }
                'c' => {
                    let ch = a.chars().next();
                    match ch {
                        Some(ch) => pad(&spec, &ch.to_string(), &mut out),
                        None => {
                            let w = spec.width.unwrap_or(1).max(1);
                            if !spec.minus {
                                out.extend(std::iter::repeat_n(b' ', w - 1));
                            }
                            out.push(0);
                            if spec.minus {
                                out.extend(std::iter::repeat_n(b' ', w - 1));
                            }
                        }
                    }
                }
                'd' | 'i' | 'o' | 'u' | 'x' | 'X' => {
                    let (v, e) = int_arg(&a);
                    if let Some(e) = e {
                        say(&e);
                        st = 1;
                    }
                    let (mut prefix, mut digits) = match conv {
                        'd' | 'i' => {
                            let sign = if v < 0 {
                                "-"
                            } else if spec.plus {
                                "+"
                            } else if spec.space {
                                " "
                            } else {
                                ""
                            };
                            (sign.to_string(), v.unsigned_abs().to_string())
                        }
                        'o' => (String::new(), format!("{:o}", v as u64)),
                        'u' => (String::new(), (v as u64).to_string()),
                        'x' => (String::new(), format!("{:x}", v as u64)),
                        _ => (String::new(), format!("{:X}", v as u64)),
                    };
                    if let Some(p) = spec.prec {
                        if p == 0 && v == 0 {
                            digits.clear();
                        }
                        while digits.len() < p {
                            digits.insert(0, '0');
                        }
                    }
                    if spec.hash && v != 0 {
                        match conv {
                            'o' if !digits.starts_with('0') => digits.insert(0, '0'),
                            'x' => prefix.push_str("0x"),
                            'X' => prefix.push_str("0X"),
                            _ => {}
                        }
                    }
                    pad_number(&spec, &prefix, &digits, spec.prec.is_none(), &mut out);
                }
                _ => {
                    let (v, e) = float_arg(&a);
                    if let Some(e) = e {
                        say(&e);
                        st = 1;
                    }
                    let lower = match conv {
                        'a' | 'A' => 'e',
                        c => c,
                    };
                    let body = c_float(lower, &spec, v.abs());
                    let sign = if v.is_sign_negative() && !v.is_nan() {
                        "-"
                    } else if spec.plus {
                        "+"
                    } else if spec.space {
                        " "
                    } else {
                        ""
                    };
                    pad_number(&spec, sign, &body, v.is_finite(), &mut out);
                }
            }
        }
        if direct {
            write_fd(1, &out);
            out.clear();
        }
        if !consumed || next >= args.len() {
            break;
        }
    }
    (out, st)
}

/// `umask [-p] [-S] [MODE]`: prints the mask (octal, `-S` symbolic, `-p`
/// as a command), or sets it from an octal MODE. Symbolic modes are not
/// read: the message says to write the octal form.
fn umask(args: &[String]) -> i32 {
    let (mut symbolic, mut as_command, mut mode) = (false, false, None);
    for a in args {
        match a.as_str() {
            "-S" => symbolic = true,
            "-p" => as_command = true,
            "--" => {}
            m if mode.is_none() && !m.starts_with('-') => mode = Some(m),
            m => {
                say(&format!(
                    "umask: {m}: invalid option\numask: usage: umask [-p] [-S] [mode]"
                ));
                return 2;
            }
        }
    }
    if let Some(m) = mode {
        if !m.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            if m.bytes().any(|b| b.is_ascii_digit()) {
                say(&format!("umask: {m}: octal number out of range"));
            } else {
                say(&format!(
                    "umask: {m}: symbolic modes are not supported; write the octal mask (umask 022)"
                ));
            }
            return 1;
        }
        match u32::from_str_radix(m, 8) {
            Ok(v) if v <= 0o777 => {
                // SAFETY: umask cannot fail.
                unsafe { libc::umask(v as libc::mode_t) };
                return 0;
            }
            _ => {
                say(&format!("umask: {m}: octal number out of range"));
                return 1;
            }
        }
    }
    // SAFETY: umask reads by setting; the old mask is put back at once.
    let cur = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m as u32
    };
    let text = if symbolic {
        let who = |shift: u32| {
            let allowed = !(cur >> shift) & 7;
            let mut s = String::new();
            for (bit, c) in [(4, 'r'), (2, 'w'), (1, 'x')] {
                if allowed & bit != 0 {
                    s.push(c);
                }
            }
            s
        };
        format!("u={},g={},o={}", who(6), who(3), who(0))
    } else {
        format!("{cur:04o}")
    };
    let line = if as_command {
        format!("umask {}{text}\n", if symbolic { "-S " } else { "" })
    } else {
        format!("{text}\n")
    };
    print_out(&line)
}

/// The resources `ulimit` knows: option, description as bash prints it
/// with `-a`, the resource, and the unit its values are shown in.
const ULIMITS: &[(char, &str, libc::__rlimit_resource_t, u64)] = &[
    (
        'c',
        "core file size              (blocks, -c)",
        libc::RLIMIT_CORE,
        1024,
    ),
    (
        'd',
        "data seg size               (kbytes, -d)",
        libc::RLIMIT_DATA,
        1024,
    ),
    (
        'f',
        "file size                   (blocks, -f)",
        libc::RLIMIT_FSIZE,
        1024,
    ),
    (
        'l',
        "max locked memory           (kbytes, -l)",
        libc::RLIMIT_MEMLOCK,
        1024,
    ),
    (
        'm',
        "max memory size             (kbytes, -m)",
        libc::RLIMIT_RSS,
        1024,
    ),
    (
        'n',
        "open files                          (-n)",
        libc::RLIMIT_NOFILE,
        1,
    ),
    (
        's',
        "stack size                  (kbytes, -s)",
        libc::RLIMIT_STACK,
        1024,
    ),
    (
        't',
        "cpu time                   (seconds, -t)",
        libc::RLIMIT_CPU,
        1,
    ),
    (
        'u',
        "max user processes                  (-u)",
        libc::RLIMIT_NPROC,
        1,
    ),
    (
        'v',
        "virtual memory              (kbytes, -v)",
        libc::RLIMIT_AS,
        1024,
    ),
];

/// `ulimit [-HS] [-a | -cdflmnstuv [LIMIT]]`: prints a limit of the run
/// (the soft one unless -H), or lowers it. The run's own limits are its
/// hard limits, so nothing here can raise one past what the policy set:
/// the kernel refuses, and the message says so.
fn ulimit(args: &[String]) -> i32 {
    let (mut hard, mut soft, mut all) = (false, false, false);
    // The first resource named (bash prints each; one is what scripts ask).
    let mut which: Option<char> = None;
    let mut value: Option<&str> = None;
    for a in args {
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
            for f in flags.chars() {
                match f {
                    'H' => hard = true,
                    'S' => soft = true,
                    'a' => all = true,
                    c if ULIMITS.iter().any(|u| u.0 == c) => {
                        which.get_or_insert(c);
                    }
                    c => {
                        say(&format!("ulimit: -{c}: invalid option"));
                        return 2;
                    }
                }
            }
        } else if value.is_none() {
            value = Some(a);
        } else {
            say(&format!("ulimit: {a}: too many arguments"));
            return 2;
        }
    }
    let get = |r| {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit into a local struct.
        unsafe { libc::getrlimit(r, &mut l) };
        l
    };
    let show = |v: libc::rlim_t, unit: u64| {
        if v == libc::RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            (v / unit).to_string()
        }
    };
    if all {
        let mut out = String::new();
        for &(_, what, r, unit) in ULIMITS {
            let l = get(r);
            let v = if hard { l.rlim_max } else { l.rlim_cur };
            out.push_str(&format!("{what} {}\n", show(v, unit)));
        }
        return print_out(&out);
    }
    let which = which.unwrap_or('f');
    let Some(&(_, what, r, unit)) = ULIMITS.iter().find(|u| u.0 == which) else {
        return 2;
    };
    let name = what.split("  ").next().unwrap_or(what).trim();
    let Some(v) = value else {
        let l = get(r);
        return print_out(&format!(
            "{}\n",
            show(if hard { l.rlim_max } else { l.rlim_cur }, unit)
        ));
    };
    let new = match v {
        "unlimited" => libc::RLIM_INFINITY,
        "hard" => get(r).rlim_max,
        "soft" => get(r).rlim_cur,
        n => match n.parse::<u64>() {
            Ok(n) => n.saturating_mul(unit),
            Err(_) => {
                say(&format!("ulimit: {n}: invalid number"));
                return 1;
            }
        },
    };
    let mut l = get(r);
    // Neither -H nor -S: both, as in bash.
    if hard || !soft {
        l.rlim_max = new;
    }
    if soft || !hard {
        l.rlim_cur = new;
    }
    // SAFETY: setrlimit from a local struct.
    if unsafe { libc::setrlimit(r, &l) } != 0 {
        say(&format!(
            "ulimit: {name}: cannot modify limit: a run may lower its limits, not raise them (the policy's [limits] set them)"
        ));
        return 1;
    }
    0
}

/// Builtins the interpreter runs as scripts or through `exec`, beside
/// `verify::BUILTINS`.
const SCRIPT_BUILTINS: [&str; 4] = ["source", ".", "eval", "exec"];

/// `help [NAME...]`: what this interpreter is, and whether NAME is one of
/// its builtins; bash's manual has the rest.
fn help(args: &[String]) -> i32 {
    if args.is_empty() {
        let mut names: Vec<&str> = verify::BUILTINS.to_vec();
        names.extend(SCRIPT_BUILTINS);
        names.sort_unstable();
        return print_out(&format!(
            "agent-rsh runs this script on its own interpreter, every command checked against the run's policy.\nThese shell builtins are available (bash's manual, SHELL BUILTIN COMMANDS, describes each):\n{}\n",
            names.join(" ")
        ));
    }
    let mut st = 0;
    let mut out = String::new();
    for a in args {
        if verify::BUILTINS.contains(&a.as_str()) || SCRIPT_BUILTINS.contains(&a.as_str()) {
            out.push_str(&format!(
                "{a}: a shell builtin of agent-rsh's interpreter; bash's manual (SHELL BUILTIN COMMANDS) describes it\n"
            ));
        } else {
            say(&format!(
                "help: no help topics match `{a}'.  Try `help help' or `man -k {a}' or `info {a}'."
            ));
            st = 1;
        }
    }
    if print_out(&out) != 0 {
        return 1;
    }
    st
}

fn print_out(text: &str) -> i32 {
    write_fd(1, text.as_bytes());
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pf(f: &str, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        String::from_utf8_lossy(&printf_format(f, &args, false).0).into_owned()
    }

    #[test]
    fn printf_follows_bash() {
        assert_eq!(pf("%0.s-", &["1", "2", "3"]), "---");
        assert_eq!(pf("%s\\n", &["a", "b"]), "a\nb\n");
        assert_eq!(pf("%d %s\\n", &["1"]), "1 \n");
        assert_eq!(
            pf(
                "%5.2f|%e|%g|%g|%g|%G",
                &["3.14159", "1234.5", "0.0001", "1234567", "100", "1e-10"]
            ),
            " 3.14|1.234500e+03|0.0001|1.23457e+06|100|1E-10"
        );
        assert_eq!(
            pf(
                "%x %o %#x %#o %u %5s|%-5s|%.1s",
                &["255", "8", "255", "8", "-1", "ab", "cd", "xyz"]
            ),
            "ff 10 0xff 010 18446744073709551615    ab|cd   |x"
        );
        assert_eq!(
            pf(
                "%i|%5d|%-5d|%05d|%+d|% d|%.3d",
                &["3", "4", "5", "-6", "7", "8", "9"]
            ),
            "3|    4|5    |-0006|+7| 8|009"
        );
        assert_eq!(pf("%b|", &["a\\101b", "\\0101"]), "aAb|A|");
        assert_eq!(pf("\\101\\0101|\\x41", &[]), "A\x081|A");
        assert_eq!(
            pf("%q ", &["a b", "", "~x", "#a", "a#", "a,b"]),
            "a\\ b '' \\~x \\#a a# a\\,b "
        );
        assert_eq!(pf("%d", &["'A"]), "65");
        assert_eq!(pf("%s", &[]), "");
    }

    #[test]
    fn echo_escapes() {
        let mut out = Vec::new();
        assert!(unescape(
            b"a\\101\\0101\\x41\\c zz",
            Escapes::Echo,
            &mut out
        ));
        assert_eq!(out, b"a\\101AA");
    }
}
