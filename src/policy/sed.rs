//! A sed script read as GNU sed reads it, for the rules a regex cannot
//! express: which commands run a program (`e`, the `e` flag of `s`) and
//! which files it writes (`w`, `W`, the `w` flag of `s`). Delimiters may be
//! any character (`s|a|b|e`, `\,x,w file`), commands need no space before
//! their argument (`1eid`), and addresses take flags (`/x/Ie id`), so the
//! script is read command by command. A script this reader cannot follow
//! is reported as such, and refused by its own rule, rather than guessed.

/// What a script does that the rules judge.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// An `e` command or an `s///e`: runs a program.
    pub executes: bool,
    /// The files of `w`, `W` and `s///w`, as written.
    pub writes: Vec<String>,
}

struct Reader<'s> {
    s: &'s [u8],
    i: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// The rest of the line (a file name, an `e` command, a label).
    fn line(&mut self) -> String {
        let start = self.i;
        while self.peek().is_some_and(|c| c != b'\n') {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    /// A label: up to `;` or the end of the line.
    fn label(&mut self) {
        while self.peek().is_some_and(|c| c != b'\n' && c != b';') {
            self.i += 1;
        }
    }

    fn digits(&mut self) -> bool {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i > start
    }

    /// The body of a regex or replacement up to the unescaped `delim`,
    /// which is consumed. In a regex, a bracket expression may hold the
    /// delimiter (GNU sed reads `s/[/]/x/` so); a script where that
    /// matters is not read, as the two readings would differ.
    fn part(&mut self, delim: u8, regex: bool) -> Result<(), ()> {
        loop {
            match self.peek().ok_or(())? {
                b'\\' => self.i += 2,
                b'\n' => return Err(()),
                c if c == delim => {
                    self.i += 1;
                    return Ok(());
                }
                b'[' if regex => {
                    self.i += 1;
                    if self.peek() == Some(b'^') {
                        self.i += 1;
                    }
                    if self.peek() == Some(b']') {
                        self.i += 1;
                    }
                    loop {
                        match self.peek().ok_or(())? {
                            b']' => break,
                            b'\n' => return Err(()),
                            c if c == delim => return Err(()),
                            b'[' if matches!(self.s.get(self.i + 1), Some(b':' | b'.' | b'=')) => {
                                let kind = self.s[self.i + 1];
                                self.i += 2;
                                while !(self.peek().ok_or(())? == kind
                                    && self.s.get(self.i + 1) == Some(&b']'))
                                {
                                    if self.peek() == Some(delim) {
                                        return Err(());
                                    }
                                    self.i += 1;
                                }
                                self.i += 2;
                            }
                            _ => self.i += 1,
                        }
                    }
                    self.i += 1;
                }
                _ => self.i += 1,
            }
        }
    }

    /// An address, if one starts here: a line number (`first~step`), `$`,
    /// `/re/` or `\cREc` with flags; `+N` and `~N` as the second one.
    fn address(&mut self, second: bool) -> Result<bool, ()> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.digits();
                if self.peek() == Some(b'~') {
                    self.i += 1;
                    self.digits();
                }
                Ok(true)
            }
            Some(b'+' | b'~') if second => {
                self.i += 1;
                if !self.digits() {
                    return Err(());
                }
                Ok(true)
            }
            Some(b'$') => {
                self.i += 1;
                Ok(true)
            }
            Some(b'/') => {
                self.i += 1;
                self.part(b'/', true)?;
                self.regex_flags();
                Ok(true)
            }
            Some(b'\\') => {
                let delim = *self.s.get(self.i + 1).ok_or(())?;
                if delim == b'\n' || delim == b'\\' {
                    return Err(());
                }
                self.i += 2;
                self.part(delim, true)?;
                self.regex_flags();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn regex_flags(&mut self) {
        while matches!(self.peek(), Some(b'I' | b'M')) {
            self.i += 1;
        }
    }

    /// `a`, `i`, `c`: text to the end of the line, a backslash-newline
    /// continuing it.
    fn text(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b'\\' => self.i += 2,
                b'\n' => return,
                _ => self.i += 1,
            }
        }
    }
}

/// Reads `script`; None when it is not a script this reader can follow.
pub fn read(script: &str) -> Option<Effects> {
    read_all(script).ok()
}

fn read_all(script: &str) -> Result<Effects, ()> {
    let mut r = Reader {
        s: script.as_bytes(),
        i: 0,
    };
    let mut out = Effects::default();
    loop {
        while matches!(r.peek(), Some(b' ' | b'\t' | b'\n' | b';')) {
            r.i += 1;
        }
        let Some(_) = r.peek() else {
            return Ok(out);
        };
        if r.address(false)? {
            r.blanks();
            if r.peek() == Some(b',') {
                r.i += 1;
                r.blanks();
                if !r.address(true)? {
                    return Err(());
                }
            }
        }
        r.blanks();
        if r.peek() == Some(b'!') {
            r.i += 1;
            r.blanks();
        }
        let cmd = r.peek().ok_or(())?;
        r.i += 1;
        match cmd {
            // A command may follow `{` at once (`/x/{p;d}`).
            b'{' => continue,
            b'}' | b'=' | b'd' | b'D' | b'F' | b'g' | b'G' | b'h' | b'H' | b'n' | b'N' | b'p'
            | b'P' | b'x' | b'z' => {}
            b'#' => {
                r.line();
            }
            b':' | b'b' | b't' | b'T' | b'v' => r.label(),
            b'l' | b'L' | b'q' | b'Q' => {
                r.blanks();
                r.digits();
            }
            b'a' | b'i' | b'c' => r.text(),
            b'r' | b'R' => {
                r.line();
            }
            b'w' | b'W' => {
                r.blanks();
                out.writes.push(r.line());
            }
            b'e' => {
                out.executes = true;
                r.line();
            }
            b's' | b'y' => {
                let delim = r.peek().ok_or(())?;
                if delim == b'\n' || delim == b'\\' {
                    return Err(());
                }
                r.i += 1;
                r.part(delim, cmd == b's')?;
                r.part(delim, false)?;
                if cmd == b's' {
                    loop {
                        match r.peek() {
                            Some(b'g' | b'p' | b'i' | b'I' | b'm' | b'M') => r.i += 1,
                            Some(c) if c.is_ascii_digit() => r.i += 1,
                            Some(b'e') => {
                                out.executes = true;
                                r.i += 1;
                            }
                            Some(b'w') => {
                                r.i += 1;
                                r.blanks();
                                out.writes.push(r.line());
                            }
                            _ => break,
                        }
                    }
                }
            }
            _ => return Err(()),
        }
        r.blanks();
        match r.peek() {
            None | Some(b';' | b'\n' | b'}' | b'#') => {}
            Some(_) => return Err(()),
        }
    }
}

/// Files sed writes to without a path: its own output streams.
fn stream(file: &str) -> bool {
    matches!(file, "/dev/stdout" | "/dev/stderr")
}

/// The script runs a program (`e`, `s///e`).
pub fn executes(script: &str) -> bool {
    read(script).is_some_and(|e| e.executes)
}

/// The script writes a file `outside` judges outside the workspace.
pub fn writes(script: &str, outside: &dyn Fn(&str) -> bool) -> bool {
    read(script).is_some_and(|e| e.writes.iter().any(|f| !stream(f) && outside(f)))
}

/// The script is not one this reader can follow.
pub fn unreadable(script: &str) -> bool {
    read(script).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_that_run_programs_in_every_spelling() {
        for s in [
            "e id",
            "eid",
            "1eid",
            "1e id",
            "$e id",
            "/x/Ie id",
            "/x/ e id",
            r"\,x,e id",
            "s/a/b/e",
            "s|id|id|e",
            "s/a/b/ge",
            "s/a/b/2e",
            "1!e id",
            "1,3e id",
            "0,/x/e id",
            "1~2e id",
            "/x/,+2e id",
            "p;e id",
            "p\ne id",
            "{e id\n}",
            "/x/{s/a/b/e}",
            "y/ab/cd/;e",
            "a text\ne id",
        ] {
            assert!(executes(s), "{s:?}");
            assert!(!unreadable(s), "{s:?}");
        }
    }

    #[test]
    fn scripts_that_run_nothing() {
        for s in [
            "s/e/f/",
            "s/a/e/g",
            "/e/d",
            r"\,e,d",
            "y/e/f/",
            "a e id",
            "i\\\ne id",
            "c\\\n  e id",
            "# e id",
            "s/a/b/;# e",
            ":e",
            "b e",
            "1~3p",
            "$!N;P;D",
            "s/x/\\/e/",
            "s|a|b\\|e|",
            "/[e]/p",
            "s/[[:alpha:]]/x/g",
            "l 5",
            "q 3",
            "",
            "  ;;  ",
        ] {
            assert!(!executes(s), "{s:?}");
            assert!(!unreadable(s), "{s:?}");
        }
    }

    #[test]
    fn files_written_in_every_spelling() {
        let w = |s: &str| read(s).unwrap().writes;
        assert_eq!(w("w out"), ["out"]);
        assert_eq!(w("wout"), ["out"]);
        assert_eq!(w("1w /tmp/x"), ["/tmp/x"]);
        assert_eq!(w("/x/Iw /tmp/v"), ["/tmp/v"]);
        assert_eq!(w(r"\,x,w /tmp/v"), ["/tmp/v"]);
        assert_eq!(w("s|x|y|w /tmp/v"), ["/tmp/v"]);
        assert_eq!(w("s/x/y/gw .git/config"), [".git/config"]);
        assert_eq!(
            w("W /tmp/a;p"),
            ["/tmp/a;p"],
            "the name runs to the newline"
        );
        assert_eq!(w("p\nw a\nw b"), ["a", "b"]);
        assert!(w("s/w/x/").is_empty());
        let outside = |f: &str| f.starts_with('/') || f.starts_with(".git");
        assert!(writes("s/a/b/w .git/config", &outside));
        assert!(!writes("w /dev/stdout", &outside));
        assert!(!writes("w out.txt", &outside));
    }

    #[test]
    fn what_cannot_be_followed_is_unreadable() {
        for s in [
            "s/a/b",
            "s/a",
            "k",
            "p x",
            "1,",
            "s\\a\\b\\",
            "/x",
            "s/[/]/",
            // GNU sed reads this as one s command (the delimiter inside a
            // bracket); this reader refuses the case rather than guess.
            r"s/[/]/x/e",
        ] {
            assert!(unreadable(s), "{s:?}");
        }
    }
}
