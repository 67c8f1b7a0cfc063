//! A [`Table`] as one Parquet file (the `parquet` crate's column writers, no Arrow): one
//! row group, every column optional (null where a value is absent), `Int` as INT64, `Float`
//! as DOUBLE, `Bool` as BOOLEAN, `Text` as UTF-8 BYTE_ARRAY, `TextList` as a LIST of UTF-8
//! strings (never null; empty for none). Uncompressed, dictionary-encoded where the writer
//! finds it pays: the tables are small and the build stays light (see `docs/scale.md`).

use crate::compose::dataset::{Cell, Kind, Table};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::errors::Result;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::sync::Arc;

/// The Parquet schema of `t` in the message-type syntax.
pub fn schema(t: &Table) -> String {
    let mut s = format!("message {} {{\n", t.name);
    for (name, kind) in t.columns {
        let line = match kind {
            Kind::Int => format!("  optional int64 {name};\n"),
            Kind::Float => format!("  optional double {name};\n"),
            Kind::Bool => format!("  optional boolean {name};\n"),
            Kind::Text => format!("  optional binary {name} (UTF8);\n"),
            Kind::TextList => format!(
                "  optional group {name} (LIST) {{\n    repeated group list {{\n      required binary element (UTF8);\n    }}\n  }}\n"
            ),
        };
        s.push_str(&line);
    }
    s.push_str("}\n");
    s
}

/// The bytes of `t` as a Parquet file, `created_by` naming memlens.
pub fn write(t: &Table) -> Result<Vec<u8>> {
    let schema = Arc::new(parse_message_type(&schema(t))?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_created_by(format!("memlens {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let mut w = SerializedFileWriter::new(Vec::new(), schema, props)?;
    let mut rg = w.next_row_group()?;
    for (k, (_, kind)) in t.columns.iter().enumerate() {
        let mut col = rg
            .next_column()?
            .expect("one column writer per schema column");
        let cells = t.rows.iter().map(|r| &r[k]);
        match kind {
            Kind::Int => {
                let (values, defs) = flat(cells, |c| match c {
                    Cell::Int(v) => *v,
                    _ => None,
                });
                col.typed::<Int64Type>()
                    .write_batch(&values, Some(&defs), None)?;
            }
            Kind::Float => {
                let (values, defs) = flat(cells, |c| match c {
                    Cell::Float(v) => *v,
                    _ => None,
                });
                col.typed::<DoubleType>()
                    .write_batch(&values, Some(&defs), None)?;
            }
            Kind::Bool => {
                let (values, defs) = flat(cells, |c| match c {
                    Cell::Bool(v) => *v,
                    _ => None,
                });
                col.typed::<BoolType>()
                    .write_batch(&values, Some(&defs), None)?;
            }
            Kind::Text => {
                let (values, defs) = flat(cells, |c| match c {
                    Cell::Text(v) => v.as_deref().map(ByteArray::from),
                    _ => None,
                });
                col.typed::<ByteArrayType>()
                    .write_batch(&values, Some(&defs), None)?;
            }
            Kind::TextList => {
                // Levels: 1 = the list is there but empty, 2 = an element; repetition 0 starts
                // a row's list, 1 continues it.
                let (mut values, mut defs, mut reps) = (Vec::new(), Vec::new(), Vec::new());
                for c in cells {
                    let items: &[String] = match c {
                        Cell::TextList(v) => v,
                        _ => &[],
                    };
                    if items.is_empty() {
                        defs.push(1);
                        reps.push(0);
                    }
                    for (i, s) in items.iter().enumerate() {
                        values.push(ByteArray::from(s.as_str()));
                        defs.push(2);
                        reps.push(if i == 0 { 0 } else { 1 });
                    }
                }
                col.typed::<ByteArrayType>()
                    .write_batch(&values, Some(&defs), Some(&reps))?;
            }
        }
        col.close()?;
    }
    rg.close()?;
    w.into_inner()
}

/// The non-null values of a flat optional column and its definition levels (1 = a value,
/// 0 = null).
fn flat<'c, T>(
    cells: impl Iterator<Item = &'c Cell>,
    get: impl Fn(&Cell) -> Option<T>,
) -> (Vec<T>, Vec<i16>) {
    let (mut values, mut defs) = (Vec::new(), Vec::new());
    for c in cells {
        match get(c) {
            Some(v) => {
                values.push(v);
                defs.push(1);
            }
            None => defs.push(0),
        }
    }
    (values, defs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_a_parquet_file() {
        // GIVEN two rows with a null, a list and an empty list.
        const COLS: &[(&str, Kind)] = &[
            ("n", Kind::Int),
            ("s", Kind::Text),
            ("codes", Kind::TextList),
        ];
        let t = Table {
            name: "t",
            columns: COLS,
            rows: vec![
                vec![
                    Cell::Int(Some(1 << 40)),
                    Cell::Text(None),
                    Cell::TextList(vec!["a".into(), "b".into()]),
                ],
                vec![
                    Cell::Int(None),
                    Cell::Text(Some("x".into())),
                    Cell::TextList(vec![]),
                ],
            ],
        };
        let b = write(&t).unwrap();
        // THEN it starts and ends with the magic bytes, and the crate's reader sees 2 rows.
        assert_eq!(&b[..4], b"PAR1");
        assert_eq!(&b[b.len() - 4..], b"PAR1");
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, &b).unwrap();
        let r = SerializedFileReader::new(f).unwrap();
        assert_eq!(r.metadata().file_metadata().num_rows(), 2);
        assert!(schema(&t).contains("optional group codes (LIST)"));
    }
}
