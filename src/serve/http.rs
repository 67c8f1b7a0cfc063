//! The HTTP/1.1 the server speaks, as pure functions of bytes: a request head read from what
//! a client sent so far ([`parse`]), bounded (the request line, the whole head, the version),
//! and a response's head ([`response_head`]). Every response closes its connection
//! (`Connection: close`): no keep-alive, no pipelining, no body ever read.

use super::request::{Head, Refusal};
use super::routes::Answer;
use super::MAX_URL;

/// Most bytes of a request head (request line, headers and the blank line) read; a head not
/// complete within them is 431 (414 when its request line alone is not).
pub const MAX_HEAD: usize = 8192;

/// Longest request line: a target of [`MAX_URL`] bytes with room for the method and version.
/// A line not complete within it is 414.
pub const MAX_REQUEST_LINE: usize = MAX_URL + 64;

/// A request head as received: the request line's method and target, and every header in
/// order (names as sent, values with the surrounding blanks trimmed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    /// `GET`, `HEAD`, `POST`, ...
    pub method: String,
    /// The request target as sent.
    pub target: String,
    /// `(name, value)` of every header line, in order.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The parts [`super::admit`] checks: method, target, and every `Host`, `X-Memlens-Token`,
    /// `Content-Length` and `Transfer-Encoding` header (names compared without case).
    pub fn head(&self) -> Head<'_> {
        let mut head = Head {
            method: &self.method,
            url: &self.target,
            ..Head::default()
        };
        for (name, value) in &self.headers {
            let v = value.as_str();
            if name.eq_ignore_ascii_case("Host") {
                head.hosts.push(v);
            } else if name.eq_ignore_ascii_case("X-Memlens-Token") {
                head.tokens.push(v);
            } else if name.eq_ignore_ascii_case("Content-Length") {
                head.content_lengths.push(v);
            } else if name.eq_ignore_ascii_case("Transfer-Encoding") {
                head.transfer_encoding = true;
            }
        }
        head
    }

    /// True for `HEAD`: the answer is sent without its body.
    pub fn head_only(&self) -> bool {
        self.method == "HEAD"
    }
}

/// What the bytes received so far make: not yet a head, or a head read (or refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// No blank line yet, and within the bounds: read more.
    Incomplete,
    /// A head, or why the request is refused without looking further (400, 414, 431, 505).
    Complete(Result<RequestHead, Refusal>),
}

/// Reads a request head from `buf`, the bytes a client sent so far (any bytes after the head
/// are ignored). A line may end in CRLF or a bare LF.
pub fn parse(buf: &[u8]) -> Progress {
    let Some(end) = head_end(buf) else {
        let line_done = buf.contains(&b'\n');
        if !line_done && buf.len() > MAX_REQUEST_LINE {
            return Progress::Complete(Err(line_too_long()));
        }
        if buf.len() >= MAX_HEAD {
            return Progress::Complete(Err(head_too_large()));
        }
        return Progress::Incomplete;
    };
    if end > MAX_HEAD {
        return Progress::Complete(Err(head_too_large()));
    }
    Progress::Complete(parse_head(&buf[..end]))
}

/// The index just past the blank line that ends the head in `buf`, if there is one.
fn head_end(buf: &[u8]) -> Option<usize> {
    let (mut start, mut seen_line) = (0, false);
    for (i, b) in buf.iter().enumerate() {
        if *b == b'\n' {
            let line = &buf[start..i];
            let blank = line.is_empty() || line == b"\r";
            // A blank line before the request line is tolerated (RFC 9112 2.2), not an end.
            if blank && seen_line {
                return Some(i + 1);
            }
            seen_line |= !blank;
            start = i + 1;
        }
    }
    None
}

fn line_too_long() -> Refusal {
    Refusal::new(
        414,
        format!("the request line is longer than {MAX_REQUEST_LINE} bytes"),
    )
}

fn head_too_large() -> Refusal {
    Refusal::new(
        431,
        format!("the request line and headers are longer than {MAX_HEAD} bytes"),
    )
}

fn bad(message: &str) -> Refusal {
    Refusal::new(400, message)
}

/// A complete head (through its blank line) → its request line and headers.
fn parse_head(bytes: &[u8]) -> Result<RequestHead, Refusal> {
    let text = std::str::from_utf8(bytes).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .skip_while(|l| l.is_empty());
    let request_line = lines.next().unwrap_or("");
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(bad("malformed request line"));
    };
    check_version(version)?;
    if method.is_empty() || !method.bytes().all(is_token_byte) {
        return Err(bad("malformed method"));
    }
    if target.is_empty() || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(bad("malformed request target"));
    }
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        if line.starts_with([' ', '\t']) {
            return Err(bad("folded header lines are not accepted"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad("a header line without a colon"))?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(bad("malformed header name"));
        }
        headers.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    Ok(RequestHead {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    })
}

/// `HTTP/1.1` and `HTTP/1.0` are served; any other `HTTP/D.D` is 505, anything else 400.
fn check_version(version: &str) -> Result<(), Refusal> {
    match version {
        "HTTP/1.1" | "HTTP/1.0" => Ok(()),
        v if v.starts_with("HTTP/") => Err(Refusal::new(
            505,
            format!("HTTP version {:?} is not supported: HTTP/1.1", &v[5..]),
        )),
        _ => Err(bad("malformed HTTP version")),
    }
}

/// A byte of an RFC 9110 token (method, header name).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The reason phrase of a status the server sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// The status line and headers of `answer` (the body, of `Content-Length` bytes, follows
/// unless the request was `HEAD`): its type and length, `Connection: close`, and on every
/// response `Cache-Control: no-store` (nothing of a snapshot kept by a browser or proxy),
/// `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` (the token in the URL
/// goes nowhere) and `X-Frame-Options: DENY` (the page is never framed); `Allow: GET, HEAD`
/// with a 405. No CORS header, ever: other origins cannot read an answer.
pub fn response_head(answer: &Answer) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n",
        answer.status,
        reason(answer.status),
        answer.content_type,
        answer.body.len()
    );
    if answer.allow {
        head.push_str("Allow: GET, HEAD\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// The whole response to `answer` in one buffer: its head and, unless `head_only`, its body.
pub fn response(answer: &Answer, head_only: bool) -> Vec<u8> {
    let mut out = response_head(answer);
    if !head_only {
        out.extend_from_slice(&answer.body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(buf: &[u8]) -> Option<u16> {
        match parse(buf) {
            Progress::Incomplete => None,
            Progress::Complete(Ok(_)) => Some(200),
            Progress::Complete(Err(r)) => Some(r.status),
        }
    }

    #[test]
    fn a_head_is_read_whole() {
        let raw = b"GET /?token=x HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nX-Memlens-Token:  t \r\n\
                    content-length: 0\r\nTransfer-Encoding: chunked\r\n\r\nBODY";
        let Progress::Complete(Ok(h)) = parse(raw) else {
            panic!("{:?}", parse(raw));
        };
        assert_eq!(h.method, "GET");
        assert_eq!(h.target, "/?token=x");
        assert_eq!(h.headers.len(), 4);
        let head = h.head();
        assert_eq!(head.hosts, vec!["127.0.0.1:8000"]);
        assert_eq!(head.tokens, vec!["t"]);
        assert_eq!(head.content_lengths, vec!["0"]);
        assert!(head.transfer_encoding);
        assert!(!h.head_only());
        // Bare LFs, a leading blank line, HTTP/1.0, HEAD.
        let Progress::Complete(Ok(h)) = parse(b"\r\nHEAD / HTTP/1.0\nHost: a\n\n") else {
            panic!()
        };
        assert_eq!((h.method.as_str(), h.headers.len()), ("HEAD", 1));
        assert!(h.head_only());
    }

    #[test]
    fn a_head_not_yet_complete_waits() {
        for part in [
            &b""[..],
            b"\r\n",
            b"GET / HTTP/1.1",
            b"GET / HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n\r",
        ] {
            assert_eq!(parse(part), Progress::Incomplete, "{part:?}");
        }
    }

    #[test]
    fn heads_are_bounded() {
        // A request line that never ends: 414 once past its bound, not before.
        let mut line = b"GET /".to_vec();
        line.resize(MAX_REQUEST_LINE, b'a');
        assert_eq!(status(&line), None);
        line.push(b'a');
        assert_eq!(status(&line), Some(414));
        // Headers that never end: 431 at MAX_HEAD bytes.
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        while head.len() < MAX_HEAD - 20 {
            head.extend_from_slice(b"X-A: aaaaaaaaaa\r\n");
        }
        assert_eq!(status(&head), None);
        head.resize(MAX_HEAD, b'a');
        assert_eq!(status(&head), Some(431));
        // A complete head over the bound is 431 too; at the bound it is read.
        let mut big = b"GET / HTTP/1.1\r\nX-A: ".to_vec();
        big.resize(MAX_HEAD - 4, b'a');
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(big.len(), MAX_HEAD);
        assert_eq!(status(&big), Some(200));
        big.insert(20, b'a');
        assert_eq!(status(&big), Some(431));
    }

    #[test]
    fn versions_and_malformed_heads() {
        for (raw, code) in [
            (&b"GET / HTTP/2.0\r\n\r\n"[..], 505),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
            (b"GET / HTTP/0.9\r\n\r\n", 505),
            (b"GET / HTTP/1.1\r\n\r\n", 200),
            (b"GET / http/1.1\r\n\r\n", 400),
            (b"GET /\r\n\r\n", 400),
            (b"GET  / HTTP/1.1\r\n\r\n", 400),
            (b"G\x01T / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\n: a\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: \xff\r\n\r\n", 400),
        ] {
            assert_eq!(
                status(raw),
                Some(code),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn responses_carry_their_length_and_the_protective_headers() {
        let mut a = Answer::error(405, "no");
        a.allow = true;
        let full = response(&a, false);
        let text = String::from_utf8(full).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert_eq!(body, r#"{"error":"no"}"#);
        let lines: Vec<&str> = head.split("\r\n").collect();
        assert_eq!(lines[0], "HTTP/1.1 405 Method Not Allowed");
        for h in [
            "Content-Type: application/json",
            "Content-Length: 14",
            "Connection: close",
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            "Referrer-Policy: no-referrer",
            "X-Frame-Options: DENY",
            "Allow: GET, HEAD",
        ] {
            assert!(lines.contains(&h), "{h}: {lines:?}");
        }
        assert_eq!(lines.len(), 9);
        let only = response(&a, true);
        assert!(only.ends_with(b"Allow: GET, HEAD\r\n\r\n"));
        assert_eq!(only, response_head(&a));
    }
}
