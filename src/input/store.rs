//! Snapshots read from object storage (`--features cloud`, issue 55): `s3://`, `gs://`,
//! `az://` and `https://` URLs through the Apache Arrow project's `object_store`, with each
//! cloud's standard environment for credentials and endpoint (for S3: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`); globs listed
//! from the store ([`glob`]); dataset parts put whole ([`put`]).
//!
//! An object is streamed, never staged on disk: its body's chunks come over a channel of
//! [`CHUNKS_IN_FLIGHT`] from a task on the one runtime every request runs on, so memory is
//! bounded as for a pipe; the caller reads it as any `Read`. A store (its client and
//! connections) is made once per bucket and kept for the run.

use super::pattern;
use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::ObjectStore;
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};

/// Chunks of a body that may wait for the reader (each as the server sent it, ~8-64 KiB).
const CHUNKS_IN_FLIGHT: usize = 64;

/// The object an URL names: its store, its key, and the URL of the store's root.
pub struct Located {
    /// The bucket, container or web server.
    pub store: Arc<dyn ObjectStore>,
    /// The object's key within it.
    pub path: StorePath,
    /// `scheme://bucket/`: the URL of the store's root, that a key is appended to.
    pub root: String,
}

impl Located {
    /// The object at `rel` (a `/`-separated relative key) below this one's key.
    pub fn child(&self, rel: &str) -> Located {
        let base = self.path.as_ref().trim_end_matches('/');
        let key = if base.is_empty() {
            rel.to_string()
        } else {
            format!("{base}/{rel}")
        };
        Located {
            store: Arc::clone(&self.store),
            path: StorePath::from(key),
            root: self.root.clone(),
        }
    }

    /// The object's URL.
    pub fn url(&self) -> String {
        format!("{}{}", self.root, encode_key(self.path.as_ref()))
    }
}

/// The runtime every request runs on (two worker threads). A store's pooled connections
/// belong to the runtime that opened them, so there is one for the whole run.
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("memlens-store")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the object-storage runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// How a failed request is retried: a few times within 20 s (transient 5xx answers and cut
/// connections at scale), not object_store's 10 times within 3 minutes, which leaves a user
/// with a wrong endpoint waiting in silence.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 4,
        retry_timeout: std::time::Duration::from_secs(20),
        ..Default::default()
    }
}

/// The store of `url`'s bucket (or web origin), made on first use from the environment.
fn store_of(parsed: &url::Url, url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    let scheme = parsed.scheme().to_ascii_lowercase();
    let id = format!("{scheme}://{}", parsed.host_str().unwrap_or_default());
    let stores = STORES.get_or_init(Default::default);
    if let Some(s) = stores.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
        return Ok(Arc::clone(s));
    }
    let made: Arc<dyn ObjectStore> = match scheme.as_str() {
        "s3" | "s3a" => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_retry(retry())
                .with_url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        "gs" | "gcs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_retry(retry())
                .with_url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        "az" | "azure" | "abfs" | "abfss" | "adl" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_retry(retry())
                .with_url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        "http" | "https" => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_retry(retry())
                .with_url(parsed.origin().ascii_serialization())
                .build()
                .map_err(|e| e.to_string())?,
        ),
        other => return Err(format!("no object store for the scheme {other:?}")),
    };
    stores
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::clone(&made));
    Ok(made)
}

/// Resolves `url` to its store (credentials and endpoint from the environment) and key; an
/// error says what was wrong with the URL or the configuration.
pub fn locate(url: &str) -> Result<Located, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    let key = parsed.path().trim_start_matches('/');
    let path = StorePath::from_url_path(key).map_err(|e| format!("bad key {key:?}: {e}"))?;
    let store = store_of(&parsed, url)?;
    let root = format!(
        "{}://{}/",
        parsed.scheme(),
        parsed.host_str().unwrap_or_default()
    );
    Ok(Located { store, path, root })
}

/// The object at `loc` as a stream of bytes; a failed request or a body cut short is an
/// `io::Error` naming what failed.
pub fn reader(loc: Located) -> Box<dyn Read + Send> {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(CHUNKS_IN_FLIGHT);
    match runtime() {
        Ok(rt) => {
            rt.spawn(async move {
                let mut body = match loc.store.get(&loc.path).await {
                    Ok(got) => got.into_stream(),
                    Err(e) => {
                        let _ = tx.send(Err(std::io::Error::other(describe(&e)))).await;
                        return;
                    }
                };
                while let Some(chunk) = body.next().await {
                    let sent = chunk.map_err(|e| std::io::Error::other(describe(&e)));
                    if tx.send(sent).await.is_err() {
                        return; // the reader stopped reading
                    }
                }
            });
        }
        Err(m) => {
            let _ = tx.try_send(Err(std::io::Error::other(m)));
        }
    }
    Box::new(ChannelReader {
        rx,
        current: bytes::Bytes::new(),
    })
}

/// The URLs of the objects whose keys match `pattern`'s key ([`pattern::matches`]: `*`, `?`,
/// `**`), sorted. The store is listed below the pattern's literal directory only, page by
/// page, and only the matches are kept.
pub fn glob(pattern: &str) -> Result<Vec<String>, String> {
    let loc = locate(pattern)?;
    let parsed = url::Url::parse(pattern).map_err(|e| format!("not a URL: {e}"))?;
    let key_pattern = decode(parsed.path().trim_start_matches('/'));
    let prefix = pattern::literal_prefix(&key_pattern).trim_end_matches('/');
    let prefix = (!prefix.is_empty()).then(|| StorePath::from(prefix));
    let rt = runtime()?;
    let mut found = rt.block_on(async {
        let mut listing = loc.store.list(prefix.as_ref());
        let mut found = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| describe(&e))?;
            let key = meta.location.as_ref();
            if pattern::matches(&key_pattern, key) {
                found.push(format!("{}{}", loc.root, encode_key(key)));
            }
        }
        Ok::<_, String>(found)
    })?;
    found.sort();
    Ok(found)
}

/// Puts `bytes` at `loc` in one request, so the object appears whole or not at all; an
/// object already there is replaced only with `force`. Without it the put is conditional
/// (`If-None-Match: *`, one request); a store that cannot put conditionally is asked with a
/// HEAD first.
pub fn put(loc: &Located, bytes: Vec<u8>, force: bool) -> Result<(), String> {
    use object_store::{PutMode, PutOptions};
    const EXISTS: &str = "exists (--force replaces it)";
    runtime()?.block_on(async {
        let payload: object_store::PutPayload = bytes.into();
        if force {
            return loc
                .store
                .put(&loc.path, payload)
                .await
                .map(|_| ())
                .map_err(|e| describe(&e));
        }
        let create = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match loc.store.put_opts(&loc.path, payload.clone(), create).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => Err(EXISTS.to_string()),
            Err(object_store::Error::NotImplemented | object_store::Error::NotSupported { .. }) => {
                match loc.store.head(&loc.path).await {
                    Ok(_) => return Err(EXISTS.to_string()),
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(describe(&e)),
                }
                loc.store
                    .put(&loc.path, payload)
                    .await
                    .map(|_| ())
                    .map_err(|e| describe(&e))
            }
            Err(e) => Err(describe(&e)),
        }
    })
}

/// `key` as it goes into a URL: bytes other than letters, digits, `-._~/` percent-encoded.
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` sequences of a URL's path decoded (invalid ones kept as written).
fn decode(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
            } else if said("error sending request") {
                // "Error performing GET http://host/key in 885ms, after 4 retries, ...": the
                // endpoint is what the user can check.
                let endpoint = full
                    .split_whitespace()
                    .find(|w| w.starts_with("http://") || w.starts_with("https://"))
                    .and_then(|u| url::Url::parse(u).ok())
                    .map(|u| u.origin().ascii_serialization())
                    .unwrap_or_else(|| "the store".into());
                format!("cannot reach {endpoint}: the connection failed after 4 retries (for S3, AWS_ENDPOINT_URL names the endpoint)")
            } else {
                cut
            }
        }
    }
}

/// Reads what [`reader`]'s task sends.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0), // the body ended
            }
        }
        let n = self.current.len().min(buf.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        bytes::Buf::advance(&mut self.current, n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_go_into_urls_and_back() {
        assert_eq!(
            encode_key("job/it 1/rank0.pickle"),
            "job/it%201/rank0.pickle"
        );
        assert_eq!(decode("job/it%201/rank%2A.pickle"), "job/it 1/rank*.pickle");
        assert_eq!(decode("bad%zz%4"), "bad%zz%4");
        assert_eq!(decode(&encode_key("a%b c/é")), "a%b c/é");
    }
}
