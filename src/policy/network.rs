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

    /// Whether the program named `name` (a path's last component counts)
    /// may reach the proxy: always without `commands`.
    pub fn grants(&self, name: &str) -> bool {
        let Some(d) = &self.domains else {
            return false;
        };
        let base = name.rsplit('/').next().unwrap_or(name);
        match &d.commands {
            None => true,
            Some(list) => list.iter().any(|c| c == base),
        }
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
        assert!(p.network.grants("pip"));
        assert!(p.network.grants("/work/.venv/bin/pip"));
        assert!(!p.network.grants("python3"));
        let g = p.network.grant().unwrap();
        assert_eq!(g.resolve.len(), 1);
        // Round trip through the policy's own rendering.
        let again = parse(&p.to_toml()).unwrap();
        assert_eq!(again.network, p.network);
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
