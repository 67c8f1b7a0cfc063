//! Object-storage URLs given where a local path is expected: `s3://bucket/key` would
//! otherwise be read as the relative path `s3:/bucket/key` (and `-o s3://…` would make a local
//! directory named `s3:`). A build without the `cloud` feature reads and writes local paths
//! only, and every `-o` but a dataset's is local in any build; each such URL gets one line
//! that says so and how to get the objects in or out.

use std::path::Path;

/// Each store's URL schemes, the command that copies its objects, and the one that writes an
/// object to standard output (`URL` stands for the object's).
const STORES: &[(&[&str], &str, &str)] = &[
    (&["s3", "s3a"], "`aws s3 cp --recursive`", "aws s3 cp URL -"),
    (
        &["gs", "gcs"],
        "`gcloud storage cp -r`",
        "gcloud storage cat URL",
    ),
    (
        &["az", "azure", "abfs", "abfss", "adl"],
        "`azcopy copy --recursive`",
        "az storage blob download --file /dev/stdout …",
    ),
    (&["http", "https"], "`curl -O`", "curl -fsSL URL"),
    (
        &["hf"],
        "`huggingface-cli download`",
        "curl -fsSL -H \"Authorization: Bearer $HF_TOKEN\" URL",
    ),
];

/// The [`STORES`] row of `scheme` (any case).
fn store(scheme: &str) -> Option<&'static (&'static [&'static str], &'static str, &'static str)> {
    STORES
        .iter()
        .find(|(schemes, _, _)| schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)))
}

/// The scheme of `path` when it is written as a URL of an object store or web server
/// (`s3://bucket/key` gives `s3`), else `None`.
pub fn url_scheme(path: &Path) -> Option<&str> {
    let (scheme, _) = path.to_str()?.split_once("://")?;
    let (schemes, _, _) = store(scheme)?;
    schemes
        .iter()
        .copied()
        .find(|s| s.eq_ignore_ascii_case(scheme))
}

/// What to do instead of reading the object at `url` (scheme `scheme`): copy it, or pipe it.
pub fn read_instead(scheme: &str) -> String {
    let cp = copy_command(scheme);
    format!(
        "a URL; this memlens was built without object storage (`cargo build --release --features cloud`; the Python wheel has it): copy the objects first ({cp}) or pipe one in (`{} | memlens summary -`)",
        pipe_command(scheme)
    )
}

/// What to do instead of writing to the URL (scheme `scheme`).
pub fn write_instead(scheme: &str) -> String {
    format!(
        "a URL; -o writes local files only: write to a local path, then copy it ({})",
        copy_command(scheme)
    )
}

fn copy_command(scheme: &str) -> &'static str {
    store(scheme).map_or("a copy to a local path", |(_, copy, _)| copy)
}

fn pipe_command(scheme: &str) -> &'static str {
    store(scheme).map_or("a download to standard output", |(_, _, pipe)| pipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_stores_are_recognised_and_paths_are_not() {
        assert_eq!(
            url_scheme(Path::new("s3://bucket/job/rank0.pickle")),
            Some("s3")
        );
        assert_eq!(url_scheme(Path::new("GS://b/k")), Some("gs"));
        assert_eq!(
            url_scheme(Path::new("https://example.org/a.pickle")),
            Some("https")
        );
        assert_eq!(url_scheme(Path::new("runs/rank0.pickle")), None);
        assert_eq!(url_scheme(Path::new("weird:name.pickle")), None);
        assert_eq!(url_scheme(Path::new("ftp://host/x")), None);
        assert!(read_instead("s3").contains("aws s3 cp URL - | memlens summary -"));
        assert!(write_instead("gs").contains("gcloud storage cp -r"));
    }
}
