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

fn moto() -> Moto {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(common::python3())
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto (pip install 'moto[server]')");
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
    panic!("moto did not listen on {}", m.url);
}

/// Creates `bucket` and puts each (key, bytes) there with boto3.
fn put(m: &Moto, bucket: &str, objects: &[(&str, &Path)]) {
    let script = format!(
        "import boto3,sys\ns3=boto3.client('s3',endpoint_url='{}',aws_access_key_id='x',aws_secret_access_key='x',region_name='us-east-1')\ns3.create_bucket(Bucket='{bucket}')\n{}\ns3.put_object(Bucket='{bucket}',Key='empty.pickle',Body=b'')\n",
        m.url,
        objects
            .iter()
            .map(|(k, p)| format!("s3.upload_file({:?},'{bucket}','{k}')", p.to_str().unwrap()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let o = Command::new(common::python3())
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
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
