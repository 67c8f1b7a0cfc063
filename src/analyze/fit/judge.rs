//! Whether the moment fits the device (`shared/docs/reading.md` §3): `found` (a shortage: the
//! demand exceeds the capacity less its margin), `none` (it fits) or `cannot_judge` (no
//! capacity: no OOM of the device gives one and none was given).

use super::Plan;
use crate::units::iec;
use crate::vocab::absence::Judgement;

/// What to record or give so that a capacity is known.
const RECORD_CAPACITY: &str = "a snapshot dumped at the OOM (its numbers give what the process could hold), or give the device's size: `--capacity 80GiB` or `--gpu H100`";

/// The judgement of a moment whose demand is `demand` bytes, from its plan (`None`: no
/// capacity).
pub(super) fn capacity(demand: u64, plan: Option<&Plan>) -> Judgement {
    let Some(p) = plan else {
        return Judgement::cannot_judge(
            "the file holds no OOM of this device and no capacity was given".into(),
            RECORD_CAPACITY.into(),
        );
    };
    let usable = format!(
        "the {} usable of {} ({}, less a {} margin)",
        iec(p.target_bytes),
        iec(p.capacity_bytes),
        p.capacity_source,
        iec(p.margin_bytes)
    );
    if p.fits_now {
        Judgement::none(format!("needs {}, within {usable}", iec(demand)))
    } else {
        Judgement::found(format!(
            "needs {}, {} more than {usable}",
            iec(demand),
            iec(demand.saturating_sub(p.target_bytes))
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::absence::JudgementState;

    fn plan(capacity: u64, fits_now: bool) -> Plan {
        let margin = capacity / 20;
        Plan {
            capacity_bytes: capacity,
            capacity_source: "--capacity 80GiB".into(),
            margin_bytes: margin,
            target_bytes: capacity - margin,
            fits_now,
            steps: vec![],
            fits: fits_now,
            short_by_bytes: None,
        }
    }

    /// Each state from the plan alone; the shortage is counted against the target.
    #[test]
    fn capacity_is_judged_from_the_plan() {
        let j = capacity(1 << 30, None);
        assert_eq!(j.state, JudgementState::CannotJudge);
        assert!(j.record.unwrap().contains("--capacity"));
        let j = capacity(70 << 30, Some(&plan(80 << 30, true)));
        assert_eq!(j.state, JudgementState::None);
        assert_eq!(
            j.why,
            "needs 70.00 GiB, within the 76.00 GiB usable of 80.00 GiB (--capacity 80GiB, less a 4.00 GiB margin)"
        );
        let j = capacity(78 << 30, Some(&plan(80 << 30, false)));
        assert_eq!(j.state, JudgementState::Found);
        assert!(
            j.why
                .starts_with("needs 78.00 GiB, 2.00 GiB more than the 76.00 GiB usable"),
            "{}",
            j.why
        );
    }
}
