//! `network`: a level (`"none"`, `"loopback"`, `"allow"`) or a list of
//! domains (`{ allow = [...], commands = [...], resolve = {...} }`).
//!
//! A domain list gives the run its own network namespace whose one way out
//! is agent-rsh's proxy, listening at `PROXY_PORT` on 127.0.0.1 inside that
//! namespace and served from outside it (the `proxy` room); `commands`
//! limits which programs may reach even the proxy, by a Landlock layer per
//! command.

use super::Network;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where the proxy listens inside the run's network namespace: the
/// namespace is the run's own, so a fixed port is always free, and the
/// variables that name it can be built before the namespace exists.
pub const PROXY_PORT: u16 = 3128;

/// The policy's `network` key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkSetting {
    /// `Network::Domains` exactly when `domains` is set.
    pub level: Network,
    pub domains: Option<Domains>,
}

/// `network = { allow = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Domains {
    /// Host names (`pypi.org`) and `*.` suffixes (`*.crates.io`: the names
    /// under it, not itself), each with an optional `:PORT`; without one,
    /// ports 443 and 80.
    pub allow: Vec<String>,
    /// When set, only these programs (by name, as the first word names
    /// them or as a script runs them) may reach the proxy; every other
    /// command of the run gets no TCP connection at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Names pinned to an address and port, as `curl --resolve` pins
    /// them; a pinned address is allowed even when private or loopback.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolve: BTreeMap<String, String>,
}

impl NetworkSetting {
    pub fn level(level: Network) -> NetworkSetting {
        NetworkSetting {
            level,
            domains: None,
        }
    }

    /// Whether the program about to be executed at `program` may reach
    /// the proxy: always without `commands`. With `commands`, by what the
    /// file is, never by the name it runs under: the file a listed name
    /// resolves to on `search_path` (a link to it counts, a link named
    /// `pip` to python3 does not), or a listed entry point of a Python
    /// virtual environment (`venv` below).
    pub fn grants_program(&self, search_path: &[PathBuf], program: &Path) -> bool {
        let Some(d) = &self.domains else {
            return false;
        };
        let Some(list) = &d.commands else {
            return true;
        };
        let Ok(real) = std::fs::canonicalize(program) else {
            return false;
        };
        let listed = |name: &str| list.iter().any(|c| c == name);
        let resolves_to = |name: &String| {
            search_path
                .iter()
                .any(|dir| std::fs::canonicalize(dir.join(name)).is_ok_and(|p| p == real))
        };
        list.iter().any(resolves_to)
            || real
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| listed(n) && venv_entry_point(&real))
    }

    /// Whether commands are scoped one by one (`commands` is set).
    pub fn per_command(&self) -> bool {
        self.domains.as_ref().is_some_and(|d| d.commands.is_some())
    }

    /// What the proxy admits.
    pub fn grant(&self) -> Option<crate::proxy::Grant> {
        let d = self.domains.as_ref()?;
        Some(crate::proxy::Grant {
            allow: d.allow.clone(),
            resolve: d
                .resolve
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
                .collect(),
        })
    }

    /// Checks what serde cannot: entries, pins and program names.
    pub fn validate(&self) -> Result<(), NetworkError> {
        let Some(d) = &self.domains else {
            return Ok(());
        };
        if d.allow.is_empty() {
            return Err(NetworkError::EmptyAllow);
        }
        for e in &d.allow {
            crate::proxy::Grant::check_entry(e).map_err(|why| NetworkError::AllowEntry {
                entry: e.clone(),
                why,
            })?;
        }
        for c in d.commands.iter().flatten() {
            if c.is_empty() || c.contains('/') {
                return Err(NetworkError::CommandEntry(c.clone()));
            }
        }
        let g = self.grant().unwrap_or_default();
        for (name, addr) in &d.resolve {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(NetworkError::ResolveAddress {
                    name: name.clone(),
                    addr: addr.clone(),
                });
            }
            let ports = [80, 443].into_iter().chain(
                d.allow
                    .iter()
                    .filter_map(|e| e.rsplit_once(':')?.1.parse().ok()),
            );
            if !ports.into_iter().any(|port| g.admits(name, port)) {
                return Err(NetworkError::ResolveUnlisted(name.clone()));
            }
        }
        Ok(())
    }
}

/// A console script of a Python virtual environment (`VENV/bin/pip`):
/// a regular file in `VENV/bin` beside `VENV/pyvenv.cfg` whose `#!` line
/// names that environment's own python, itself a link to an interpreter
/// outside the environment. `python3 -m venv` makes exactly this; pip in
/// it runs the environment's installed code, so a grant to `pip` covers
/// what that environment holds (docs/policy.md, Network by domain).
fn venv_entry_point(real: &Path) -> bool {
    use std::io::Read;
    let Some(bin) = real.parent() else {
        return false;
    };
    let Some(venv) = bin.parent() else {
        return false;
    };
    if bin.file_name().is_none_or(|n| n != "bin") || !venv.join("pyvenv.cfg").is_file() {
        return false;
    }
    let mut head = [0u8; 512];
    let Ok(n) = std::fs::File::open(real).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return false;
    };
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return false;
    };
    let Some(interp) = line.split_whitespace().next().map(Path::new) else {
        return false;
    };
    // The environment's python is a link out of it (`python3 -m venv`
    // without --copies); a python file inside it would be the run's own.
    interp
        .parent()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .is_some_and(|d| d == bin)
        && std::fs::canonicalize(interp).is_ok_and(|p| !p.starts_with(venv))
}

/// Variables that make a program load code other than its own: a program
/// `network.commands` grants gets none of them from the run, so the run
/// cannot lend that program's network to code of its own
/// (`PYTHONPATH=. pip` would import `./sitecustomize.py` inside pip).
pub const CODE_LOADING_ENV: &[&str] = &[
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONEXECUTABLE",
    "PYTHONPLATLIBDIR",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "PERL5LIB",
    "PERLLIB",
    "PERL5OPT",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "GCONV_PATH",
    "BASH_ENV",
    "ENV",
];

/// The environment of a program `network.commands` grants: without the
/// code-loading variables, and without Python's per-user site directory
/// (the run can write `.pth` files into `$HOME/.local`, which Python
/// executes at start).
pub fn granted_env<'a>(
    env: impl IntoIterator<Item = &'a (String, String)>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| !CODE_LOADING_ENV.contains(&k.as_str()) && k != "PYTHONNOUSERSITE")
        .cloned()
        .collect();
    out.push(("PYTHONNOUSERSITE".into(), "1".into()));
    out
}

/// A network setting that parses but does not make sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    #[error(
        "network.allow is empty: list the hosts the run may reach (\"pypi.org\", \"*.crates.io\"), or write network = \"none\""
    )]
    EmptyAllow,
    #[error("network.allow entry {entry:?}: {why}")]
    AllowEntry {
        entry: String,
        why: crate::proxy::AddrError,
    },
    #[error("network.commands entry {0:?} must be a bare program name (\"pip\", \"npm\")")]
    CommandEntry(String),
    #[error(
        "network.resolve.{name} = {addr:?} is not an address and port (\"10.0.0.5:8080\", \"[::1]:443\")"
    )]
    ResolveAddress { name: String, addr: String },
    #[error(
        "network.resolve pins {0:?}, which network.allow does not list: add it to allow (a pin says where a name goes, allow says whether it may)"
    )]
    ResolveUnlisted(String),
}

impl Serialize for NetworkSetting {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.domains {
            Some(d) => d.serialize(s),
            None => self.level.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for NetworkSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NetworkSetting;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "\"none\", \"loopback\", \"allow\", or a table { allow = [\"pypi.org\", ...] }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NetworkSetting, E> {
                let level = match v {
                    "none" => Network::None,
                    "loopback" => Network::Loopback,
                    "allow" => Network::Allow,
                    _ => {
                        return Err(E::invalid_value(de::Unexpected::Str(v), &self));
                    }
                };
                Ok(NetworkSetting::level(level))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<NetworkSetting, A::Error> {
                let d = Domains::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(NetworkSetting {
                    level: Network::Domains,
                    domains: Some(d),
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Source};

    fn parse(text: &str) -> Result<Policy, crate::policy::PolicyError> {
        Policy::parse(text, Source::Embedded)
    }

    #[test]
    fn levels_and_domain_lists_parse() {
        for (text, level) in [
            ("network = \"none\"", Network::None),
            ("network = \"loopback\"", Network::Loopback),
            ("network = \"allow\"", Network::Allow),
            (
                "network = { allow = [\"pypi.org\", \"*.crates.io\", \"mirror.internal:8080\"] }",
                Network::Domains,
            ),
        ] {
            let p = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(p.network.level, level, "{text}");
        }
        let p = parse(
            "network = { allow = [\"pkg.test\"], commands = [\"pip\"], resolve = { \"pkg.test\" = \"127.0.0.1:8080\" } }",
        )
        .unwrap();
        assert!(p.network.per_command());
        let g = p.network.grant().unwrap();
        assert_eq!(g.resolve.len(), 1);
        // Round trip through the policy's own rendering.
        let again = parse(&p.to_toml()).unwrap();
        assert_eq!(again.network, p.network);
    }

    #[test]
    fn network_commands_grant_a_program_by_what_it_is_not_by_its_name() {
        use std::os::unix::fs::symlink;
        let p = parse("network = { allow = [\"pkg.test\"], commands = [\"pip\"] }").unwrap();
        let t = tempfile::tempdir().unwrap();
        let (sys, ws) = (t.path().join("usr/bin"), t.path().join("ws"));
        std::fs::create_dir_all(&sys).unwrap();
        std::fs::create_dir_all(ws.join("b")).unwrap();
        std::fs::write(sys.join("pip"), "#!/usr/bin/python3\n").unwrap();
        std::fs::write(sys.join("python3"), "").unwrap();
        let search = [sys.clone()];
        let grants = |path: &Path| p.network.grants_program(&search, path);
        assert!(grants(&sys.join("pip")));
        assert!(!grants(&sys.join("python3")));
        // A link is what it points at.
        symlink(sys.join("python3"), ws.join("b/pip")).unwrap();
        assert!(!grants(&ws.join("b/pip")));
        symlink(sys.join("pip"), ws.join("b/mypip")).unwrap();
        assert!(grants(&ws.join("b/mypip")));
        // A file the run wrote and named pip is not pip.
        std::fs::write(ws.join("pip"), "#!/usr/bin/python3\n").unwrap();
        assert!(!grants(&ws.join("pip")));
        // A venv's console script, as `python3 -m venv` lays it out.
        let venv = ws.join(".venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        symlink(sys.join("python3"), venv.join("bin/python")).unwrap();
        let script = format!("#!{}/bin/python\nimport pip\n", venv.display());
        std::fs::write(venv.join("bin/pip"), &script).unwrap();
        assert!(!grants(&venv.join("bin/pip")), "no pyvenv.cfg: not a venv");
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        assert!(grants(&venv.join("bin/pip")));
        std::fs::write(venv.join("bin/pip2"), &script).unwrap();
        assert!(
            !grants(&venv.join("bin/pip2")),
            "a name the list does not hold"
        );
        // Its python a file of the run's own, not a link out: refused.
        std::fs::remove_file(venv.join("bin/python")).unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        assert!(!grants(&venv.join("bin/pip")));
        // No `commands`: every program; no domain list: none.
        let all = parse("network = { allow = [\"pkg.test\"] }").unwrap();
        assert!(all.network.grants_program(&search, &sys.join("python3")));
        let none = parse("network = \"none\"").unwrap();
        assert!(!none.network.grants_program(&search, &sys.join("pip")));
    }

    #[test]
    fn a_granted_program_gets_no_code_loading_variable() {
        let env: Vec<(String, String)> = [
            ("PATH", "/usr/bin"),
            ("PYTHONPATH", "."),
            ("OPENSSL_CONF", "x"),
            ("NODE_OPTIONS", "--require ./x.js"),
            ("PYTHONNOUSERSITE", ""),
            ("PIP_INDEX_URL", "http://pkg.test/simple"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let out = granted_env(&env);
        let names: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "PIP_INDEX_URL", "PYTHONNOUSERSITE"]);
        assert_eq!(out[2].1, "1");
    }

    #[test]
    fn bad_network_settings_say_what_to_write() {
        for (text, needle) in [
            (
                "network = \"some\"",
                "\"none\", \"loopback\", \"allow\", or a table",
            ),
            ("network = { allow = [] }", "network.allow is empty"),
            (
                "network = { allow = [\"https://pypi.org\"] }",
                "https://pypi.org",
            ),
            ("network = { alow = [\"pypi.org\"] }", "unknown field"),
            (
                "network = { allow = [\"pypi.org\"], commands = [\"/usr/bin/pip\"] }",
                "bare program name",
            ),
            (
                "network = { allow = [\"pypi.org\"], resolve = { \"pypi.org\" = \"nowhere\" } }",
                "not an address and port",
            ),
            (
                "network = { allow = [\"pypi.org\"], resolve = { \"other.test\" = \"127.0.0.1:80\" } }",
                "which network.allow does not list",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
