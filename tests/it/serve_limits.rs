//! `memlens serve` under hostile clients (issue 53): token-less floods of requests that
//! declare a body, speak HTTP/2.0 or stop half-way, and idle connections, against a server
//! under a 512-descriptor limit while a token holder loads the page; an endless header line
//! (the server's memory stays bounded); 505 for another HTTP version, 431 for oversized
//! headers, 408 and a close for a head that never ends; a server bound to IPv4's loopback
//! mapped into IPv6 does not warn. All traffic goes to 127.0.0.1.

use crate::serve::{read_reply, send, Serving, TRAIN};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The server's resident memory, in bytes (`VmRSS` of `/proc/PID/status`).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// Descriptors the process `pid` holds open.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count()
}

/// Raises its flag when dropped: the token holder stops even when the test fails.
struct Raise<'a>(&'a AtomicBool);

impl Drop for Raise<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// True while the server runs.
fn alive(srv: &mut Serving) -> bool {
    matches!(srv.child.try_wait(), Ok(None))
}

fn addr(srv: &Serving) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], srv.port))
}

/// The token holder loads the page: connect, `GET /?token=T`, read it to the end within
/// 10 s; `Ok` when it is the whole page (200, its `Content-Length`, the served page).
fn load_page(srv: &Serving) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr(srv), Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "GET /?token={} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        srv.token,
        srv.host_header()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no head in {} bytes", raw.len()))?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("status line {:?}", head.lines().next()));
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse::<usize>().ok())
        .ok_or("no Content-Length")?;
    if body.len() != length || !body.contains(r#"id="memlens-serve""#) {
        return Err(format!("a body of {} bytes for {length}", body.len()));
    }
    Ok(())
}

/// Raises this test process's descriptor limit to its hard limit, which must allow `need`.
fn allow_descriptors(need: u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit through valid pointers.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        r.rlim_cur = r.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
    }
    assert!(
        r.rlim_max >= need,
        "this test holds {need} sockets; the hard descriptor limit is {}",
        r.rlim_max
    );
}

/// Opens `n` connections and sends `bytes` on each, holding them open; connections the
/// server closes are fine, a connect that fails is counted (and after 10 s, every one not
/// tried).
fn flood(srv: &Serving, n: usize, bytes: &[u8]) -> (Vec<TcpStream>, usize) {
    let mut held = Vec::with_capacity(n);
    let mut failed = 0;
    let t0 = Instant::now();
    for i in 0..n {
        if t0.elapsed() > Duration::from_secs(10) {
            failed += n - i;
            break;
        }
        match TcpStream::connect_timeout(&addr(srv), Duration::from_secs(2)) {
            Ok(mut s) => {
                let _ = s.write_all(bytes);
                held.push(s);
            }
            Err(_) => failed += 1,
        }
    }
    (held, failed)
}

#[test]
fn hostile_clients_cannot_end_a_server_under_512_descriptors() {
    allow_descriptors(1200);
    let mut srv = Serving::start_limited(&[TRAIN], Some(512));
    let pid = srv.child.id();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert_eq!(
        nofile.split_whitespace().collect::<Vec<_>>()[3..5],
        ["512", "512"],
        "{nofile}"
    );
    let host = srv.host_header();
    let kinds = [
        (
            "a declared body of 1 MiB",
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1048576\r\n\r\n"),
        ),
        ("an HTTP/2.0 request line", "GET / HTTP/2.0\r\n\r\n".into()),
        (
            "a request sent half-way",
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nAccept: "),
        ),
    ];
    let t0 = Instant::now();
    let stop = AtomicBool::new(false);
    let loads = std::thread::scope(|s| {
        // The token holder loads the page all along.
        let holder = s.spawn(|| {
            let mut results = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                results.push(load_page(&srv));
                std::thread::sleep(Duration::from_millis(20));
            }
            results
        });
        let _stop_holder = Raise(&stop);
        for (what, bytes) in &kinds {
            let (held, failed) = flood(&srv, 700, bytes.as_bytes());
            assert_eq!(failed, 0, "{what}: connects failed");
            load_page(&srv).unwrap_or_else(|e| panic!("after 700 of {what}: {e}"));
            drop(held);
        }
        let (idle, failed) = flood(&srv, 1000, b"");
        assert_eq!(failed, 0, "idle connections: connects failed");
        load_page(&srv).unwrap_or_else(|e| panic!("among 1,000 idle connections: {e}"));
        let fds = open_descriptors(pid);
        assert!(fds < 300, "the server holds {fds} descriptors");
        drop(idle);
        drop(_stop_holder);
        holder.join().unwrap()
    });
    assert!(alive(&mut srv), "the server ended: {}", srv.stderr());
    let failed: Vec<&String> = loads.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} page loads failed: {failed:?}",
        failed.len(),
        loads.len()
    );
    assert!(!loads.is_empty());
    eprintln!(
        "{} page loads during 3,100 hostile connections in {:.2} s",
        loads.len(),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn an_endless_header_line_costs_the_server_no_memory() {
    let mut srv = Serving::start(&[TRAIN]);
    let pid = srv.child.id();
    load_page(&srv).unwrap();
    let before = rss(pid);
    let mut s = srv.connect();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = format!(
        "GET /?token={} HTTP/1.1\r\nHost: {}\r\nX-Endless: ",
        srv.token,
        srv.host_header()
    );
    s.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let (mut sent, total) = (0usize, 256usize << 20);
    let t0 = Instant::now();
    let mut closed = false;
    while sent < total && t0.elapsed() < Duration::from_secs(30) {
        match s.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let after = rss(pid);
    eprintln!(
        "sent {} MiB in {:.2} s; server RSS {} -> {} MiB",
        sent >> 20,
        t0.elapsed().as_secs_f64(),
        before >> 20,
        after >> 20
    );
    assert!(
        after < before + (64 << 20),
        "the server grew from {before} to {after} bytes"
    );
    assert!(closed, "the server read {sent} bytes of one header line");
    assert!(alive(&mut srv));
    load_page(&srv).unwrap();
}

#[test]
fn another_http_version_is_505_and_closed() {
    let srv = Serving::start(&[TRAIN]);
    let root = format!("/?token={}", srv.token);
    for line in [
        format!("GET {root} HTTP/2.0\r\nHost: {}\r\n\r\n", srv.host_header()),
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_string(),
        format!("GET {root} HTTP/1.2\r\nHost: {}\r\n\r\n", srv.host_header()),
    ] {
        let mut s = srv.connect();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        // read_reply reads to the end: the server closed the connection.
        read_reply(&mut s).assert_error(505, &line);
    }
    load_page(&srv).unwrap();
}

#[test]
fn oversized_headers_are_431_and_closed() {
    let srv = Serving::start(&[TRAIN]);
    let root = format!("/?token={}", srv.token);
    let host = srv.host_header();
    let many: Vec<(String, String)> = (0..200)
        .map(|i| (format!("X-Filler-{i}"), "f".repeat(64)))
        .collect();
    let long = vec![("X-Long".to_string(), "l".repeat(9000))];
    for (what, extra) in [("200 header lines", many), ("one 9 KB header", long)] {
        let mut headers: Vec<(&str, &str)> = vec![("Host", &host)];
        headers.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut s = srv.connect();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        send(&mut s, "GET", &root, &headers, b"");
        s.shutdown(Shutdown::Write).unwrap();
        read_reply(&mut s).assert_error(431, what);
    }
    // Just under the bound is answered.
    let fit = "f".repeat(4000);
    let r = srv.request("GET", &root, &[("Host", &host), ("X-Fits", &fit)], b"");
    assert_eq!(r.status, 200);
}

#[test]
fn a_head_that_never_ends_is_timed_out() {
    let srv = Serving::start(&[TRAIN]);
    let timeout = memlens::serve::HEAD_TIMEOUT;
    let mut idle = srv.connect();
    let mut half = srv.connect();
    half.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    for s in [&idle, &half] {
        s.set_read_timeout(Some(timeout + Duration::from_secs(5)))
            .unwrap();
    }
    let t0 = Instant::now();
    let mut buf = Vec::new();
    // Nothing sent: closed without a word.
    idle.read_to_end(&mut buf).expect("closed, not reset");
    assert!(buf.is_empty(), "{}", String::from_utf8_lossy(&buf));
    let waited = t0.elapsed();
    assert!(
        waited + Duration::from_millis(500) >= timeout && waited < timeout + Duration::from_secs(3),
        "closed after {waited:?}"
    );
    // Half a head: 408, then closed.
    read_reply(&mut half).assert_error(408, "half a head");
    assert!(t0.elapsed() < timeout + Duration::from_secs(3));
    load_page(&srv).unwrap();
}

#[test]
fn bound_to_mapped_loopback_it_does_not_warn() {
    let srv = Serving::start(&[TRAIN, "--bind", "::ffff:127.0.0.1"]);
    assert_eq!(srv.host, "[::ffff:127.0.0.1]");
    load_page(&srv).unwrap();
    // The warning comes before the URL line: after a page load, stderr has it if ever.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!srv.stderr().contains("warning"), "{}", srv.stderr());
    assert!(srv.get("/").status == 403, "no token");
}
