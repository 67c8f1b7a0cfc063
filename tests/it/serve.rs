//! `memlens serve`: the binary started as a server and spoken to over plain TCP (a small
//! HTTP/1.1 client of its own below): the URL line, loopback only, the token and `Host`
//! checks, nothing but the three routes, no bodies, no other methods, the window and moment
//! answers against `timeline`, two clients at once, exit 0 on SIGINT and the line saying so,
//! the warning of `--bind 0.0.0.0`, and one line and exit 2 for a taken port or a missing file.

use crate::common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A `memlens serve` child, killed when dropped if it still runs.
pub(crate) struct Serving {
    pub(crate) child: Child,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) token: String,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Serving {
    /// Starts `memlens serve ARGS` and reads its URL line (within 60 s, or the test fails).
    pub(crate) fn start(args: &[&str]) -> Serving {
        Serving::start_limited(args, None)
    }

    /// [`Serving::start`] with the child's descriptor limit (`RLIMIT_NOFILE`, soft and hard)
    /// set to `descriptors` when given.
    pub(crate) fn start_limited(args: &[&str], descriptors: Option<u64>) -> Serving {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlens"));
        cmd.current_dir(root())
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(n) = descriptors {
            use std::os::unix::process::CommandExt;
            // SAFETY: the hook only calls setrlimit, which is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("start memlens serve");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no URL line within 60 s; stderr: {}",
                    String::from_utf8_lossy(&stderr.lock().unwrap())
                );
            }
        };
        let url = line
            .strip_prefix("memlens serving http://")
            .and_then(|l| l.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("URL line: {line:?}"));
        let (authority, token) = url.split_once("/?token=").expect("URL with a token");
        let (host, port) = authority.rsplit_once(':').unwrap();
        assert_eq!(token.len(), 64, "{line:?}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{line:?}");
        Serving {
            child,
            host: host.to_string(),
            port: port.parse().unwrap(),
            token: token.to_string(),
            stderr,
        }
    }

    pub(crate) fn host_header(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `GET path` with Host 127.0.0.1:PORT.
    pub(crate) fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[("Host", &self.host_header())], b"")
    }

    /// `GET path?token=T&query`.
    pub(crate) fn api(&self, path: &str, query: &str) -> Reply {
        let sep = if query.is_empty() { "" } else { "&" };
        self.get(&format!("{path}?token={}{sep}{query}", self.token))
    }

    pub(crate) fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let mut s = self.connect();
        send(&mut s, method, target, headers, body);
        read_reply_to(&mut s, method)
    }

    pub(crate) fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s
    }

    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

/// An HTTP response, its body de-chunked.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn json(&self) -> Value {
        assert_eq!(
            self.header("Content-Type"),
            Some("application/json"),
            "{self:?}"
        );
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }

    /// A refusal: `status`, a JSON body `{"error": "..."}` of one line, and the headers every
    /// answer carries.
    pub(crate) fn assert_error(&self, status: u16, what: &str) {
        assert_eq!(self.status, status, "{what}: {}", self.text());
        let v = self.json();
        let e = v["error"].as_str().unwrap_or_else(|| panic!("{what}: {v}"));
        assert!(!e.is_empty() && !e.contains('\n'), "{what}: {e:?}");
        assert_eq!(v.as_object().unwrap().len(), 1, "{what}: {v}");
        self.assert_protected(what);
    }

    pub(crate) fn assert_protected(&self, what: &str) {
        assert_eq!(self.header("Cache-Control"), Some("no-store"), "{what}");
        assert_eq!(
            self.header("X-Content-Type-Options"),
            Some("nosniff"),
            "{what}"
        );
        assert!(
            !self
                .headers
                .iter()
                .any(|(k, _)| k.to_ascii_lowercase().starts_with("access-control-")),
            "{what}: a CORS header: {:?}",
            self.headers
        );
    }
}

pub(crate) fn send(
    s: &mut TcpStream,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) {
    let mut req = format!("{method} {target} HTTP/1.1\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s.flush().unwrap();
}

/// Reads one response to a `GET` to the end of the connection (every request says
/// `Connection: close`).
pub(crate) fn read_reply(s: &mut TcpStream) -> Reply {
    read_reply_to(s, "GET")
}

/// Reads one response to a `method` request: a `HEAD` answer has no body (its
/// `Content-Length` is the `GET` answer's).
fn read_reply_to(s: &mut TcpStream, method: &str) -> Reply {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read the reply");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("Transfer-Encoding") && v.contains("chunked"));
    if method == "HEAD" {
        assert!(body.is_empty(), "a HEAD answer with a body");
    } else if chunked {
        body = dechunk(&body);
    } else if let Some((_, n)) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("Content-Length"))
    {
        assert_eq!(body.len(), n.parse::<usize>().unwrap(), "Content-Length");
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = std::str::from_utf8(&b[..eol]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        b = &b[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n", "chunk end");
        b = &b[size + 2..];
    }
}

pub(crate) const TRAIN: &str = "samples/train_small.pickle";

/// `memlens timeline TRAIN --format json`: device 0's event count, peak event and peak bytes.
fn train_timeline() -> (u64, i64, u64) {
    let v = json_report(&["timeline"], &sample("train_small.pickle"));
    let d = &v["devices"][0];
    assert_eq!(d["device"], 0);
    (
        as_u64(&d["events"]),
        d["peak"]["event_index"].as_i64().unwrap(),
        as_u64(&d["peak_bytes"]),
    )
}

/// A non-loopback address of this machine: the source address the kernel would use towards a
/// private address (a UDP connect, which sends nothing). None without such a route.
fn non_loopback_address() -> Option<std::net::IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Waits up to `limit` for the child to exit; its exit code.
fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn a_server_answers_its_routes_and_nothing_else() {
    let (events, peak_at, peak_bytes) = train_timeline();
    let mut srv = Serving::start(&[TRAIN, "--port", "0"]);
    let port = srv.port;
    let tok = srv.token.clone();

    // 1. Loopback only.
    assert_eq!(srv.host, "127.0.0.1");
    match non_loopback_address() {
        Some(ip) => {
            let r = TcpStream::connect_timeout(&SocketAddr::new(ip, port), Duration::from_secs(5));
            assert!(r.is_err(), "the server answers on {ip}:{port}");
        }
        None => {
            let why = format!(
                "no non-loopback address on this machine to check that {port} is not \
                 listening there (the URL names 127.0.0.1)"
            );
            eprintln!("skipped: {why}");
            log_skip(&why);
        }
    }

    // 2. The token, on every request.
    srv.get("/").assert_error(403, "no token");
    srv.get("/?token=0123").assert_error(403, "wrong token");
    let wrong: String = tok
        .chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect();
    srv.get(&format!("/?token={wrong}"))
        .assert_error(403, "wrong token, right length");
    srv.get(&format!(
        "/api/window?token={wrong}&device=0&first=-1&last=9&columns=8"
    ))
    .assert_error(403, "window with a wrong token");
    let page = srv.api("/", "");
    assert_eq!(page.status, 200);
    page.assert_protected("page");
    assert_eq!(
        page.header("Content-Type"),
        Some("text/html; charset=utf-8")
    );
    let html = page.text();
    assert!(html.contains(r#"id="memlens-serve""#), "no serve element");
    assert!(html.contains(r#""file":0"#), "no file index");
    assert!(!html.contains(&tok), "the page holds the token");
    let by_header = srv.request(
        "GET",
        "/",
        &[("Host", &srv.host_header()), ("X-Memlens-Token", &tok)],
        b"",
    );
    assert_eq!(by_header.status, 200, "token in X-Memlens-Token");
    let head = srv.request(
        "HEAD",
        &format!("/?token={tok}"),
        &[("Host", &srv.host_header())],
        b"",
    );
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "HEAD has no body");
    assert_eq!(
        head.header("Content-Length"),
        Some(page.body.len().to_string().as_str()),
        "HEAD's length is the page's"
    );

    // 3. Host.
    let root = format!("/?token={tok}");
    srv.request(
        "GET",
        &root,
        &[("Host", &format!("evil.example:{port}"))],
        b"",
    )
    .assert_error(403, "Host evil.example");
    srv.request("GET", &root, &[], b"")
        .assert_error(403, "no Host");
    let local = srv.request("GET", &root, &[("Host", &format!("localhost:{port}"))], b"");
    assert_eq!(local.status, 200, "Host localhost");

    // 4. Nothing but the routes.
    for path in [
        "/../../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/api/../Cargo.toml",
        "/src/main.rs",
        "/api/nope",
        "/static/report.js",
        "/Cargo.toml",
        "/samples/train_small.pickle",
    ] {
        let r = srv.api(path, "");
        r.assert_error(404, path);
        let t = r.text();
        assert!(
            !t.contains("root:") && !t.contains("[package]") && !t.contains("fn main"),
            "{path}: {t}"
        );
    }

    // 5. Methods and bodies.
    let h = srv.host_header();
    for m in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
        let r = srv.request(m, &root, &[("Host", &h)], b"");
        r.assert_error(405, m);
        assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    }
    srv.request(
        "GET",
        &root,
        &[("Host", &h), ("Content-Length", "5")],
        b"hello",
    )
    .assert_error(413, "GET with a body");
    srv.request(
        "GET",
        &root,
        &[("Host", &h), ("Transfer-Encoding", "chunked")],
        b"5\r\nhello\r\n0\r\n\r\n",
    )
    .assert_error(413, "GET with a chunked body");
    // A declared body of a terabyte: 413, and the connection closed without reading it.
    {
        let mut s = srv.connect();
        send(
            &mut s,
            "GET",
            &root,
            &[("Host", &h), ("Content-Length", "1000000000000")],
            b"",
        );
        read_reply(&mut s).assert_error(413, "a declared body of a terabyte");
    }
    let long = format!("/?token={tok}&file={}", "0".repeat(5000));
    srv.get(&long).assert_error(414, "a long URL");
    assert_eq!(srv.api("/", "").status, 200, "alive after the refusals");

    // 6. Windows.
    let all = format!("device=0&first=-1&last={}&columns=800", events - 1);
    let w = srv.api("/api/window", &all);
    assert_eq!(w.status, 200, "{}", w.text());
    w.assert_protected("window");
    let v = w.json();
    assert_eq!(v["schema_version"], 1);
    assert!(v["samples"].is_object(), "{v}");
    assert_eq!(v["peak"]["event_index"].as_i64(), Some(peak_at));
    assert_eq!(as_u64(&v["peak_bytes"]), peak_bytes);
    for (query, what) in [
        (
            "device=0&first=10&last=5&columns=800".to_string(),
            "first > last",
        ),
        ("device=99&first=-1&last=9&columns=800".into(), "device 99"),
        ("device=0&first=-1&last=9&columns=0".into(), "columns=0"),
        (
            "device=0&first=-1&last=9&columns=99999999".into(),
            "too many columns",
        ),
        ("device=0&first=a&last=9&columns=800".into(), "first=a"),
        ("device=0&first=-1&last=9".into(), "no columns"),
        (
            "device=0&first=-1&last=9&columns=8&extra=1".into(),
            "unknown parameter",
        ),
        (
            "device=0&first=-1&last=9&columns=8&columns=9".into(),
            "a parameter twice",
        ),
        (
            format!("device=0&first={events}&last={}&columns=8", events + 5),
            "outside the trace",
        ),
    ] {
        srv.api("/api/window", &query).assert_error(400, what);
    }

    // 7. A moment: the peak's live bytes as `timeline` says.
    let m = srv.api("/api/moment", &format!("device=0&at={peak_at}"));
    assert_eq!(m.status, 200, "{}", m.text());
    let v = m.json();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(as_u64(&v["moment"]["live_bytes"]), peak_bytes);
    let named = srv.api(
        "/api/moment",
        &format!("device=0&at={peak_at}&name=my%20peak"),
    );
    assert_eq!(named.status, 200);
    assert!(named.text().contains("my peak"));
    srv.api("/api/moment", &format!("device=0&at={events}"))
        .assert_error(400, "a moment past the trace");
    srv.api("/api/moment", "device=3&at=0")
        .assert_error(400, "device 3");
    srv.api("/api/moment", "device=0")
        .assert_error(400, "no at");

    // 8. Two clients at once: both requests sent before either answer is read.
    let mut a = srv.connect();
    let mut b = srv.connect();
    let q = format!("/api/window?token={tok}&{all}");
    send(&mut a, "GET", &q, &[("Host", &h)], b"");
    send(&mut b, "GET", &root, &[("Host", &h)], b"");
    let (rb, ra) = (read_reply(&mut b), read_reply(&mut a));
    assert_eq!((ra.status, rb.status), (200, 200));

    // 9. SIGINT: exit 0 within 10 s.
    let t0 = Instant::now();
    // SAFETY: a signal to our own child, whose pid we hold.
    assert_eq!(
        unsafe { libc::kill(srv.child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let code = wait_exit(&mut srv.child, Duration::from_secs(10));
    assert_eq!(code, Some(0), "exit after SIGINT; stderr: {}", srv.stderr());
    eprintln!("stopped {:.2} s after SIGINT", t0.elapsed().as_secs_f64());
}

/// Beside the URL, on standard error, the line that says how to stop it (once, alone).
#[test]
fn the_server_says_how_to_stop_it() {
    let srv = Serving::start(&[TRAIN]);
    let t0 = Instant::now();
    while !srv.stderr().contains('\n') && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = srv.stderr();
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("Ctrl-C") || l.starts_with("memlens"))
        .collect();
    assert_eq!(
        lines,
        ["memlens: press Ctrl-C to stop the server"],
        "stderr: {err}"
    );
}

#[test]
fn two_files_are_served_by_index() {
    let srv = Serving::start(&[TRAIN, "samples/frag_oom.pickle"]);
    let first = srv.api("/", "");
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(first.text().contains(r#""file":0"#));
    let second = srv.api("/", "file=1");
    assert_eq!(second.status, 200);
    let html = second.text();
    assert!(html.contains(r#""file":1"#), "not the second page");
    assert!(
        html.contains("<title>memlens: samples/frag_oom.pickle"),
        "not frag_oom's page"
    );
    assert!(html.contains("samples/train_small.pickle"), "the file list");
    srv.api("/", "file=2").assert_error(404, "file=2");
    srv.api("/api/moment", "file=2&device=0&at=0")
        .assert_error(404, "moment of file=2");
    let w = srv.api("/api/window", "file=1&device=0&first=-1&last=3&columns=8");
    assert_eq!(w.status, 200, "{}", w.text());
}

/// With two files, `/runs` serves the compare page (the same report as `memlens report A B`,
/// under the runs page's policy); with one it is not found; it takes no parameter but the
/// token, and wants the token.
#[test]
fn two_files_are_compared_at_runs() {
    let (base, cand) = ("samples/diff_base.pickle", "samples/diff_cand.pickle");
    let srv = Serving::start(&[base, cand]);
    let page = srv.api("/runs", "");
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(
        html.contains(&format!("<title>memlens: {base} vs {cand}</title>")),
        "not the compare page"
    );
    let policy = memlens::render::html::runs_csp(true);
    assert!(html.contains(&policy), "the runs page's policy");
    let start = html.find(r#"id="memlens-data">"#).unwrap() + r#"id="memlens-data">"#.len();
    let data: Value =
        serde_json::from_str(&html[start..start + html[start..].find("</script>").unwrap()])
            .unwrap();
    let report = json_report(&["report", base], std::path::Path::new(cand));
    assert_eq!(data["pair"]["diff"], report["pair"]["diff"]);
    assert_eq!(data["runs"], report["runs"]);
    srv.api("/runs", "file=1")
        .assert_error(400, "a parameter /runs does not take");
    assert_eq!(srv.get("/runs").status, 403, "no token");
    let single = Serving::start(&[base]);
    single.api("/runs", "").assert_error(404, "one file");
}

#[test]
fn bound_to_every_address_it_warns_and_still_wants_the_token() {
    let srv = Serving::start(&[TRAIN, "--bind", "0.0.0.0"]);
    assert_eq!(srv.host, "127.0.0.1", "the URL names loopback");
    let t0 = Instant::now();
    while !srv.stderr().contains("reachable from the network") {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no warning: {}",
            srv.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let warning: Vec<String> = srv
        .stderr()
        .lines()
        .filter(|l| l.contains("warning"))
        .map(str::to_string)
        .collect();
    assert_eq!(warning.len(), 1, "{warning:?}");
    assert!(warning[0].contains("token"), "{warning:?}");
    srv.get("/").assert_error(403, "no token on 0.0.0.0");
    assert_eq!(srv.api("/", "").status, 200);
    // An IP literal is a Host it accepts there; a name is not.
    let root = format!("/?token={}", srv.token);
    let port = srv.port;
    let ip = srv.request("GET", &root, &[("Host", &format!("192.0.2.1:{port}"))], b"");
    assert_eq!(ip.status, 200);
    srv.request("GET", &root, &[("Host", &format!("gpu-box:{port}"))], b"")
        .assert_error(403, "a host name on 0.0.0.0");
}

fn one_line_exit_2(args: &[&str]) -> String {
    let o = memlens_in_root(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        o.stdout.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

#[test]
fn a_taken_port_is_one_line_and_exit_2() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let t0 = Instant::now();
    let err = one_line_exit_2(&["serve", TRAIN, "--port", &port.to_string()]);
    assert!(
        err.starts_with(&format!("memlens: cannot bind 127.0.0.1:{port}: ")),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_missing_file_is_one_line_and_exit_2() {
    let err = one_line_exit_2(&["serve", "samples/no_such_file.pickle"]);
    assert!(
        err.starts_with("memlens: samples/no_such_file.pickle: "),
        "{err}"
    );
    // The second of two files too: nothing is served.
    let err = one_line_exit_2(&["serve", TRAIN, "samples/no_such_file.pickle"]);
    assert!(err.contains("no_such_file.pickle"), "{err}");
}
