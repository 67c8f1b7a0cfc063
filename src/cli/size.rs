//! Sizes and percentages as the command line's flags take them (`--capacity 80GiB`,
//! `--fail-on-growth 5%`).

use crate::units;
use crate::Error;

/// Parses a size: plain bytes (`85899345920`), IEC units (`80GiB`, `81920MiB`, `1.5 TiB`,
/// `512KiB`), SI units (`80GB` = 80·10⁹), or a bare `K`/`M`/`G`/`T` (binary, as PyTorch and
/// `nvidia-smi` mean them). Case-insensitive; decimals allowed; the result is rounded to a byte.
pub fn parse_size(s: &str) -> Result<u64, Error> {
    let bad = |why: &str| {
        Error::Usage(format!(
            "size {s:?}: {why}; expected a number of bytes or a number with a unit, e.g. 80GiB, 81920MiB, 1.5TiB, 80GB"
        ))
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let (mantissa, scale) = units::parse_decimal(num).ok_or_else(|| bad("not a number"))?;
    let multiplier: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" | "byte" | "bytes" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad("unknown unit")),
    };
    let bytes = units::scaled_exact(mantissa, scale, multiplier).ok_or_else(|| bad("too large"))?;
    if bytes == 0 {
        return Err(bad("must be more than 0"));
    }
    Ok(bytes)
}

/// Parses a fraction: `5%` → 0.05, `12.5 %` → 0.125, or a plain fraction `0.05` → 0.05.
/// A number without `%` above 1 is refused (say `30%`, not `30`).
pub fn parse_percent(s: &str) -> Result<f64, Error> {
    let bad = |why: &str| {
        Error::Usage(format!(
            "percentage {s:?}: {why}; expected e.g. 5%, 30%, 12.5% or a fraction such as 0.05"
        ))
    };
    let t = s.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let (mantissa, scale) = units::parse_decimal(num).ok_or_else(|| bad("not a number"))?;
    let v = mantissa as f64 / 10f64.powi(scale as i32);
    if percent {
        Ok(v / 100.0)
    } else if v <= 1.0 {
        Ok(v)
    } else {
        Err(bad("a plain number must be a fraction between 0 and 1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("5%").unwrap(), 0.05);
        assert_eq!(parse_percent("12.5 %").unwrap(), 0.125);
        assert_eq!(parse_percent("0.3").unwrap(), 0.3);
        for bad in ["", "%", "30", "-5%", "5GiB", "x%"] {
            assert!(parse_percent(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("80GiB").unwrap(), 80 << 30);
        assert_eq!(parse_size("80GB").unwrap(), 80_000_000_000);
        assert_eq!(parse_size("81920MiB").unwrap(), 80 << 30);
        assert_eq!(parse_size("1.5 TiB").unwrap(), 3 << 39);
        assert_eq!(parse_size("85899345920").unwrap(), 80 << 30);
        assert_eq!(parse_size("79.15 GiB").unwrap(), 84_986_665_370);
        assert_eq!(parse_size("24g").unwrap(), 24 << 30);
        assert_eq!(parse_size(" 512 b ").unwrap(), 512);
        for bad in [
            "",
            "GiB",
            "80 parsecs",
            "1.2.3GB",
            "0",
            "-5GB",
            "99999999999999999999TiB",
        ] {
            assert!(
                matches!(parse_size(bad), Err(Error::Usage(_))),
                "{bad:?} accepted"
            );
        }
    }
}
