//! Hosts, ports and `network.allow` entries as text, and which addresses
//! count as public.
//!
//! One parser serves the policy's entries, the run's requests and the TLS
//! server name, so that what the loader accepts and what the proxy
//! compares are the same strings.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a host, a port, an authority or a `network.allow` entry does not
/// parse. Each names the text it refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    #[error("`{0}` is not an IPv6 address")]
    NotIpv6(String),
    /// The text and what is wrong with it as a host name.
    #[error("`{0}` {1}")]
    NotHostName(String, &'static str),
    #[error("`{0}` is not a port number")]
    NotPort(String),
    #[error("port `{0}` is not between 1 and 65535")]
    PortRange(String),
    #[error("`{0}` has no closing `]`")]
    NoClosingBracket(String),
    #[error("`{0}` is not host:port")]
    NotHostPort(String),
    #[error("`{0}`: an IPv6 address needs brackets")]
    Ipv6NeedsBrackets(String),
    #[error("`{0}` has no port")]
    NoPort(String),
    #[error("an empty entry")]
    EmptyEntry,
    #[error("`{0}` is a URL; write only the host name")]
    Url(String),
    #[error("`{0}` contains a space")]
    Space(String),
    #[error("`{0}`: `*.` goes before a host name")]
    WildcardBeforeIp(String),
    #[error("`{0}`: `*` is allowed only as a leading `*.`")]
    Wildcard(String),
}

/// A host as the run (or the policy) named it: names lowercased, a
/// trailing dot dropped; IP literals parsed, so `::1` and `[::1]` are one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// A host without a port: a host name, an IPv4 literal, or an IPv6
    /// literal with or without brackets.
    pub(crate) fn parse(s: &str) -> Result<Host, AddrError> {
        if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(|a| Host::Ip(IpAddr::V6(a)))
                .map_err(|_| AddrError::NotIpv6(s.into()));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        let name = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
        check_name(&name).map_err(|why| AddrError::NotHostName(s.into(), why))?;
        Ok(Host::Name(name))
    }

    /// `host:port`, with brackets around an IPv6 address.
    pub(crate) fn with_port(&self, port: u16) -> String {
        match self {
            Host::Ip(IpAddr::V6(a)) => format!("[{a}]:{port}"),
            h => format!("{h}:{port}"),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// A host name's syntax (already lowercased, no trailing dot).
///
/// The last label must start with a letter: no top-level domain is
/// numeric, and a name like `127.1` or `0x7f000001` would otherwise reach
/// the resolver, which reads it as an address the list never named.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > 253 {
        return Err("is longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("has an empty label");
        }
        if label.len() > 63 {
            return Err("has a label longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err("is not a host name (letters, digits, `-`, `_` and dots)");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("has a label that starts or ends with `-`");
        }
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if !last.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err("is neither a host name nor an IP address");
    }
    Ok(())
}

/// A port in decimal, 1 to 65535.
pub(crate) fn parse_port(s: &str) -> Result<u16, AddrError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddrError::NotPort(s.into()));
    }
    match s.parse::<u16>() {
        Ok(0) | Err(_) => Err(AddrError::PortRange(s.into())),
        Ok(p) => Ok(p),
    }
}

/// `host[:port]` as in a URL's authority or a CONNECT target (IPv6 in
/// brackets). Without a port, `default`; a CONNECT has none.
pub(crate) fn parse_authority(s: &str, default: Option<u16>) -> Result<(Host, u16), AddrError> {
    let (host, port) = match s.strip_prefix('[') {
        Some(rest) => {
            let close = rest
                .find(']')
                .ok_or_else(|| AddrError::NoClosingBracket(s.into()))?;
            let after = &rest[close + 1..];
            let port = if after.is_empty() {
                None
            } else {
                Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| AddrError::NotHostPort(s.into()))?,
                )
            };
            (&s[..close + 2], port)
        }
        None => match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        },
    };
    if host.starts_with(|c: char| c != '[') && host.contains(':') {
        return Err(AddrError::Ipv6NeedsBrackets(s.into()));
    }
    let port = match (port, default) {
        (Some(p), _) => parse_port(p)?,
        (None, Some(d)) => d,
        (None, None) => return Err(AddrError::NoPort(s.into())),
    };
    Ok((Host::parse(host)?, port))
}

/// One `network.allow` entry, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pattern: Pattern,
    /// None: 443 and 80, the ports of HTTPS and HTTP.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(Host),
    /// `*.crates.io`: a name strictly under this one.
    Under(String),
}

impl Entry {
    pub(crate) fn parse(entry: &str) -> Result<Entry, AddrError> {
        if entry.is_empty() {
            return Err(AddrError::EmptyEntry);
        }
        if entry.contains("://") || entry.contains('/') {
            return Err(AddrError::Url(entry.into()));
        }
        if entry.chars().any(char::is_whitespace) {
            return Err(AddrError::Space(entry.into()));
        }
        let (host, port) = if entry.starts_with('[') {
            let (h, p) = parse_authority(entry, Some(0))?;
            return Ok(Entry {
                pattern: Pattern::Exact(h),
                port: (p != 0).then_some(p),
            });
        } else if entry.matches(':').count() > 1 {
            // A bare IPv6 address: it cannot carry a port without brackets.
            (entry, None)
        } else {
            match entry.rsplit_once(':') {
                Some((h, p)) => (h, Some(parse_port(p)?)),
                None => (entry, None),
            }
        };
        let pattern = match host.strip_prefix("*.") {
            Some(under) => match Host::parse(under) {
                Ok(Host::Name(n)) if !under.contains('*') => Pattern::Under(n),
                Ok(_) => return Err(AddrError::WildcardBeforeIp(entry.into())),
                Err(why) => return Err(why),
            },
            None if host.contains('*') => {
                return Err(AddrError::Wildcard(entry.into()));
            }
            None => Pattern::Exact(Host::parse(host)?),
        };
        Ok(Entry { pattern, port })
    }

    pub(crate) fn admits(&self, host: &Host, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 443 || port == 80,
        };
        port_ok
            && match (&self.pattern, host) {
                (Pattern::Exact(h), _) => h == host,
                (Pattern::Under(suffix), Host::Name(n)) => n
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                (Pattern::Under(_), Host::Ip(_)) => false,
            }
    }
}

/// Whether an address is on the public internet: the run's list names
/// public services, and a name of theirs that resolves to a local or
/// private address (by mistake or by a hostile DNS answer) must not open
/// the supervising host's own network to the run.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => is_public_v4(a),
        IpAddr::V6(a) => is_public_v6(a),
    }
}

fn is_public_v4(a: Ipv4Addr) -> bool {
    let [a0, a1, a2, _] = a.octets();
    let local = a0 == 0 // "this network", 0.0.0.0 among it
        || a0 == 10
        || a0 == 127
        || (a0 == 100 && a1 & 0xc0 == 64) // CGNAT 100.64/10
        || (a0 == 169 && a1 == 254)
        || (a0 == 172 && a1 & 0xf0 == 16)
        || (a0 == 192 && a1 == 168)
        || (a0 == 192 && a1 == 0 && a2 == 0) // IETF protocol assignments
        || (a0 == 192 && a1 == 0 && a2 == 2) // documentation
        || (a0 == 198 && a1 == 51 && a2 == 100)
        || (a0 == 203 && a1 == 0 && a2 == 113)
        || (a0 == 198 && a1 & 0xfe == 18) // benchmarking 198.18/15
        || a0 >= 224; // multicast, reserved, broadcast
    !local
}

fn is_public_v6(a: Ipv6Addr) -> bool {
    if let Some(v4) = a.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = a.segments();
    // NAT64's well-known prefix carries an IPv4 address, which is what is
    // reached.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        let [a, b, c, d] = a.octets()[12..] else {
            unreachable!()
        };
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    let local = s[..6] == [0; 6] // ::, ::1 and the IPv4-compatible ::/96
        || s[0] & 0xfe00 == 0xfc00 // unique local fc00::/7
        || s[0] & 0xffc0 == 0xfe80 // link-local fe80::/10
        || s[0] & 0xffc0 == 0xfec0 // site-local (deprecated) fec0::/10
        || s[0] & 0xff00 == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0100 && s[1..4] == [0; 3]); // discard-only 100::/64
    !local
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse_and_normalise() {
        assert_eq!(Host::parse("PyPI.org."), Ok(Host::Name("pypi.org".into())));
        assert_eq!(Host::parse("[::1]"), Ok(Host::Ip("::1".parse().unwrap())));
        assert_eq!(Host::parse("::1"), Ok(Host::Ip("::1".parse().unwrap())));
        assert_eq!(
            Host::parse("10.0.0.1"),
            Ok(Host::Ip("10.0.0.1".parse().unwrap()))
        );
        for bad in [
            "",
            ".",
            "a..b",
            "-a.b",
            "a b",
            "127.1",
            "0x7f000001",
            "1.2.3",
            "[x]",
            "a.b/c",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn authorities() {
        let name = |n: &str| Host::Name(n.into());
        assert_eq!(
            parse_authority("a.test:8080", None),
            Ok((name("a.test"), 8080))
        );
        assert_eq!(
            parse_authority("a.test", Some(80)),
            Ok((name("a.test"), 80))
        );
        assert_eq!(
            parse_authority("[::1]:443", None),
            Ok((Host::Ip("::1".parse().unwrap()), 443))
        );
        assert_eq!(
            parse_authority("[::1]", Some(80)),
            Ok((Host::Ip("::1".parse().unwrap()), 80))
        );
        for bad in [
            "a.test",
            "a.test:",
            "a.test:0",
            "a.test:65536",
            "::1:443",
            "[::1]443",
            "[::1",
        ] {
            assert!(parse_authority(bad, None).is_err(), "{bad:?} parsed");
        }
        assert_eq!(Host::Ip("::1".parse().unwrap()).with_port(443), "[::1]:443");
    }

    #[test]
    fn public_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(
                !is_public(private.parse().unwrap()),
                "{private} counted as public"
            );
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "151.101.0.223",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(
                is_public(public.parse().unwrap()),
                "{public} counted as private"
            );
        }
    }
}
