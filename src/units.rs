//! IEC byte units as PyTorch prints them (`20.00 MiB`) and durations; shared by every layer.

/// `1234567` as `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The IEC units above a byte, smallest first.
const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// Formats `bytes` with two decimals in the largest IEC unit below it (`512 B`, `1.50 GiB`).
pub fn iec(bytes: u64) -> String {
    scaled(bytes, "B", &UNITS)
}

/// Formats `bytes` for a sentence, as PyTorch's OOM messages print sizes: like [`iec`], but
/// `512 bytes` below a KiB, and PiB the largest unit (`1024.00 PiB`, never EiB).
pub fn iec_words(bytes: u64) -> String {
    scaled(bytes, "bytes", &UNITS[..5])
}

/// `bytes` with `small` as the unit below 1024, else with two decimals in the largest of
/// `units` that keeps the figure at least 1 *as printed*: a value that two decimals round up
/// to 1024.00 (1 GiB less a few bytes, which PyTorch prints `1024.00 MiB`) moves to the next
/// unit and reads `1.00 GiB`.
fn scaled(bytes: u64, small: &str, units: &[&str]) -> String {
    if bytes < 1024 {
        return format!("{bytes} {small}");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while unit < units.len() - 1 && (value >= 1024.0 || format!("{value:.2}") == "1024.00") {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", units[unit])
}

/// `n` and `word`, plural unless `n` is 1: `1 block`, `2 blocks`, `0 blocks`. `word` is the
/// singular; its plural adds `s` (`entry` → `entries`).
pub fn plural(n: impl Into<u64>, word: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {word}")
    } else if let Some(stem) = word
        .strip_suffix('y')
        .filter(|s| !s.ends_with(['a', 'e', 'o', 'u']))
    {
        format!("{n} {stem}ies")
    } else {
        format!("{n} {word}s")
    }
}

/// Formats a signed byte change: `+320.00 MiB`, `-64.00 MiB`, `0 B`.
pub fn signed_iec(delta: i64) -> String {
    match delta {
        0 => "0 B".to_string(),
        d if d > 0 => format!("+{}", iec(d as u64)),
        d => format!("-{}", iec(d.unsigned_abs())),
    }
}

/// Formats a change relative to `base`: `+32.3%`; `new` when the base is 0.
pub fn signed_percent(delta: i64, base: u64) -> String {
    if base == 0 {
        return if delta == 0 {
            "0.0%".into()
        } else {
            "new".into()
        };
    }
    format!("{:+.1}%", delta as f64 * 100.0 / base as f64)
}

/// Formats a span of microseconds (`850 µs`, `12.30 ms`, `4.20 s`, `3 min 05 s`).
pub fn duration_us(us: i64) -> String {
    let us = us.max(0);
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else if us < 60_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else {
        let s = us / 1_000_000;
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

/// `"79.15"` → `(7915, 2)`; `None` unless digits with at most one point (and at least one digit).
pub fn parse_decimal(num: &str) -> Option<(u128, u32)> {
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if int.len() + frac.len() > 30 {
        return None;
    }
    let digits = format!("{int}{frac}");
    Some((digits.parse().ok()?, frac.len() as u32))
}

/// `mantissa / 10^scale * multiplier`, rounded half up, exactly; `None` past `u64::MAX`.
pub fn scaled_exact(mantissa: u128, scale: u32, multiplier: u128) -> Option<u64> {
    let div = 10u128.checked_pow(scale)?;
    let v = mantissa.checked_mul(multiplier)?.checked_add(div / 2)? / div;
    u64::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_digits() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(299_744), "299,744");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn iec_matches_pytorch_style() {
        assert_eq!(iec(0), "0 B");
        assert_eq!(iec(512), "512 B");
        assert_eq!(iec(1024), "1.00 KiB");
        assert_eq!(iec(20 << 20), "20.00 MiB");
        assert_eq!(iec(3 << 29), "1.50 GiB");
        assert_eq!(iec(1 << 60), "1.00 EiB");
        assert_eq!(iec(u64::MAX), "16.00 EiB");
    }

    #[test]
    fn rounding_never_prints_1024_of_a_unit() {
        // PyTorch prints 1 GiB less a few bytes as "1024.00 MiB"; memlens says 1.00 GiB.
        assert_eq!(iec((1 << 30) - 1), "1.00 GiB");
        assert_eq!(iec((1 << 30) - 5000), "1.00 GiB");
        assert_eq!(iec((1 << 20) - 1), "1.00 MiB");
        assert_eq!(iec((1 << 40) - 1), "1.00 TiB");
        assert_eq!(iec_words((1 << 30) - 1), "1.00 GiB");
        // Below the carry the figure keeps its unit.
        assert_eq!(iec((1 << 30) - 6 * (1 << 20)), "1018.00 MiB");
        assert_eq!(iec(1073736000), "1023.99 MiB");
        assert_eq!(iec(1023 * 1024 + 1000), "1023.98 KiB");
        assert_eq!(iec(1048570), "1023.99 KiB");
        assert_eq!(iec(1048571), "1.00 MiB");
        // The largest unit keeps every figure, however large.
        assert_eq!(iec_words(u64::MAX), "16384.00 PiB");
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(1u32, "block"), "1 block");
        assert_eq!(plural(0u32, "block"), "0 blocks");
        assert_eq!(plural(2u64, "entry"), "2 entries");
        assert_eq!(plural(1u64, "entry"), "1 entry");
        assert_eq!(plural(3u32, "day"), "3 days");
    }

    #[test]
    fn iec_words_reads_like_pytorch() {
        assert_eq!(iec_words(0), "0 bytes");
        assert_eq!(iec_words(1023), "1023 bytes");
        assert_eq!(iec_words(1024), "1.00 KiB");
        assert_eq!(iec_words(20 << 20), "20.00 MiB");
        assert_eq!(iec_words(3 << 29), "1.50 GiB");
        assert_eq!(iec_words(5 << 40), "5.00 TiB");
        // PiB is the largest unit: an EiB reads as 1024 PiB.
        assert_eq!(iec_words(1 << 60), "1024.00 PiB");
        assert_eq!(iec_words(u64::MAX), "16384.00 PiB");
    }

    #[test]
    fn signed() {
        assert_eq!(signed_iec(64 << 20), "+64.00 MiB");
        assert_eq!(signed_iec(-(64 << 20)), "-64.00 MiB");
        assert_eq!(signed_iec(0), "0 B");
        assert_eq!(signed_percent(5, 100), "+5.0%");
        assert_eq!(signed_percent(-5, 100), "-5.0%");
        assert_eq!(signed_percent(5, 0), "new");
    }

    #[test]
    fn durations() {
        assert_eq!(duration_us(5), "5 µs");
        assert_eq!(duration_us(12_300), "12.30 ms");
        assert_eq!(duration_us(4_200_000), "4.20 s");
        assert_eq!(duration_us(185_000_000), "3 min 05 s");
    }
}
