//! Whether `categories` can say what a device's memory is made of (`shared/docs/reading.md`
//! §3-4): `found` when most live bytes are told by kind, `none` when nothing is alive, and
//! `cannot_judge` when more than half of the live bytes match no rule — with why (no stack
//! frames recorded, or stacks no rule recognises) and what to record or give.

use super::DeviceCategories;
use crate::units::iec;
use crate::vocab::absence::{self, Judgement, JudgementState};

/// What to give when the stacks are there but no rule knows them: rules of one's own.
const GIVE_RULES: &str = "a history whose stacks reach your own code, or give rules for its frames: `memlens categories --rules FILE`, one `category: regex` per line, matched on `filename:line:name`";

/// `12.5%`, one decimal.
fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// The judgement of one device: `live` requested bytes of which `unknown` matched no rule;
/// `frames` whether the file recorded any stack frame.
pub(super) fn device(live: u64, unknown: u64, frames: bool) -> Judgement {
    if live == 0 {
        return Judgement::none("nothing is alive at the moment".into());
    }
    if unknown * 2 > live {
        let share = format!(
            "{} of {} live ({}) matches no rule",
            iec(unknown),
            iec(live),
            percent(unknown as f64 / live as f64)
        );
        return if frames {
            Judgement::cannot_judge(
                format!("{share}: no rule recognises its stacks (they name no module, optimizer, autograd or loader call)"),
                GIVE_RULES.into(),
            )
        } else {
            Judgement::cannot_judge(
                format!(
                    "{share}: no stack frames were recorded, and lifetimes alone tell little apart"
                ),
                absence::RECORD_STACKS.into(),
            )
        };
    }
    Judgement::found(format!(
        "{} of {} live told by kind{}",
        iec(live - unknown),
        iec(live),
        if unknown == 0 {
            String::new()
        } else {
            let share = unknown as f64 / live as f64;
            if share < 0.001 {
                " (under 0.1% unknown)".to_string()
            } else {
                format!(" ({} unknown)", percent(share))
            }
        }
    ))
}

/// The report's judgement: `cannot_judge` when some device cannot be judged (or none is
/// there), `none` when nothing is alive on any device, else `found`.
pub(super) fn overall(devices: &[DeviceCategories]) -> Judgement {
    let Some(first) = devices.first() else {
        return Judgement::cannot_judge(
            "no device has a trace or live blocks to categorise".into(),
            absence::RECORD_STACKS.into(),
        );
    };
    let of = |d: &DeviceCategories| d.judgement.state;
    let unjudged: Vec<&DeviceCategories> = devices
        .iter()
        .filter(|d| of(d) == JudgementState::CannotJudge)
        .collect();
    let words = |ds: &[&DeviceCategories]| -> String {
        if devices.len() == 1 {
            return first.judgement.why.clone();
        }
        ds.iter()
            .map(|d| format!("device {}: {}", d.device, d.judgement.why))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if let Some(u) = unjudged.first() {
        let record = u.judgement.record.clone().unwrap_or_default();
        return Judgement::cannot_judge(words(&unjudged), record);
    }
    let all: Vec<&DeviceCategories> = devices.iter().collect();
    if devices.iter().all(|d| of(d) == JudgementState::None) {
        Judgement::none(words(&all))
    } else {
        Judgement::found(words(&all))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three states from the bytes alone: the boundary is exactly half unknown.
    #[test]
    fn more_than_half_unknown_cannot_be_judged() {
        assert_eq!(device(0, 0, true).state, JudgementState::None);
        let j = device(100 << 20, 50 << 20, true);
        assert_eq!(j.state, JudgementState::Found);
        assert_eq!(
            j.why,
            "50.00 MiB of 100.00 MiB live told by kind (50.0% unknown)"
        );
        let j = device(100 << 20, (50 << 20) + 1, false);
        assert_eq!(j.state, JudgementState::CannotJudge);
        assert!(j.why.contains("no stack frames were recorded"), "{}", j.why);
        assert_eq!(j.record.as_deref(), Some(absence::RECORD_STACKS));
        let j = device(1 << 30, 1 << 30, true);
        assert_eq!(j.record.as_deref(), Some(GIVE_RULES));
        assert_eq!(
            device(1 << 30, 0, true).why,
            "1.00 GiB of 1.00 GiB live told by kind"
        );
    }
}
