//! Tables fitted to a width without splitting what users copy.
//!
//! A renderer fills a [`Table`] as it would a `comfy_table::Table` (it dereferences to one);
//! the table is laid out only when it is written, when all its cells are known. Without a
//! width it is as wide as its content. With one, the first layout that fits wins:
//!
//! 1. every cell on one line;
//! 2. cells wrapped at spaces, sizes kept with their unit (`3.61 GiB`);
//! 3. cells wrapped at spaces;
//! 4. turned on its side: one column per record under the record's name, one row per field,
//!    as many records per table as fit (records whose cells wrap at spaces);
//! 5. cells wrapped at spaces and at the punctuation between runs of code (`a,` `b`);
//! 6. one column, a row per record of its `field: value`s (as many a line as fit), where only
//!    a run of code wider than the whole table is cut ([`super::wrap::Breaks::Cut`]).
//!
//! Columns get widths by water-filling: narrow columns keep their whole width, wide ones share
//! what is left, none below its longest unbreakable unit. Tables of records
//! ([`Table::sideways_first`]) try their side (4) right after one line per cell (1).

use super::wrap::{fill, narrowest, Breaks};
use comfy_table::presets::{UTF8_FULL, UTF8_FULL_CONDENSED};
use comfy_table::{Cell, CellAlignment, ContentArrangement};
use std::fmt;

/// A table in the reports' look, laid out for its width when it is written (see the module).
#[derive(Clone, Debug)]
pub struct Table {
    inner: comfy_table::Table,
    width: Option<usize>,
    sideways_first: bool,
}

impl std::ops::Deref for Table {
    type Target = comfy_table::Table;
    fn deref(&self) -> &comfy_table::Table {
        &self.inner
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut comfy_table::Table {
        &mut self.inner
    }
}

/// A comfy table in the reports' look, as wide as its content.
fn plain() -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Disabled);
    t
}

impl Table {
    /// An empty table fitted to `width` columns when written (`None`: no limit).
    pub fn new(width: Option<usize>) -> Table {
        Table {
            inner: plain(),
            width,
            sideways_first: false,
        }
    }

    /// Marks a table of a few records with many fields (pools, devices): turned on its side as
    /// soon as one line per cell does not fit.
    pub fn sideways_first(mut self) -> Table {
        self.sideways_first = true;
        self
    }

    /// The lines of the table as laid out for its width.
    fn layout(&self) -> String {
        let Some(w) = self.width else {
            return self.inner.to_string();
        };
        let grid = Grid::of(&self.inner);
        let flat = Step::Flat;
        let order = if self.sideways_first {
            [
                flat(None),
                Step::Sideways,
                flat(Some(Breaks::Sizes)),
                flat(Some(Breaks::Spaces)),
                flat(Some(Breaks::Punctuation)),
            ]
        } else {
            [
                flat(None),
                flat(Some(Breaks::Sizes)),
                flat(Some(Breaks::Spaces)),
                Step::Sideways,
                flat(Some(Breaks::Punctuation)),
            ]
        };
        order
            .into_iter()
            .find_map(|step| match step {
                Step::Flat(b) => grid.fit(&self.inner, w, b),
                Step::Sideways => grid.sideways(w),
            })
            .unwrap_or_else(|| grid.stacked(w))
    }
}

/// One layout of a table: flat with cells broken as allowed (`None`: not at all), or on its
/// side.
enum Step {
    Flat(Option<Breaks>),
    Sideways,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.layout())
    }
}

/// A table's cells as text with their alignment.
struct Grid {
    header: Option<Vec<(String, Option<CellAlignment>)>>,
    rows: Vec<Vec<(String, Option<CellAlignment>)>>,
}

/// The alignment `c` was given (`Cell`'s is private; its equality shows it). `None` for the
/// default, or a cell styled in another way.
fn alignment(c: &Cell) -> Option<CellAlignment> {
    let content = c.content();
    [
        CellAlignment::Left,
        CellAlignment::Right,
        CellAlignment::Center,
    ]
    .into_iter()
    .find(|&a| *c == Cell::new(&content).set_alignment(a))
}

fn cell_of(text: String, align: Option<CellAlignment>) -> Cell {
    match align {
        Some(a) => Cell::new(text).set_alignment(a),
        None => Cell::new(text),
    }
}

/// Columns a string takes (one per character).
fn cols(s: &str) -> usize {
    s.chars().count()
}

/// The width of the table `t` as written, widest line.
fn widest(s: &str) -> usize {
    s.lines().map(cols).max().unwrap_or(0)
}

/// `text` (lines) laid out in `room` columns under `breaks`.
fn wrap_cell(text: &str, room: usize, breaks: Breaks) -> String {
    text.split('\n')
        .flat_map(|l| fill(l, room, breaks))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Column widths that add up to at most `room`: each between `least[c]` and `most[c]`,
/// water-filled (every column at a level `L`, held between its bounds; what is left after the
/// highest level that fits goes one column each to those below their bound, leftmost first).
/// `None` when the least widths alone are too wide.
pub fn widths(least: &[usize], most: &[usize], room: usize) -> Option<Vec<usize>> {
    let at = |level: usize| -> Vec<usize> {
        least
            .iter()
            .zip(most)
            .map(|(&lo, &hi)| level.clamp(lo, hi.max(lo)))
            .collect()
    };
    if at(0).iter().sum::<usize>() > room {
        return None;
    }
    let top = most.iter().copied().max().unwrap_or(0);
    let (mut lo, mut hi) = (0, top);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if at(mid).iter().sum::<usize>() <= room {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut w = at(lo);
    let mut left = room - w.iter().sum::<usize>();
    for (c, wc) in w.iter_mut().enumerate() {
        if left > 0 && *wc < most[c] {
            *wc += 1;
            left -= 1;
        }
    }
    Some(w)
}

impl Grid {
    fn of(t: &comfy_table::Table) -> Grid {
        let row = |r: &comfy_table::Row| -> Vec<(String, Option<CellAlignment>)> {
            r.cell_iter().map(|c| (c.content(), alignment(c))).collect()
        };
        Grid {
            header: t.header().map(row),
            rows: t.row_iter().map(row).collect(),
        }
    }

    fn columns(&self) -> usize {
        self.header
            .iter()
            .chain(&self.rows)
            .map(Vec::len)
            .max()
            .unwrap_or(0)
    }

    /// The widest line of column `c`, or the widest unit under `breaks`.
    fn measure(&self, c: usize, breaks: Option<Breaks>) -> usize {
        self.header
            .iter()
            .chain(&self.rows)
            .filter_map(|r| r.get(c))
            .flat_map(|(s, _)| s.split('\n'))
            .map(|l| breaks.map_or(cols(l), |b| narrowest(l, b)))
            .max()
            .unwrap_or(0)
    }

    /// `base` (a comfy table holding this grid's cells, with its column settings) with its
    /// cells wrapped under `breaks` to widths that fit `w` columns (`None`: on one line each);
    /// `None` when they cannot.
    fn fit(&self, base: &comfy_table::Table, w: usize, breaks: Option<Breaks>) -> Option<String> {
        let n = self.columns();
        let room = w.checked_sub(3 * n + 1)?;
        let most: Vec<usize> = (0..n).map(|c| self.measure(c, None)).collect();
        let least: Vec<usize> = match breaks {
            None => most.clone(),
            Some(b) => (0..n).map(|c| self.measure(c, Some(b))).collect(),
        };
        let widths = widths(&least, &most, room)?;
        let mut t = base.clone();
        let wrap = |r: &[(String, Option<CellAlignment>)]| -> Vec<Cell> {
            r.iter()
                .enumerate()
                .map(|(c, (s, a))| {
                    let s = match breaks {
                        Some(b) => wrap_cell(s, widths[c], b),
                        None => s.clone(),
                    };
                    cell_of(s, *a)
                })
                .collect()
        };
        if let Some(h) = &self.header {
            t.set_header(wrap(h));
        }
        for (i, r) in self.rows.iter().enumerate() {
            if let Some(row) = t.row_mut(i) {
                *row = comfy_table::Row::from(wrap(r));
            }
        }
        let text = t.to_string();
        (widest(&text) <= w).then_some(text)
    }

    /// The name of field `c` (its header), or nothing.
    fn name(&self, c: usize) -> &str {
        self.header
            .as_ref()
            .and_then(|h| h.get(c))
            .map_or("", |(s, _)| s.as_str())
    }

    /// The records `rows` on their side: a column per record, a row per field.
    fn turned(&self, rows: &[Vec<(String, Option<CellAlignment>)>]) -> Grid {
        let value = |r: &Vec<(String, Option<CellAlignment>)>, c: usize| {
            let (s, a) = r.get(c).cloned().unwrap_or_default();
            (s, a.or(Some(CellAlignment::Right)))
        };
        let mut header = vec![(self.name(0).to_string(), None)];
        header.extend(rows.iter().map(|r| value(r, 0)));
        let body = (1..self.columns())
            .map(|c| {
                let mut row = vec![(self.name(c).to_string(), None)];
                row.extend(rows.iter().map(|r| value(r, c)));
                row
            })
            .collect();
        Grid {
            header: Some(header),
            rows: body,
        }
    }

    /// A comfy table holding this grid's cells.
    fn table(&self) -> comfy_table::Table {
        let mut t = plain();
        let cells = |r: &[(String, Option<CellAlignment>)]| -> Vec<Cell> {
            r.iter().map(|(s, a)| cell_of(s.clone(), *a)).collect()
        };
        if let Some(h) = &self.header {
            t.set_header(cells(h));
        }
        for r in &self.rows {
            t.add_row(cells(r));
        }
        t
    }

    /// Turned on its side, as many records a table as fit `w` columns with cells wrapped at
    /// spaces; `None` when one record alone does not fit so.
    fn sideways(&self, w: usize) -> Option<String> {
        if self.rows.is_empty() || self.columns() < 2 {
            return None;
        }
        let fits = |rows: &[Vec<(String, Option<CellAlignment>)>]| {
            let g = self.turned(rows);
            let t = g.table();
            [None, Some(Breaks::Sizes), Some(Breaks::Spaces)]
                .into_iter()
                .find_map(|b| g.fit(&t, w, b))
        };
        let mut tables = Vec::new();
        let mut start = 0;
        while start < self.rows.len() {
            let mut best = fits(&self.rows[start..start + 1])?;
            let mut end = start + 1;
            while end < self.rows.len() {
                match fits(&self.rows[start..end + 1]) {
                    Some(t) => best = t,
                    None => break,
                }
                end += 1;
            }
            tables.push(best);
            start = end;
        }
        Some(tables.join("\n"))
    }

    /// The last resort: one column, a row per record holding its `field: value`s, as many a
    /// line as fit, wrapped at spaces and punctuation, runs wider than the table cut.
    fn stacked(&self, w: usize) -> String {
        let room = w.saturating_sub(4).max(1);
        let mut t = plain();
        t.load_preset(UTF8_FULL);
        for r in &self.rows {
            let mut lines: Vec<String> = Vec::new();
            let mut line = String::new();
            for (c, (s, _)) in r.iter().enumerate().filter(|(_, (s, _))| !s.is_empty()) {
                let field = match self.name(c) {
                    "" => s.clone(),
                    name => format!("{name}: {s}"),
                };
                let short = !field.contains('\n') && cols(&field) <= room;
                if short && !line.is_empty() && cols(&line) + 2 + cols(&field) <= room {
                    line = format!("{line}  {field}");
                    continue;
                }
                if !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                }
                if short {
                    line = field;
                } else {
                    lines.push(wrap_cell(&field, room, Breaks::Cut));
                }
            }
            if !line.is_empty() {
                lines.push(line);
            }
            t.add_row(vec![Cell::new(lines.join("\n"))]);
        }
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_water_fill() {
        // Narrow columns keep their width; the wide one takes the rest.
        assert_eq!(widths(&[1, 4, 10], &[1, 8, 60], 40), Some(vec![1, 8, 31]));
        // Two wide columns share it evenly, none below its least.
        assert_eq!(widths(&[1, 5, 5], &[1, 50, 50], 41), Some(vec![1, 20, 20]));
        assert_eq!(widths(&[1, 30, 5], &[1, 50, 50], 41), Some(vec![1, 30, 10]));
        // Everything fits: every column whole.
        assert_eq!(widths(&[1, 2], &[3, 4], 10), Some(vec![3, 4]));
        assert_eq!(widths(&[20, 30], &[25, 40], 49), None);
    }

    fn fix_table(w: usize) -> Table {
        let mut t = Table::new(Some(w));
        t.set_header(vec![
            "#",
            "cost",
            "saves",
            "peak after",
            "confidence",
            "fix",
        ]);
        t.add_row(vec![
            Cell::new("1"),
            Cell::new("free"),
            Cell::new("3.61 GiB").set_alignment(CellAlignment::Right),
            Cell::new("18.54 GiB").set_alignment(CellAlignment::Right),
            Cell::new("high"),
            Cell::new(
                "call optimizer.zero_grad(set_to_none=True) before the forward pass (not after it)",
            ),
        ]);
        t.add_row(vec![
            Cell::new("3"),
            Cell::new("free"),
            Cell::new("896.00 MiB").set_alignment(CellAlignment::Right),
            Cell::new("21.28 GiB").set_alignment(CellAlignment::Right),
            Cell::new("high"),
            Cell::new("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
        ]);
        t
    }

    #[test]
    fn tables_keep_code_whole_at_100_and_80_columns() {
        for w in [100, 80, 60] {
            let text = fix_table(w).to_string();
            assert!(widest(&text) <= w, "{w}:\n{text}");
            for code in [
                "optimizer.zero_grad(set_to_none=True)",
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ] {
                assert!(text.contains(code), "{w}: {code} split:\n{text}");
            }
        }
        // At 100 columns the table stays flat, the fix column as wide as its longest run.
        let text = fix_table(100).to_string();
        assert!(text.contains("┆ fix"), "{text}");
        assert!(text.contains("┆ set                                              │"));
        // A little wider, sizes stay with their unit; alignment survives the wrapping.
        let text = fix_table(104).to_string();
        assert!(text.contains("┆ 896.00 MiB ┆"), "{text}");
        assert!(text.contains("┆   3.61 GiB ┆"), "{text}");
        // No width: as the content.
        let mut t = fix_table(100);
        t.width = None;
        assert!(widest(&t.to_string()) > 100);
    }

    #[test]
    fn many_short_columns_turn_on_their_side() {
        let mut t = Table::new(Some(60));
        let head = [
            "settings",
            "peak reserved",
            "change",
            "end reserved",
            "OOMs",
            "first OOM",
        ];
        t.set_header(head.to_vec());
        for label in [
            "as recorded",
            "expandable_segments:True",
            "max_split_size_mb:128",
        ] {
            t.add_row(vec![
                label,
                "22.21 GiB",
                "-946.00 MiB",
                "22.21 GiB",
                "0",
                "-",
            ]);
        }
        let text = t.to_string();
        assert!(widest(&text) <= 60, "{text}");
        assert!(text.contains("expandable_segments:True"), "{text}");
        // One row per field, under the record's name.
        assert!(
            text.lines().any(|l| l.starts_with("│ peak reserved")),
            "{text}"
        );
        // A record too wide for its side is stacked, field: value.
        let mut t = Table::new(Some(40));
        t.set_header(vec!["#", "site"]);
        t.add_row(vec!["1", &format!("a/{}.py:3:f", "b".repeat(32))]);
        t.add_row(vec!["2", "x.py:1:g"]);
        let text = t.to_string();
        assert!(widest(&text) <= 40, "{text}");
        assert!(text.contains("site: x.py:1:g"), "{text}");
    }
}
