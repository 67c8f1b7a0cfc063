//! Object storage (issue 55, `--features cloud`): snapshots read from a real S3-compatible
//! server process (`python3 -m moto.server` on loopback), each answer equal to the local
//! file's, and each failure one line naming the URL and what failed.

use crate::common;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A moto server on a free loopback port, stopped when dropped.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether moto's server and boto3 are there (required under CI: scripts/test installs them).
fn have_moto() -> bool {
    common::require_python_modules(&["moto.server", "boto3"])
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `cmd` (a server that will listen on `port`) and waits until it does; stopped when
/// the returned value is dropped.
fn serve(cmd: &mut Command, port: u16, what: &str) -> Moto {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    // Held from here on, so that a panic below still stops it (Drop).
    let m = Moto {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return m;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{what} did not listen on {}", m.url);
}

fn moto() -> Moto {
    let port = free_port();
    serve(
        Command::new(common::python3()).args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ]),
        port,
        "moto (pip install 'moto[server]')",
    )
}

/// Creates `bucket` and puts each (key, bytes) there with boto3.
fn put(m: &Moto, bucket: &str, objects: &[(&str, &Path)]) {
    let uploads: Vec<String> = objects
        .iter()
        .map(|(k, p)| format!("s3.upload_file({:?},'{bucket}','{k}')", p.to_str().unwrap()))
        .collect();
    boto(
        m,
        &format!(
            "s3.create_bucket(Bucket='{bucket}')\n{}\ns3.put_object(Bucket='{bucket}',Key='empty.pickle',Body=b'')\n",
            uploads.join("\n")
        ),
    );
}

fn memlens_s3(m: &Moto, args: &[&str], credentials: bool) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memlens"));
    c.args(args)
        .env("AWS_ENDPOINT_URL", &m.url)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1");
    if credentials {
        c.env("AWS_ACCESS_KEY_ID", "x")
            .env("AWS_SECRET_ACCESS_KEY", "x");
    } else {
        c.env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY");
    }
    c.output().unwrap()
}

#[test]
fn a_snapshot_in_a_bucket_reads_as_the_local_file_and_failures_are_one_line() {
    if !have_moto() {
        return;
    }
    let m = moto();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/frag_oom.pickle");
    put(&m, "job", &[("runs/rank0.pickle", &sample)]);
    let json = |o: std::process::Output| {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_object_mut().unwrap().remove("file");
        v
    };
    let remote = json(memlens_s3(
        &m,
        &["summary", "s3://job/runs/rank0.pickle", "--format", "json"],
        true,
    ));
    let local = json(common::memlens([
        "summary",
        sample.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(remote, local);
    for (url, credentials, says) in [
        ("s3://job/runs/missing.pickle", true, "no such object"),
        ("s3://nobucket/x.pickle", true, "no such bucket"),
        ("s3://job/empty.pickle", true, "file is empty (0 bytes)"),
        ("s3://job/runs/rank0.pickle", false, "no credentials"),
    ] {
        let o = memlens_s3(&m, &["summary", url], credentials);
        assert_eq!(o.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{url}: {lines:?}");
        assert!(
            lines[0].starts_with(&format!("memlens: {url}: ")),
            "{lines:?}"
        );
        assert!(lines[0].contains(says), "{url}: {lines:?}");
    }
}

/// Runs `script` (Python, boto3 client `s3` on the server) and returns its standard output.
fn boto(m: &Moto, script: &str) -> String {
    let full = format!(
        "import boto3,sys,os\ns3=boto3.client('s3',endpoint_url='{}',aws_access_key_id='x',aws_secret_access_key='x',region_name='us-east-1')\n{script}",
        m.url
    );
    let o = Command::new(common::python3())
        .args(["-c", &full])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok_stdout(o: std::process::Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The four rank files of samples/ranks under two iterations' prefixes, and 3,000 other
/// keys around them (three pages of a listing): a `**` glob lists exactly the ranks, and
/// `batch` over the glob gives the rows of `batch` over the local files.
#[test]
fn a_url_glob_lists_the_store_across_pages_and_batch_reads_what_it_names() {
    if !have_moto() {
        return;
    }
    let m = moto();
    let ranks = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/ranks");
    boto(
        &m,
        &format!(
            "s3.create_bucket(Bucket='fleet')\n\
             from concurrent.futures import ThreadPoolExecutor\n\
             def one(i): s3.put_object(Bucket='fleet',Key='job/iteration_%d/noise%04d.txt' % (i % 3, i),Body=b'x')\n\
             list(ThreadPoolExecutor(16).map(one, range(3000)))\n\
             for r in range(4):\n  s3.upload_file(os.path.join({:?},'rank%d.pickle' % r),'fleet','job/iteration_%d/rank%d.pickle' % (r // 2, r))\n\
             s3.upload_file(os.path.join({:?},'rank0.pickle'),'fleet','other/rank0.pickle')\n",
            ranks.to_str().unwrap(),
            ranks.to_str().unwrap()
        ),
    );
    let listed = ok_stdout(memlens_s3(
        &m,
        &["batch", "--list", "s3://fleet/job/**/rank*.pickle"],
        true,
    ));
    let want: Vec<String> = (0..4)
        .map(|r| format!("s3://fleet/job/iteration_{}/rank{r}.pickle", r / 2))
        .collect();
    assert_eq!(listed.lines().collect::<Vec<_>>(), want);
    // One component only: `*` does not cross the iteration directories.
    let o = memlens_s3(&m, &["batch", "--list", "s3://fleet/job/*.pickle"], true);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("matches no file"));

    let rows = |o: std::process::Output| {
        let v: serde_json::Value = serde_json::from_str(&ok_stdout(o)).unwrap();
        let mut files = v["files"].as_array().unwrap().clone();
        for f in &mut files {
            let name = f["file"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string();
            f["file"] = serde_json::Value::String(name);
        }
        (files, v["imbalance"].clone())
    };
    let remote = rows(memlens_s3(
        &m,
        &[
            "batch",
            "--format",
            "json",
            "s3://fleet/job/**/rank*.pickle",
        ],
        true,
    ));
    let local = rows(common::memlens([
        "batch",
        "--format",
        "json",
        ranks.to_str().unwrap(),
    ]));
    assert_eq!(remote.0, local.0);
    assert_eq!(remote.1["outlier_rank"], local.1["outlier_rank"]);
    assert_eq!(remote.1["max_peak_bytes"], local.1["max_peak_bytes"]);
}

/// `batch --format parquet -o s3://…` puts the same parts, byte for byte, as `-o DIR` on the
/// same inputs, and `batch --from-dataset s3://…` reports them as the local dataset and as
/// the files themselves; an existing part is kept without `--force`; an object that vanished
/// after it was listed is a failed row, the others are read.
#[test]
fn a_dataset_goes_into_the_store_and_a_vanished_object_is_a_failed_row() {
    if !have_moto() {
        return;
    }
    let m = moto();
    let ranks = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/ranks");
    boto(
        &m,
        &format!(
            "s3.create_bucket(Bucket='inbox')\ns3.create_bucket(Bucket='outbox')\n\
             for r in range(4):\n  s3.upload_file(os.path.join({:?},'rank%d.pickle' % r),'inbox','run1/rank%d.pickle' % r)\n",
            ranks.to_str().unwrap()
        ),
    );
    let urls: Vec<String> = ok_stdout(memlens_s3(
        &m,
        &["batch", "--list", "s3://inbox/run1/rank*.pickle"],
        true,
    ))
    .lines()
    .map(str::to_string)
    .collect();
    assert_eq!(urls.len(), 4);
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("ds");
    let args = |out: &str| -> Vec<String> {
        let mut a: Vec<String> = [
            "batch",
            "--format",
            "parquet",
            "--partition-by",
            "rank",
            "-o",
            out,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(urls.iter().cloned());
        a
    };
    let run = |out: &str| {
        let a = args(out);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        memlens_s3(&m, &a, true)
    };
    ok_stdout(run(local.to_str().unwrap()));
    ok_stdout(run("s3://outbox/fleet/ds/"));
    // Every local part, and the object of the same key, byte for byte.
    let mut parts = Vec::new();
    let mut stack = vec![local.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                parts.push(p);
            }
        }
    }
    parts.sort();
    assert!(parts.len() >= 4 * 5, "{parts:?}");
    let keys = boto(
        &m,
        "for o in s3.get_paginator('list_objects_v2').paginate(Bucket='outbox',Prefix='fleet/ds/'):\n  [print(c['Key'], c['Size']) for c in o.get('Contents',[])]\n",
    );
    let mut stored: Vec<(String, u64)> = keys
        .lines()
        .map(|l| {
            let (k, n) = l.rsplit_once(' ').unwrap();
            (k.to_string(), n.parse().unwrap())
        })
        .collect();
    stored.sort();
    let mut want: Vec<(String, u64)> = parts
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&local).unwrap().to_str().unwrap();
            (
                format!("fleet/ds/{rel}"),
                std::fs::metadata(p).unwrap().len(),
            )
        })
        .collect();
    want.sort();
    assert_eq!(stored, want);
    let first = &want[0].0;
    let got = boto(
        &m,
        &format!(
            "sys.stdout.write(s3.get_object(Bucket='outbox',Key={first:?})['Body'].read().hex())"
        ),
    );
    let rel = first.strip_prefix("fleet/ds/").unwrap();
    let bytes = std::fs::read(local.join(rel)).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(got, hex);
    // The dataset in the store reads back as the local one, and as the files themselves.
    let report = |ds: &str| {
        ok_stdout(memlens_s3(
            &m,
            &["batch", "--from-dataset", "--format", "json", ds],
            true,
        ))
    };
    let from_store = report("s3://outbox/fleet/ds/");
    assert_eq!(from_store, report(local.to_str().unwrap()));
    let mut direct = vec!["batch", "--format", "json"];
    direct.extend(urls.iter().map(String::as_str));
    assert_eq!(from_store, ok_stdout(memlens_s3(&m, &direct, true)));
    let v: serde_json::Value = serde_json::from_str(&from_store).unwrap();
    assert_eq!(v["cross_rank"]["outliers"][0]["rank"], 2);
    let o = memlens_s3(
        &m,
        &["batch", "--from-dataset", "s3://outbox/nothing/"],
        true,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a memlens dataset"));
    // Without --force the parts already there are kept, in one line per file.
    let o = run("s3://outbox/fleet/ds/");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("exists (--force replaces it)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // rank2 vanishes between the listing and the read.
    boto(
        &m,
        "s3.delete_object(Bucket='inbox',Key='run1/rank2.pickle')\n",
    );
    let a: Vec<&str> = ["batch", "--format", "json"]
        .into_iter()
        .chain(urls.iter().map(String::as_str))
        .collect();
    let o = memlens_s3(&m, &a, true);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ok: Vec<bool> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["ok"].as_bool().unwrap())
        .collect();
    assert_eq!(ok, [true, true, false, true]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("s3://inbox/run1/rank2.pickle: no such object"),
        "{err}"
    );
}

/// The listing server of tests/data/s3_listing_server.py on a free loopback port (a bucket of
/// `n` generated keys and the given objects), stopped when dropped.
fn listing_server(bucket: &str, n: usize, objects: &[String]) -> Moto {
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s3_listing_server.py");
    serve(
        Command::new(common::python3())
            .arg(&script)
            .args([port.to_string(), bucket.to_string(), n.to_string()])
            .args(objects),
        port,
        "the listing server",
    )
}

/// A bucket of a million keys (1,000 listing pages; an S3-compatible server process that
/// generates them page by page: moto would need a million puts) with the four rank files
/// among them, one listed with 100 bytes though it has grown since: a `**` glob lists every
/// page, names exactly the four, and `batch` reads each whole, giving the rows of the local
/// files, with memory that does not grow with the keys (a million names held would be
/// ~60 MiB).
#[test]
fn a_glob_over_a_million_keys_names_the_ranks_in_bounded_memory() {
    let ranks = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/ranks");
    let at = ["0000", "0500", "0999", "0999"];
    let objects: Vec<String> = (0..4)
        .map(|r| {
            let grown = if r == 3 { "@100" } else { "" };
            format!(
                "job/{}/rank{r}.pickle{grown}={}",
                at[r],
                ranks.join(format!("rank{r}.pickle")).display()
            )
        })
        .collect();
    let m = listing_server("fleet", 1_000_000, &objects);
    let mut c = Command::new(env!("CARGO_BIN_EXE_memlens"));
    c.args([
        "batch",
        "--format",
        "json",
        "s3://fleet/job/**/rank*.pickle",
    ])
    .env("AWS_ENDPOINT_URL", &m.url)
    .env("AWS_ALLOW_HTTP", "true")
    .env("AWS_REGION", "us-east-1")
    .env("AWS_ACCESS_KEY_ID", "x")
    .env("AWS_SECRET_ACCESS_KEY", "x")
    .env("MEMLENS_PEAK_RSS", "1");
    let (o, rss) = common::split_peak_rss(c.output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&ok_stdout(o)).unwrap();
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..4)
        .map(|r| format!("s3://fleet/job/{}/rank{r}.pickle", at[r]))
        .collect();
    assert_eq!(files, want);
    let mut stats = String::new();
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(m.url.trim_start_matches("http://")).unwrap();
        c.write_all(b"GET /_stats HTTP/1.0\r\n\r\n").unwrap();
        c.read_to_string(&mut stats).unwrap();
    }
    let pages: u64 = stats
        .rsplit("\r\n\r\n")
        .next()
        .and_then(|b| b.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(pages >= 1000, "{pages} listing pages for a million keys");
    // The rows are the local files' (the grown object read whole).
    let local: serde_json::Value = serde_json::from_str(&ok_stdout(common::memlens([
        "batch",
        "--format",
        "json",
        ranks.to_str().unwrap(),
    ])))
    .unwrap();
    for (r, (got, want)) in v["files"]
        .as_array()
        .unwrap()
        .iter()
        .zip(local["files"].as_array().unwrap())
        .enumerate()
    {
        for k in [
            "peak_bytes",
            "reserved_bytes",
            "top_site",
            "top_site_bytes",
            "ooms",
        ] {
            assert_eq!(got[k], want[k], "rank {r}: {k}");
        }
    }
    assert!(rss > 0 && rss < 40 << 20, "peak RSS {rss} bytes");
}
