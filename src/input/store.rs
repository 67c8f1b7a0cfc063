//! Snapshots read from object storage (`--features cloud`, issue 55): `s3://`, `gs://`,
//! `az://` and `https://` URLs through the Apache Arrow project's `object_store`, with each
//! cloud's standard environment for credentials and endpoint (for S3: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`).
//!
//! An object is streamed, never staged on disk: a thread of its own runs the request on a
//! one-thread runtime and hands the body's chunks over a channel of [`CHUNKS_IN_FLIGHT`], so
//! memory is bounded as for a pipe; the caller reads it as any `Read`.

use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::ObjectStore;
use std::io::Read;
use std::sync::mpsc;
use std::sync::Arc;

/// Chunks of a body that may wait for the reader (each as the server sent it, ~8-64 KiB).
const CHUNKS_IN_FLIGHT: usize = 64;

/// The store a URL names and the object's path in it.
pub struct Located {
    /// The bucket, container or web server.
    pub store: Arc<dyn ObjectStore>,
    /// The object's key within it.
    pub path: StorePath,
}

/// Resolves `url` to its store (credentials and endpoint from the environment) and key; an
/// error says what was wrong with the URL or the configuration.
pub fn locate(url: &str) -> Result<Located, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    let key = parsed.path().trim_start_matches('/');
    let path = StorePath::from_url_path(key).map_err(|e| format!("bad key {key:?}: {e}"))?;
    let store: Arc<dyn ObjectStore> = match parsed.scheme().to_ascii_lowercase().as_str() {
        "s3" | "s3a" => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        "gs" | "gcs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        "az" | "azure" | "abfs" | "abfss" | "adl" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        "http" | "https" => {
            let origin = parsed.origin().ascii_serialization();
            Arc::new(
                object_store::http::HttpBuilder::new()
                    .with_url(origin)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
        }
        other => return Err(format!("no object store for the scheme {other:?}")),
    };
    Ok(Located { store, path })
}

/// The object at `loc` as a stream of bytes, read on a thread of its own; a failed request
/// or a body cut short is an `io::Error` naming what failed.
pub fn reader(loc: Located) -> Box<dyn Read + Send> {
    let (tx, rx) = mpsc::sync_channel::<std::io::Result<bytes_chunk::Chunk>>(CHUNKS_IN_FLIGHT);
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        runtime.block_on(async move {
            let body = match loc.store.get(&loc.path).await {
                Ok(got) => got.into_stream(),
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::other(describe(&e))));
                    return;
                }
            };
            let mut body = body;
            while let Some(chunk) = body.next().await {
                let sent = chunk
                    .map(bytes_chunk::Chunk::from)
                    .map_err(|e| std::io::Error::other(describe(&e)));
                if tx.send(sent).is_err() {
                    return; // the reader stopped reading
                }
            }
        });
    });
    Box::new(ChannelReader {
        rx,
        current: bytes_chunk::Chunk::default(),
    })
}

/// One short line for a failed request: what failed, in the user's words, without the server's
/// XML body (`no such bucket`, `no such object`, `access denied`, `no credentials`).
pub fn describe(e: &object_store::Error) -> String {
    let full = e.to_string();
    let said = |code: &str| full.contains(code);
    match e {
        object_store::Error::NotFound { .. } if said("NoSuchBucket") => {
            "no such bucket (the store answered NoSuchBucket)".to_string()
        }
        object_store::Error::NotFound { .. } => "no such object".to_string(),
        object_store::Error::PermissionDenied { .. } => {
            "access denied (the credentials may not read this object)".to_string()
        }
        object_store::Error::Unauthenticated { .. } => {
            "not authenticated: no credentials, or the store refused them (for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)".to_string()
        }
        _ => {
            let first = full.lines().next().unwrap_or_default();
            let cut: String = first.chars().take(200).collect();
            if said("169.254.169.254") {
                "no credentials: none in the environment (for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and no instance metadata to ask".to_string()
            } else if said("InvalidAccessKeyId") || said("SignatureDoesNotMatch") {
                format!("the store refused the credentials: {cut}")
            } else {
                cut
            }
        }
    }
}

mod bytes_chunk {
    /// One chunk of a body and how much of it was read.
    #[derive(Default)]
    pub struct Chunk {
        pub data: Vec<u8>,
        pub at: usize,
    }
    impl<T: AsRef<[u8]>> From<T> for Chunk {
        fn from(b: T) -> Self {
            Chunk {
                data: b.as_ref().to_vec(),
                at: 0,
            }
        }
    }
}

/// Reads what [`reader`]'s thread sends.
struct ChannelReader {
    rx: mpsc::Receiver<std::io::Result<bytes_chunk::Chunk>>,
    current: bytes_chunk::Chunk,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.at == self.current.data.len() {
            match self.rx.recv() {
                Ok(chunk) => self.current = chunk?,
                Err(_) => return Ok(0), // the body ended
            }
        }
        let left = &self.current.data[self.current.at..];
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.current.at += n;
        Ok(n)
    }
}
