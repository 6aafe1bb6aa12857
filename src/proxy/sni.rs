//! The server name a TLS client asks for, read from its ClientHello.
//!
//! A CONNECT to an admitted host reaches that host's address; what the
//! ClientHello names decides which site on that address answers (a CDN
//! serves thousands). So a name there that is not on the list is refused
//! too. Only the parts of the record layer and the ClientHello needed to
//! find the `server_name` extension are read; anything that does not add
//! up is `Malformed`, since a server could read it otherwise.

/// What the client's first bytes in a tunnel are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hello {
    /// Not a TLS handshake: passed on as it is.
    NotTls,
    /// The start of a TLS handshake; more bytes are needed.
    Incomplete,
    /// A whole ClientHello, with the host name it asks for if any
    /// (lowercased).
    ServerName(Option<String>),
    /// A TLS handshake that is not a well-formed ClientHello.
    Malformed,
}

const HANDSHAKE: u8 = 0x16;
const CLIENT_HELLO: u8 = 1;
const SERVER_NAME: u16 = 0;
const HOST_NAME: u8 = 0;
/// The record layer's limit on a plaintext fragment.
const MAX_FRAGMENT: usize = 1 << 14;

/// Reads the first bytes a client sent. The ClientHello may span several
/// records; they are joined until the handshake message is whole.
pub(crate) fn inspect(bytes: &[u8]) -> Hello {
    match bytes {
        [] | [HANDSHAKE] => return Hello::Incomplete,
        [HANDSHAKE, 0x03, ..] => {}
        _ => return Hello::NotTls,
    }
    let mut message = Vec::new();
    let mut rest = bytes;
    loop {
        let [kind, major, _minor, len_hi, len_lo, after @ ..] = rest else {
            return Hello::Incomplete;
        };
        if *kind != HANDSHAKE || *major != 0x03 {
            return Hello::Malformed;
        }
        let len = usize::from(u16::from_be_bytes([*len_hi, *len_lo]));
        if len == 0 || len > MAX_FRAGMENT {
            return Hello::Malformed;
        }
        let Some(fragment) = after.get(..len) else {
            return Hello::Incomplete;
        };
        message.extend_from_slice(fragment);
        rest = &after[len..];
        if let [kind, a, b, c, body @ ..] = message.as_slice() {
            if *kind != CLIENT_HELLO {
                return Hello::Malformed;
            }
            let body_len = u32::from_be_bytes([0, *a, *b, *c]) as usize;
            if let Some(body) = body.get(..body_len) {
                return client_hello(body).unwrap_or(Hello::Malformed);
            }
        }
    }
}

/// The ClientHello's body: version, random, session id, cipher suites,
/// compression methods, then (optionally) the extensions.
fn client_hello(body: &[u8]) -> Option<Hello> {
    let mut r = Reader(body);
    r.take(2 + 32)?;
    let session_id = r.vec8()?;
    if session_id.len() > 32 {
        return None;
    }
    r.vec16()?;
    r.vec8()?;
    if r.0.is_empty() {
        return Some(Hello::ServerName(None));
    }
    let mut extensions = Reader(r.vec16()?);
    if !r.0.is_empty() {
        return None;
    }
    let mut name = None;
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if kind == SERVER_NAME {
            // Two would let the proxy and the server each read a different one.
            if name.is_some() {
                return None;
            }
            name = Some(server_name(data)?);
        }
    }
    Some(Hello::ServerName(name.flatten()))
}

/// The `server_name` extension: a list of (type, name); the `host_name`
/// entry, at most one.
fn server_name(data: &[u8]) -> Option<Option<String>> {
    let mut outer = Reader(data);
    let mut list = Reader(outer.vec16()?);
    if !outer.0.is_empty() || list.0.is_empty() {
        return None;
    }
    let mut host = None;
    while !list.0.is_empty() {
        let kind = list.u8()?;
        let name = list.vec16()?;
        if kind != HOST_NAME {
            continue;
        }
        let valid = !name.is_empty()
            && name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(b));
        if host.is_some() || !valid {
            return None;
        }
        host = Some(String::from_utf8_lossy(name).to_ascii_lowercase());
    }
    Some(host)
}

/// A cursor over a byte slice; every read fails (None) past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.0.get(..n)?;
        self.0 = &self.0[n..];
        Some(taken)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An extension: (type, data).
    pub(crate) type Ext = (u16, Vec<u8>);

    pub(crate) fn sni(name: &str) -> Ext {
        let mut list = vec![HOST_NAME];
        list.extend((name.len() as u16).to_be_bytes());
        list.extend(name.as_bytes());
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend(list);
        (SERVER_NAME, data)
    }

    /// The handshake message of a ClientHello; `None`: without the
    /// extensions block at all (as TLS 1.0 clients may send).
    fn hello_message(extensions: Option<&[Ext]>) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([7u8; 32]);
        body.push(0); // empty session id
        body.extend([0x00, 0x02, 0x13, 0x01]); // one cipher suite
        body.extend([0x01, 0x00]); // null compression
        if let Some(exts) = extensions {
            let mut block = Vec::new();
            for (kind, data) in exts {
                block.extend(kind.to_be_bytes());
                block.extend((data.len() as u16).to_be_bytes());
                block.extend(data);
            }
            body.extend((block.len() as u16).to_be_bytes());
            body.extend(block);
        }
        let mut message = vec![CLIENT_HELLO];
        message.extend(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend(body);
        message
    }

    /// `message` in records of at most `chunk` bytes each.
    fn records(message: &[u8], chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for part in message.chunks(chunk) {
            out.extend([HANDSHAKE, 0x03, 0x01]);
            out.extend((part.len() as u16).to_be_bytes());
            out.extend(part);
        }
        out
    }

    /// A ClientHello in one record.
    pub(crate) fn client_hello(extensions: &[Ext]) -> Vec<u8> {
        records(&hello_message(Some(extensions)), MAX_FRAGMENT)
    }

    fn named(n: &str) -> Hello {
        Hello::ServerName(Some(n.into()))
    }

    #[test]
    fn server_names() {
        let supported_versions = (0x002b, vec![0x02, 0x03, 0x04]);
        let alpn = (0x0010, b"\x00\x03\x02h2".to_vec());
        let grease = (0x0a0a, vec![]);
        let whole = client_hello(&[
            grease.clone(),
            sni("Pkg.Test"),
            alpn.clone(),
            supported_versions,
        ]);
        let mut two_names = sni("a.test");
        two_names.1 = {
            let mut list = Vec::new();
            for n in ["a.test", "b.test"] {
                list.push(HOST_NAME);
                list.extend((n.len() as u16).to_be_bytes());
                list.extend(n.as_bytes());
            }
            let mut d = (list.len() as u16).to_be_bytes().to_vec();
            d.extend(list);
            d
        };
        let cases: Vec<(&str, Vec<u8>, Hello)> = vec![
            (
                "one extension",
                client_hello(&[sni("pkg.test")]),
                named("pkg.test"),
            ),
            (
                "several extensions, lowercased",
                whole.clone(),
                named("pkg.test"),
            ),
            (
                "no server_name",
                client_hello(&[alpn.clone(), grease]),
                Hello::ServerName(None),
            ),
            (
                "no extensions",
                records(&hello_message(None), 1 << 14),
                Hello::ServerName(None),
            ),
            (
                "split over records",
                records(&hello_message(Some(&[alpn, sni("x.test")])), 10),
                named("x.test"),
            ),
            (
                "truncated",
                whole[..whole.len() - 3].to_vec(),
                Hello::Incomplete,
            ),
            ("header only", whole[..5].to_vec(), Hello::Incomplete),
            ("one byte", vec![HANDSHAKE], Hello::Incomplete),
            ("empty", vec![], Hello::Incomplete),
            ("plain HTTP", b"GET / HTTP/1.1\r\n".to_vec(), Hello::NotTls),
            (
                "0x16 then not 3",
                vec![HANDSHAKE, 0x07, 0x00],
                Hello::NotTls,
            ),
            (
                "two server_name extensions",
                client_hello(&[sni("a.test"), sni("b.test")]),
                Hello::Malformed,
            ),
            (
                "two host names",
                client_hello(&[two_names]),
                Hello::Malformed,
            ),
            (
                "bad name bytes",
                client_hello(&[sni("a b")]),
                Hello::Malformed,
            ),
            ("empty name", client_hello(&[sni("")]), Hello::Malformed),
            (
                "not a ClientHello",
                records(&[2, 0, 0, 1, 0], 100),
                Hello::Malformed,
            ),
            (
                "alert record",
                vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
                Hello::NotTls,
            ),
            (
                "empty record",
                vec![HANDSHAKE, 0x03, 0x01, 0x00, 0x00],
                Hello::Malformed,
            ),
        ];
        for (what, bytes, want) in cases {
            assert_eq!(inspect(&bytes), want, "{what}");
        }
        // A length inside the hello that overruns its body.
        let mut lying = hello_message(Some(&[sni("pkg.test")]));
        let at = 4 + 2 + 32 + 1; // the cipher suites' length
        lying[at] = 0xff;
        assert_eq!(inspect(&records(&lying, 1 << 14)), Hello::Malformed);
    }
}
