//! Three real training traces held to an engineer's reading of which lines hold the peak
//! (tests/data/line_readings.json): `memlens lines` live at the peak names the line that holds
//! every framed byte, the lines that allocate the most (Adam's moments equal), and the model
//! line that holds most of the rest. Every disagreement is named in one message.

use crate::common::*;
use serde_json::Value;

/// The row of the line whose `file:line` ends with `suffix`.
fn row<'a>(lines: &'a [Value], suffix: &str) -> Option<&'a Value> {
    lines
        .iter()
        .find(|l| format!("{}:{}", l["file"].as_str().unwrap(), l["line"]).ends_with(suffix))
}

#[test]
fn real_training_traces_name_the_lines_an_engineer_names() {
    let Some(files) = require_shared() else {
        return;
    };
    let r: Value = serde_json::from_slice(
        &std::fs::read(root().join("tests/data/line_readings.json")).unwrap(),
    )
    .unwrap();
    let mut failures = Vec::new();
    for want in r["files"].as_array().unwrap() {
        let name = want["file"].as_str().unwrap();
        let path = files
            .iter()
            .find(|f| f.file_name().is_some_and(|n| n == name))
            .unwrap_or_else(|| panic!("{name} is not in ../shared/samples/real"));
        let got = json_report(&["lines"], path);
        let d = &got["devices"][0];
        let lines = d["lines"].as_array().unwrap();
        let framed = as_u64(&d["framed_bytes"]);
        let mut fail = |what: String| failures.push(format!("{name}: {what}"));
        let all = want["holds_all"].as_str().unwrap();
        match row(lines, all) {
            Some(l) if as_u64(&l["total_bytes"]) == framed => {}
            other => fail(format!(
                "{all} does not hold all {framed} framed bytes: {other:?}"
            )),
        }
        let mut by_self: Vec<&Value> = lines.iter().collect();
        by_self.sort_by_key(|l| std::cmp::Reverse(as_u64(&l["self_bytes"])));
        let named = want["largest_self"].as_array().unwrap();
        for l in &by_self[..named.len()] {
            let key = format!("{}:{}", l["file"].as_str().unwrap(), l["line"]);
            if !named.iter().any(|n| key.ends_with(n.as_str().unwrap())) {
                fail(format!(
                    "{key} is among the largest self lines, not one of {named:?}"
                ));
            }
        }
        for pair in want["equal_self"].as_array().unwrap() {
            let (a, b) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
            let self_of = |s| row(lines, s).map(|l| as_u64(&l["self_bytes"]));
            if self_of(a).is_none() || self_of(a) != self_of(b) {
                fail(format!(
                    "{a} and {b} differ: {:?} {:?}",
                    self_of(a),
                    self_of(b)
                ));
            }
        }
        for x in want["at_least"].as_array().unwrap() {
            let (s, share) = (x[0].as_str().unwrap(), x[1].as_f64().unwrap());
            let got = row(lines, s).map_or(0, |l| as_u64(&l["total_bytes"]));
            if (got as f64) < share * framed as f64 {
                fail(format!("{s} holds {got} of {framed}, less than {share}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
