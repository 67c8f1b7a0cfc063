//! `memlens serve`: the page of one or more snapshots from a local HTTP server, which answers
//! the page's requests for a window of the timeline or a moment at full detail.
//!
//! The server holds each file's snapshot, replays and page report ([`ServedFile`]) and serves
//! three routes ([`Route`]), nothing else: no file is ever read on a request. Every request
//! passes the same checks, in this order ([`admit`]): a bounded URL (414), a `Host` header
//! naming this server (403, against DNS rebinding: [`check_host`]), the token the server
//! printed (403: [`check_token`]), `GET` or `HEAD` (405), no body (413), a known route with
//! well-formed parameters (404, 400). `docs/serve.md` explains each.
//!
//! The HTTP layer is memlens's own, over `std::net` (no async runtime, no server crate): the
//! wire format as pure functions (`http.rs`: a head bounded to [`http::MAX_HEAD`] bytes, 431,
//! 414, 505), one thread that holds every connection without blocking on any and refuses
//! what it refuses itself (`listen.rs`: timeouts, a cap on open connections), and a few
//! workers that answer the admitted requests (`worker.rs`) until a stop flag is raised
//! ([`stop_on_signals`]). The checks and the route parser are pure functions of the request's
//! head; what a route answers is `routes.rs`'s, which only calls the analyses and the
//! renderer.

pub mod http;
pub mod limits;
mod listen;
mod request;
mod routes;
mod worker;

pub use listen::{ACCEPT_RETRY, DRAIN, HEAD_TIMEOUT, LINGER, POLL};
pub use request::{admit, parse_query, parse_route, Head, Refusal, Route};
pub use routes::{runs_title, Answer, ServedFile, State};
pub use worker::{WRITE_DEADLINE, WRITE_TIMEOUT};

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Longest request target (path and query) answered; a longer one gets 414.
pub const MAX_URL: usize = 4096;

/// Worker threads that answer admitted requests, so that two browsers are served at once.
pub const WORKERS: usize = 4;

/// Admitted requests waiting for a worker; one more is answered 503.
pub const QUEUE: usize = 64;

/// The secret every request must present: 32 bytes from the operating system's random source,
/// as 64 lowercase hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A new token from the OS's random source (`getrandom`).
    pub fn random() -> io::Result<Token> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Token::from_bytes(&bytes))
    }

    /// The token of these bytes, hex-encoded (for tests; a server takes [`Token::random`]).
    pub fn from_bytes(bytes: &[u8]) -> Token {
        use std::fmt::Write;
        let mut s = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            let _ = write!(s, "{b:02x}");
        }
        Token(s)
    }

    /// The hex digits, as they go in the URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never in a log line or a panic message.
        f.write_str("Token(..)")
    }
}

/// Equality of two byte strings in time that depends on their lengths only, not on where
/// they first differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// True when the request presented the token: at least one of `presented` (the query's
/// `token=` values and the `X-Memlens-Token` headers) and every one of them equal to `token`,
/// each compared in constant time.
pub fn check_token(presented: &[&str], token: &Token) -> bool {
    !presented.is_empty()
        && presented.iter().fold(true, |ok, p| {
            constant_time_eq(p.as_bytes(), token.0.as_bytes()) & ok
        })
}

/// A `Host` header split into its host and port: `name:8000`, `1.2.3.4:8000`, `[::1]:8000`,
/// or without a port (`None`). `None` when it is not one of those shapes.
fn split_host(value: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        match after {
            "" => (inside, None),
            p => (inside, Some(p.strip_prefix(':')?)),
        }
    } else {
        match value.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (value, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse().ok()?),
        Some(_) => return None,
    };
    if host.is_empty() {
        return None;
    }
    Some((host, port))
}

/// True when the request's `Host` headers (`hosts`) name this server bound at `bound`: exactly
/// one header, its port `bound`'s (or absent when that is 80, as browsers write it), and its
/// host `127.0.0.1`, `localhost`, `::1` or `bound`'s own address; when `bound` is unspecified
/// (`0.0.0.0`, `::`), any IP literal too. Host names other than `localhost` are refused: a page
/// on another site reaches this server under its own name only through DNS rebinding, and
/// that name is what this check sees.
pub fn check_host(hosts: &[&str], bound: SocketAddr) -> bool {
    let [value] = hosts else {
        return false;
    };
    let Some((host, port)) = split_host(value.trim()) else {
        return false;
    };
    if port.unwrap_or(80) != bound.port() {
        return false;
    }
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = if value.trim().starts_with('[') {
        host.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    } else {
        host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    };
    let Some(ip) = ip else {
        return false;
    };
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
        || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
        || ip == bound.ip()
        || bound.ip().is_unspecified()
}

/// The host to print in the URL for a server bound at `addr`: its address, except
/// `127.0.0.1` for `0.0.0.0` and `[::1]` for `::` (an address every client of this machine
/// can use); IPv6 in brackets.
pub fn url_host(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => Ipv4Addr::LOCALHOST.to_string(),
        IpAddr::V6(ip) if ip.is_unspecified() => format!("[{}]", Ipv6Addr::LOCALHOST),
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

/// True when a server bound at `ip` is reachable from other machines (any address but the
/// loopback ones: `127.0.0.0/8`, `::1`, and `::ffff:127.0.0.0/104`, IPv4's loopback mapped
/// into IPv6), which `memlens serve` warns about.
pub fn is_exposed(ip: IpAddr) -> bool {
    !ip.to_canonical().is_loopback()
}

/// A bound, not yet serving, HTTP server and its token. Bound before the files are decoded,
/// so that a busy port fails at once.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    token: Token,
    cap: usize,
}

impl Server {
    /// Listens on `addr` (port 0: one the system picks) with a new random token, after
    /// raising the descriptor limit to the hard one ([`limits::raise_descriptor_limit`]);
    /// the cap on open connections is kept well below it ([`limits::connection_cap`]).
    pub fn bind(addr: SocketAddr) -> io::Result<Server> {
        let descriptors = limits::raise_descriptor_limit();
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let token = Token::random()?;
        Ok(Server {
            listener,
            addr,
            token,
            cap: limits::connection_cap(descriptors),
        })
    }

    /// The address listened on, with the port the system picked.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token every request must present.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Most connections open at once.
    pub fn connection_cap(&self) -> usize {
        self.cap
    }

    /// The URL of the first file's page, with the token: `http://127.0.0.1:PORT/?token=T`.
    pub fn url(&self) -> String {
        format!(
            "http://{}:{}/?token={}",
            url_host(self.addr),
            self.addr.port(),
            self.token.as_str()
        )
    }

    /// Answers requests, admitted ones with `workers` threads, until `stop` is raised; returns
    /// then, after the admitted requests are answered. Nothing a client does ends it: a
    /// failed accept is retried.
    pub fn serve(self, state: &State, stop: &AtomicBool, workers: usize) {
        let in_flight = AtomicUsize::new(0);
        let (jobs, queue) = std::sync::mpsc::sync_channel(QUEUE);
        let queue = Mutex::new(queue);
        std::thread::scope(|s| {
            for i in 0..workers.max(1) {
                // A worker that cannot be started leaves the others (or, with none, every
                // admitted request answered 503).
                let _ = std::thread::Builder::new()
                    .name(format!("memlens-serve-{i}"))
                    .spawn_scoped(s, || worker::run(&queue, state));
            }
            let l = listen::Listener {
                listener: &self.listener,
                addr: self.addr,
                token: &self.token,
                files: state.len(),
                cap: self.cap,
                jobs,
                in_flight: &in_flight,
            };
            listen::run(l, stop);
        });
    }
}

/// The flag [`stop_on_signals`] raises.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    if STOP.swap(true, Ordering::SeqCst) {
        // A second signal while the first one's requests finish: leave now.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Installs a handler for SIGINT and SIGTERM that raises the returned flag (and does nothing
/// else: the server sees it within [`POLL`] and returns, and the command exits 0).
/// A second signal before that ends the process at once (exit 130).
pub fn stop_on_signals() -> io::Result<&'static AtomicBool> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, which is
        // async-signal-safe.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(&STOP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compose::page::window::WindowRequest;

    fn bound() -> SocketAddr {
        "127.0.0.1:8000".parse().unwrap()
    }

    fn token() -> Token {
        Token::from_bytes(&[0xab; 32])
    }

    fn head(url: &str) -> Head<'_> {
        Head {
            method: "GET",
            url,
            hosts: vec!["127.0.0.1:8000"],
            ..Head::default()
        }
    }

    #[test]
    fn tokens_are_random_hex_and_compared_whole() {
        let a = Token::random().unwrap();
        let b = Token::random().unwrap();
        assert_eq!(a.as_str().len(), 64);
        assert!(a
            .as_str()
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "Token(..)");
        let t = token();
        assert!(check_token(&[t.as_str()], &t));
        assert!(check_token(&[t.as_str(), t.as_str()], &t));
        assert!(!check_token(&[], &t));
        assert!(!check_token(&[""], &t));
        assert!(!check_token(&[&t.as_str()[..63]], &t));
        assert!(!check_token(&[&format!("{}0", t.as_str())], &t));
        assert!(!check_token(&[&t.as_str().to_uppercase()], &t));
        // One wrong among right ones is wrong.
        assert!(!check_token(&[t.as_str(), "x"], &t));
    }

    #[test]
    fn host_must_name_this_server() {
        let b = bound();
        for ok in [
            "127.0.0.1:8000",
            "localhost:8000",
            "LocalHost:8000",
            "[::1]:8000",
        ] {
            assert!(check_host(&[ok], b), "{ok}");
        }
        for bad in [
            "evil.example:8000",
            "127.0.0.1:8001",
            "127.0.0.1",
            "localhost",
            "localhost.:8000",
            "127.0.0.1.evil.example:8000",
            "10.0.0.1:8000",
            "[::2]:8000",
            "::1:8000",
            "[::1]8000",
            "127.0.0.1:",
            ":8000",
            "127.0.0.1:+8000",
            "2130706433:8000",
            "127.1:8000",
            "",
        ] {
            assert!(!check_host(&[bad], b), "{bad}");
        }
        // Missing or repeated.
        assert!(!check_host(&[], b));
        assert!(!check_host(&["127.0.0.1:8000", "127.0.0.1:8000"], b));
        // Port 80 may be left out, as browsers do.
        let b80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(check_host(&["localhost"], b80));
        assert!(check_host(&["127.0.0.1:80"], b80));
    }

    #[test]
    fn host_of_other_bindings() {
        let ip: SocketAddr = "192.168.1.7:8000".parse().unwrap();
        assert!(check_host(&["192.168.1.7:8000"], ip));
        assert!(check_host(&["127.0.0.1:8000"], ip));
        assert!(!check_host(&["192.168.1.8:8000"], ip));
        let any: SocketAddr = "0.0.0.0:8000".parse().unwrap();
        for ok in [
            "192.168.1.7:8000",
            "10.1.2.3:8000",
            "[fe80::1]:8000",
            "localhost:8000",
        ] {
            assert!(check_host(&[ok], any), "{ok}");
        }
        for bad in [
            "gpu-box:8000",
            "evil.example:8000",
            "192.168.1.7:8001",
            "[gpu-box]:8000",
        ] {
            assert!(!check_host(&[bad], any), "{bad}");
        }
        let any6: SocketAddr = "[::]:8000".parse().unwrap();
        assert!(check_host(&["[2001:db8::1]:8000"], any6));
        assert!(check_host(&["10.0.0.1:8000"], any6));
        assert!(!check_host(&["gpu-box:8000"], any6));
    }

    #[test]
    fn queries_decode() {
        assert_eq!(
            parse_query("a=1&&b=x%20y+z&c").unwrap(),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y z".into()),
                ("c".into(), "".into())
            ]
        );
        assert!(parse_query("a=%zz").is_err());
        assert!(parse_query("a=%2").is_err());
        assert!(parse_query("a=%ff").is_err());
        assert_eq!(parse_query("").unwrap(), vec![]);
    }

    fn route(url: &str, files: usize) -> Result<Route, Refusal> {
        let t = token();
        admit(&head(url), bound(), &t, files)
    }

    fn status(r: Result<Route, Refusal>) -> u16 {
        r.map_or_else(|e| e.status, |_| 200)
    }

    #[test]
    fn routes_parse() {
        let t = token();
        let tok = t.as_str();
        assert_eq!(
            route(&format!("/?token={tok}"), 1),
            Ok(Route::Page { file: 0 })
        );
        assert_eq!(
            route(&format!("/?file=1&token={tok}"), 2),
            Ok(Route::Page { file: 1 })
        );
        assert_eq!(
            route(
                &format!("/api/window?token={tok}&file=0&device=0&first=-1&last=99&columns=800"),
                1
            ),
            Ok(Route::Window {
                file: 0,
                request: WindowRequest {
                    device: 0,
                    first: -1,
                    last: 99,
                    columns: 800
                }
            })
        );
        assert_eq!(
            route(&format!("/api/moment?token={tok}&device=1&at=5"), 1),
            Ok(Route::Moment {
                file: 0,
                device: 1,
                at: 5,
                name: "at".into()
            })
        );
        assert_eq!(
            route(
                &format!("/api/moment?token={tok}&device=1&at=5&name=my%20step"),
                1
            )
            .unwrap(),
            Route::Moment {
                file: 0,
                device: 1,
                at: 5,
                name: "my step".into()
            }
        );
    }

    #[test]
    fn refusals() {
        let t = token();
        let tok = t.as_str();
        // Paths: exact routes only.
        for p in [
            "/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/api/../Cargo.toml",
            "/src/main.rs",
            "/api/nope",
            "/static/report.js",
            "/api/window/",
            "//",
            "/index.html",
            "http://127.0.0.1:8000/",
            "*",
        ] {
            assert_eq!(status(route(&format!("{p}?token={tok}"), 1)), 404, "{p}");
        }
        // Parameters.
        let w = format!("/api/window?token={tok}&device=0&first=0&last=9");
        for (url, code) in [
            (w.clone(), 400),
            (format!("{w}&columns=x"), 400),
            (format!("{w}&columns=1.5"), 400),
            (format!("{w}&columns=-1"), 400),
            (format!("{w}&columns="), 400),
            (format!("{w}&columns=+5"), 400),
            (format!("{w}&columns=99999999999999999999999"), 400),
            (format!("{w}&columns=8&columns=9"), 400),
            (format!("{w}&columns=8&bogus=1"), 400),
            (format!("{w}&columns=8&file=1"), 404),
            (format!("{w}&columns=8&file=x"), 400),
            (format!("{w}&columns=8&%zz"), 400),
            (format!("{w}&columns=8"), 200),
            (format!("/api/moment?token={tok}&device=0"), 400),
            (format!("/?token={tok}&device=0"), 400),
        ] {
            assert_eq!(status(route(&url, 1)), code, "{url}");
        }
        // Token: missing, wrong, in a header, in both.
        assert_eq!(status(route("/", 1)), 403);
        assert_eq!(status(route("/?token=00", 1)), 403);
        assert_eq!(status(route(&format!("/?token={tok}&token=00"), 1)), 403);
        let mut h = head("/");
        h.tokens = vec![tok];
        assert_eq!(admit(&h, bound(), &t, 1), Ok(Route::Page { file: 0 }));
        h.url = "/?token=00";
        assert_eq!(status(admit(&h, bound(), &t, 1)), 403);
        // A query that cannot be parsed: 400 once the token is shown (a malformed token item
        // is no token).
        assert_eq!(status(route("/?token=%zz", 1)), 403);
        assert_eq!(status(route(&format!("/?token={tok}&%zz"), 1)), 400);
        assert_eq!(status(route(&format!("/?token={tok}&token=%zz"), 1)), 400);
        h.url = "/?%zz";
        assert_eq!(status(admit(&h, bound(), &t, 1)), 400);
        // The token is checked before the route: an unknown path without it is 403.
        assert_eq!(status(route("/src/main.rs", 1)), 403);
        // Host before token.
        let url = format!("/?token={tok}");
        let mut h = head(&url);
        h.hosts = vec!["evil.example:8000"];
        assert_eq!(status(admit(&h, bound(), &t, 1)), 403);
        h.hosts = vec![];
        assert_eq!(status(admit(&h, bound(), &t, 1)), 403);
        // Method, body, length.
        let mut h = head(&url);
        h.method = "POST";
        assert_eq!(status(admit(&h, bound(), &t, 1)), 405);
        h.method = "HEAD";
        assert_eq!(status(admit(&h, bound(), &t, 1)), 200);
        h.method = "GET";
        h.content_lengths = vec!["0"];
        assert_eq!(status(admit(&h, bound(), &t, 1)), 200);
        h.content_lengths = vec!["5"];
        assert_eq!(status(admit(&h, bound(), &t, 1)), 413);
        h.content_lengths = vec![];
        h.transfer_encoding = true;
        assert_eq!(status(admit(&h, bound(), &t, 1)), 413);
        let long = format!("/?token={tok}&file=0{}", "0".repeat(MAX_URL));
        assert_eq!(status(route(&long, 1)), 414);
        let prefix = format!("/?token={tok}&file=");
        let just = format!("{prefix}{}", "0".repeat(MAX_URL - prefix.len()));
        assert_eq!(just.len(), MAX_URL);
        assert_eq!(status(route(&just, 1)), 200);
    }

    #[test]
    fn url_hosts() {
        let at = |s: &str| url_host(s.parse().unwrap());
        assert_eq!(at("127.0.0.1:1"), "127.0.0.1");
        assert_eq!(at("0.0.0.0:1"), "127.0.0.1");
        assert_eq!(at("[::]:1"), "[::1]");
        assert_eq!(at("[::1]:1"), "[::1]");
        assert_eq!(at("10.1.2.3:1"), "10.1.2.3");
        assert!(!is_exposed("127.0.0.1".parse().unwrap()));
        assert!(!is_exposed("::1".parse().unwrap()));
        assert!(is_exposed("0.0.0.0".parse().unwrap()));
        assert!(is_exposed("::".parse().unwrap()));
        assert!(is_exposed("10.1.2.3".parse().unwrap()));
        // IPv4's loopback mapped into IPv6 is loopback; other mapped addresses are not.
        assert!(!is_exposed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_exposed("::ffff:127.1.2.3".parse().unwrap()));
        assert!(is_exposed("::ffff:10.1.2.3".parse().unwrap()));
        assert!(is_exposed("::ffff:0.0.0.0".parse().unwrap()));
    }
}
