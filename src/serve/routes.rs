//! What each route answers: the page (`render::html::write_served`), a window
//! (`compose::page::window::window`) or a moment (`compose::page::window::moment`) of a file
//! the server holds. Nothing is computed here; an analysis's refusal is a 400 with its line.

use super::Route;
use crate::compose::page::window::{moment, window, WindowIndex};
use crate::compose::page::{PageOptions, PageReport};
use crate::compose::runs::RunsPage;
use crate::model::Snapshot;
use crate::render::html::{self, Served};
use crate::replay::DeviceReplay;
use serde::Serialize;

/// One file the server holds: what the page and the window and moment analyses need, made
/// once at start.
pub struct ServedFile {
    /// The file's name as given on the command line (the page's title).
    pub name: String,
    /// The snapshot (cut down to `--device` when given).
    pub snap: Snapshot,
    /// The replay of each device with a trace.
    pub replays: Vec<DeviceReplay>,
    /// The page report, as `memlens report` would write it.
    pub report: PageReport,
    /// What finds each window's allocations fast (`WindowIndex::new(&snap, &replays)`).
    pub index: WindowIndex,
}

/// Everything the server answers from: its files, in command-line order, and the page options
/// they were reported with (which the moment analysis takes too).
pub struct State {
    files: Vec<ServedFile>,
    names: Vec<String>,
    page: PageOptions,
    runs: Option<RunsPage>,
}

impl State {
    /// The state of a server of `files`, reported with `page`.
    pub fn new(files: Vec<ServedFile>, page: PageOptions) -> State {
        let names = files.iter().map(|f| f.name.clone()).collect();
        State {
            files,
            names,
            page,
            runs: None,
        }
    }

    /// The state with the page of all its files together (`/runs`), made at start.
    pub fn with_runs(mut self, runs: RunsPage) -> State {
        self.runs = Some(runs);
        self
    }

    /// Number of files served.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no file is served (a server always has one).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// A response before it is sent: status, body and its type. Every response carries the same
/// protective headers ([`super::http::response_head`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// Whether to send `Allow: GET, HEAD` (with a 405).
    pub allow: bool,
}

const JSON: &str = "application/json";
const HTML: &str = "text/html; charset=utf-8";

impl Answer {
    /// A JSON error: `{"error": message}` with `status`.
    pub fn error(status: u16, message: &str) -> Answer {
        Answer {
            status,
            content_type: JSON,
            body: serde_json::to_vec(&serde_json::json!({ "error": message }))
                .unwrap_or_else(|_| br#"{"error":"error"}"#.to_vec()),
            allow: false,
        }
    }

    /// An HTML page `write` writes, or a 500 saying why it could not.
    fn page(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Answer {
        let mut body = Vec::new();
        match write(&mut body) {
            Ok(()) => Answer {
                status: 200,
                content_type: HTML,
                body,
                allow: false,
            },
            Err(e) => Answer::error(500, &format!("cannot write the page: {e}")),
        }
    }

    fn json<T: Serialize>(value: &T) -> Answer {
        match serde_json::to_vec(value) {
            Ok(body) => Answer {
                status: 200,
                content_type: JSON,
                body,
                allow: false,
            },
            Err(e) => Answer::error(500, &format!("cannot write the answer: {e}")),
        }
    }
}

/// The answer to an admitted `route` (whose file index is below `state.len()`).
pub fn answer(state: &State, route: &Route) -> Answer {
    if *route == Route::Runs {
        return runs_page(state);
    }
    let Some(f) = state.files.get(route.file()) else {
        return Answer::error(404, "no such file");
    };
    match route {
        Route::Page { file } => {
            let served = Served {
                files: &state.names,
                file: *file,
            };
            Answer::page(|body| html::write_served(body, &f.name, &f.report, &served))
        }
        Route::Runs => runs_page(state),
        Route::Window { request, .. } => match window(&f.snap, &f.replays, &f.index, request) {
            Ok(v) => Answer::json(&v),
            Err(m) => Answer::error(400, &m),
        },
        Route::Moment {
            device, at, name, ..
        } => match moment(
            &f.snap,
            &f.replays,
            f.index.made(*device),
            *device,
            *at,
            name,
            &state.page,
        ) {
            Ok(v) => Answer::json(&v),
            Err(m) => Answer::error(400, &m),
        },
    }
}

/// The page of every file together, linking each run to its own page.
fn runs_page(state: &State) -> Answer {
    let Some(runs) = &state.runs else {
        return Answer::error(404, "one file is served: there is no page of several runs");
    };
    let served = Served {
        files: &state.names,
        file: 0,
    };
    Answer::page(|body| html::write_runs(body, &runs_title(&state.names), runs, Some(&served)))
}

/// The title of the page of several runs: `BASE vs CAND`, or `N runs: FIRST ...`.
pub fn runs_title(names: &[String]) -> String {
    match names {
        [b, c] => format!("{b} vs {c}"),
        _ => format!(
            "{} runs: {} ...",
            names.len(),
            names.first().map_or("", |s| s)
        ),
    }
}
