//! A request's head → the route it asks for, or the refusal it gets: the checks in order
//! ([`admit`]), the query's decoding and the routes' parameters.

use super::{check_host, check_token, Token, MAX_URL};
use crate::compose::page::window::WindowRequest;
use std::net::SocketAddr;

/// What a request asks for, once admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /?file=K`: the page of file K.
    Page {
        /// Index of the file on the command line.
        file: usize,
    },
    /// `GET /runs`: the page of every file served together (the compare page of two, the
    /// runs page of more); not found with one file.
    Runs,
    /// `GET /api/window?file=K&device=D&first=A&last=B&columns=C`: the timeline of a window.
    Window {
        /// Index of the file on the command line.
        file: usize,
        /// Device, window and columns.
        request: WindowRequest,
    },
    /// `GET /api/moment?file=K&device=D&at=E&name=NAME`: the state after event E.
    Moment {
        /// Index of the file on the command line.
        file: usize,
        /// Device index.
        device: u32,
        /// Event index (-1: before the first event).
        at: i64,
        /// The moment's name on the page (`at` when not given).
        name: String,
    },
}

impl Route {
    /// The file the route is about (the first for `/runs`).
    pub fn file(&self) -> usize {
        match self {
            Route::Page { file } | Route::Window { file, .. } | Route::Moment { file, .. } => *file,
            Route::Runs => 0,
        }
    }
}

/// Why a request is not answered with what it asks for: an HTTP status and one line saying
/// why (sent as `{"error": ...}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP status code (400, 403, 404, 405, 413, 414; 431 and 505 from the wire format).
    pub status: u16,
    /// Why, in one line.
    pub message: String,
}

impl Refusal {
    pub(super) fn new(status: u16, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// The parts of a request the checks read: method, target, and the headers that matter.
#[derive(Clone, Debug, Default)]
pub struct Head<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The request target as sent: path and query.
    pub url: &'a str,
    /// Every `Host` header's value.
    pub hosts: Vec<&'a str>,
    /// Every `X-Memlens-Token` header's value.
    pub tokens: Vec<&'a str>,
    /// Every `Content-Length` header's value.
    pub content_lengths: Vec<&'a str>,
    /// Whether a `Transfer-Encoding` header was sent (a chunked body).
    pub transfer_encoding: bool,
}

/// The query string as decoded `(name, value)` pairs, `+` read as a space; an empty item
/// (`a=1&&b=2`) is skipped. An escape that is not two hex digits, or a name or value that is
/// not UTF-8, is an error.
pub fn parse_query(query: &str) -> Result<Vec<(String, String)>, String> {
    query
        .split('&')
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            Ok((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| "malformed %-escape in the query".to_string())?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "the query is not UTF-8".to_string())
}

/// Decides what to do with a request to a server bound at `bound` with `token`, serving
/// `files` files: the route it asks for, or the refusal it gets. The checks run in this
/// order: URL length (414), `Host` (403), token (403), method (405), body (413), route (404
/// for an unknown path or file, 400 for a missing, repeated, unknown or malformed parameter).
pub fn admit(
    head: &Head,
    bound: SocketAddr,
    token: &Token,
    files: usize,
) -> Result<Route, Refusal> {
    if head.url.len() > MAX_URL {
        return Err(Refusal::new(
            414,
            format!("the URL is longer than {MAX_URL} bytes"),
        ));
    }
    if !check_host(&head.hosts, bound) {
        return Err(Refusal::new(
            403,
            "the Host header does not name this server",
        ));
    }
    let (path, query) = head.url.split_once('?').unwrap_or((head.url, ""));
    // The query's tokens, read item by item: a malformed item elsewhere is a 400 below, once
    // the request has shown it holds the token.
    let query_tokens: Vec<String> = query
        .split('&')
        .filter_map(|item| parse_query(item).ok()?.pop())
        .filter(|(k, _)| k == "token")
        .map(|(_, v)| v)
        .collect();
    let mut presented = head.tokens.clone();
    presented.extend(query_tokens.iter().map(String::as_str));
    if !check_token(&presented, token) {
        return Err(Refusal::new(403, "missing or wrong token"));
    }
    if !matches!(head.method, "GET" | "HEAD") {
        return Err(Refusal::new(
            405,
            format!("method {} is not allowed: GET or HEAD", head.method),
        ));
    }
    if head.transfer_encoding || head.content_lengths.iter().any(|v| v.trim() != "0") {
        return Err(Refusal::new(413, "a request may not have a body"));
    }
    let params = parse_query(query).map_err(|m| Refusal::new(400, m))?;
    parse_route(path, &params, files)
}

/// The route of `path` with the query's `params` (a `token` among them is allowed and not
/// read here), for a server of `files` files.
pub fn parse_route(
    path: &str,
    params: &[(String, String)],
    files: usize,
) -> Result<Route, Refusal> {
    let allowed: &[&str] = match path {
        "/" => &["token", "file"],
        "/runs" if files > 1 => &["token"],
        "/api/window" => &["token", "file", "device", "first", "last", "columns"],
        "/api/moment" => &["token", "file", "device", "at", "name"],
        _ => return Err(Refusal::new(404, "not found")),
    };
    for (i, (k, _)) in params.iter().enumerate() {
        if !allowed.contains(&k.as_str()) {
            return Err(Refusal::new(400, format!("unknown parameter {k:?}")));
        }
        if params[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(Refusal::new(400, format!("parameter {k:?} is given twice")));
        }
    }
    let p = Params(params);
    let file = p.int::<usize>("file")?.unwrap_or(0);
    if file >= files {
        return Err(Refusal::new(
            404,
            format!(
                "no file {file}: {files} file{} served",
                if files == 1 { " is" } else { "s are" }
            ),
        ));
    }
    Ok(match path {
        "/" => Route::Page { file },
        "/runs" => Route::Runs,
        "/api/window" => Route::Window {
            file,
            request: WindowRequest {
                device: p.required("device")?,
                first: p.required("first")?,
                last: p.required("last")?,
                columns: p.required("columns")?,
            },
        },
        _ => Route::Moment {
            file,
            device: p.required("device")?,
            at: p.required("at")?,
            name: p.get("name").unwrap_or("at").to_string(),
        },
    })
}

struct Params<'a>(&'a [(String, String)]);

impl Params<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An integer parameter: decimal digits with an optional `-`, in the type's range.
    fn int<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, Refusal> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let digits = v.strip_prefix('-').unwrap_or(v);
        let parsed = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            v.parse::<T>().ok()
        } else {
            None
        };
        parsed.map(Some).ok_or_else(|| {
            Refusal::new(
                400,
                format!("parameter {name:?}: expected an integer in range, got {v:?}"),
            )
        })
    }

    fn required<T: std::str::FromStr>(&self, name: &str) -> Result<T, Refusal> {
        self.int(name)?
            .ok_or_else(|| Refusal::new(400, format!("missing parameter {name:?}")))
    }
}
