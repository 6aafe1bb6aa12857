//! `set -e`, `set -u`, `set -f`, `set -o pipefail`: the shell options
//! agent-rsh's interpreter supports.

use crate::check::Denial;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    pub errexit: bool,
    pub nounset: bool,
    pub pipefail: bool,
    /// `set -f`: no pathname expansion.
    #[serde(default)]
    pub noglob: bool,
    /// `set -x`: each command is printed on standard error, after
    /// expansion, before it runs.
    #[serde(default)]
    pub xtrace: bool,
    /// `set -a`: every variable assigned is exported (and screened as an
    /// exported name is).
    #[serde(default)]
    pub allexport: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    Errexit,
    Nounset,
    Pipefail,
    Noglob,
    Xtrace,
    Allexport,
}

impl Options {
    pub fn apply(&mut self, changes: &[(Opt, bool)]) {
        for &(o, on) in changes {
            match o {
                Opt::Errexit => self.errexit = on,
                Opt::Nounset => self.nounset = on,
                Opt::Pipefail => self.pipefail = on,
                Opt::Noglob => self.noglob = on,
                Opt::Xtrace => self.xtrace = on,
                Opt::Allexport => self.allexport = on,
            }
        }
    }
}

fn refuse(what: String) -> Denial {
    Denial::new(
        "syntax.unsupported",
        format!("`set {what}` is not supported"),
        "agent-rsh supports set -e, -u, -f, -x, -a, set -o pipefail and set -- ARGS (and the + forms)",
    )
}

fn long(name: &str) -> Option<Opt> {
    match name {
        "errexit" => Some(Opt::Errexit),
        "nounset" => Some(Opt::Nounset),
        "pipefail" => Some(Opt::Pipefail),
        "noglob" => Some(Opt::Noglob),
        "xtrace" => Some(Opt::Xtrace),
        "allexport" => Some(Opt::Allexport),
        _ => None,
    }
}

/// `set [OPTIONS] -- [ARGS]`: the options, and the new positional
/// parameters when `--` is there.
pub fn split_set(args: &[String]) -> (&[String], Option<&[String]>) {
    match args.iter().position(|a| a == "--") {
        Some(k) => (&args[..k], Some(&args[k + 1..])),
        None => (args, None),
    }
}

/// The changes `set ARGS` asks for; on refusal, the index of the argument
/// at fault and why.
pub fn parse_set(args: &[String]) -> Result<Vec<(Opt, bool)>, (usize, Denial)> {
    if args.is_empty() {
        return Err((0, refuse(String::new())));
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let on = match a.as_bytes().first() {
            Some(b'-') => true,
            Some(b'+') => false,
            _ => return Err((i, refuse(a.clone()))),
        };
        let flags = &a[1..];
        if flags.is_empty() || flags == "-" {
            return Err((i, refuse(a.clone())));
        }
        let mut wants_long = 0;
        for f in flags.chars() {
            match f {
                'e' => out.push((Opt::Errexit, on)),
                'u' => out.push((Opt::Nounset, on)),
                'f' => out.push((Opt::Noglob, on)),
                'x' => out.push((Opt::Xtrace, on)),
                'a' => out.push((Opt::Allexport, on)),
                'o' => wants_long += 1,
                _ => return Err((i, refuse(a.clone()))),
            }
        }
        for _ in 0..wants_long {
            i += 1;
            match args.get(i).and_then(|n| long(n)) {
                Some(o) => out.push((o, on)),
                None => {
                    return Err((
                        i.min(args.len() - 1),
                        refuse(format!("{a} {}", args.get(i).map_or("", |s| s.as_str()))),
                    ));
                }
            }
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(args: &[&str]) -> Result<Options, usize> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut o = Options::default();
        o.apply(&parse_set(&args).map_err(|e| e.0)?);
        Ok(o)
    }

    #[test]
    fn forms() {
        let all = Options {
            errexit: true,
            nounset: true,
            pipefail: true,
            noglob: false,
            xtrace: false,
            allexport: false,
        };
        assert_eq!(s(&["-euo", "pipefail"]), Ok(all));
        assert_eq!(s(&["-e", "-u", "-o", "pipefail"]), Ok(all));
        assert_eq!(
            s(&["-o", "errexit", "-o", "nounset", "-o", "pipefail"]),
            Ok(all)
        );
        assert_eq!(s(&["-e", "+e"]), Ok(Options::default()));
        assert_eq!(s(&["-k"]), Err(0));
        assert!(s(&["-a"]).unwrap().allexport);
        assert!(s(&["-x"]).unwrap().xtrace);
        assert!(s(&["-ef"]).unwrap().noglob);
        assert!(!s(&["-o", "noglob", "+f"]).unwrap().noglob);
        assert_eq!(s(&["-e", "--", "a"]), Err(1));
        assert_eq!(s(&["-o"]), Err(0));
        assert_eq!(s(&["-o", "vi"]), Err(1));
        assert_eq!(s(&[]), Err(0));
    }
}
