//! Notes with a stable code: what a snapshot lacks that a report needs, and what the report
//! still says without it.
//!
//! Reports that can be silenced by missing data (`categories`, `timeline`, `leaks`, `diff`)
//! carry a list of [`Absence`]s beside their free-text notes, so that a script can branch on
//! [`Absence::code`] while people read [`Absence::message`]. Codes are never renamed; new ones
//! may be added. An analysis that can lack evidence also says what it concluded as a
//! [`Judgement`]: `found`, `none` (judged: nothing) or `cannot_judge` (why, and what to record).

use serde::Serialize;

/// The device has no trace: allocation history was not recorded (or was recorded for other
/// devices), so nothing says when memory was allocated or freed.
pub const NO_TRACE: &str = "no_trace";
/// The trace records no allocation or free (PyTorch 2.0's single `snapshot` entry of
/// `max_entries=1`): it only repeats the final state. `categories` uses it for a trace without
/// an allocation (a lone free): nothing alive is dated by it either.
pub const NO_ACTIVITY: &str = "no_activity";
/// No stack frames were recorded (history recorded without context, or no history at all):
/// memory cannot be attributed to code.
pub const NO_FRAMES: &str = "no_frames";
/// No steps (training or serving iterations) were found in the trace.
pub const NO_STEPS: &str = "no_steps";
/// Steps were found, but too few to tell steady growth from noise.
pub const TOO_FEW_STEPS: &str = "too_few_steps";
/// A moment (`--at`) that the device's data cannot place (an event index without a trace).
pub const NO_MOMENT: &str = "no_moment";
/// `diff`: the two sides' sites cannot be compared (a side recorded no stack frames).
pub const SITES_NOT_COMPARABLE: &str = "sites_not_comparable";
/// `diff`: the two sides' categories cannot be compared (a side recorded no frames, or the
/// sides were categorised from different data: a trace on one, the final blocks on the other).
pub const CATEGORIES_NOT_COMPARABLE: &str = "categories_not_comparable";

/// What to record so that memory can be attributed to code (a retained graph told from a
/// leak, memory told by kind): the stacks of the allocations. A judgement's `record`.
pub const RECORD_STACKS: &str = "the history with Python stacks: `torch.cuda.memory._record_memory_history(stacks=\"python\")` (the default records them), then `torch.cuda.memory._dump_snapshot(...)`";

/// Something a report could not use, with what it still says.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Absence {
    /// Stable code: `no_trace` (no allocation history on the device), `no_activity` (a trace
    /// without any allocation or free), `no_frames` (no stack frames recorded), `no_steps`,
    /// `too_few_steps`, `no_moment` (a moment the device's data cannot place),
    /// `sites_not_comparable`, `categories_not_comparable`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["no_trace", "no_activity", "no_frames", "no_steps", "too_few_steps", "no_moment", "sites_not_comparable", "categories_not_comparable"])))]
    pub code: &'static str,
    /// The device concerned; `null` when it concerns the whole file.
    pub device: Option<u32>,
    /// `base` or `candidate` in `diff`; `null` elsewhere.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["base", "candidate", null])))]
    pub side: Option<&'static str>,
    /// One or two sentences: what is absent, what that prevents, and what the report still says.
    pub message: String,
}

impl Absence {
    /// An absence on `device` (or the whole file).
    pub fn new(code: &'static str, device: Option<u32>, message: String) -> Absence {
        Absence {
            code,
            device,
            side: None,
            message,
        }
    }

    /// The same absence, on one side of a comparison.
    pub fn on_side(mut self, side: &'static str) -> Absence {
        self.side = Some(side);
        self
    }
}

/// What an analysis that can lack evidence concluded (`shared/docs/reading.md` §3): it found
/// something, it judged and found nothing, or it could not judge — never "nothing found" when
/// the file could not show it.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum JudgementState {
    /// Enough evidence, and something was found.
    Found,
    /// Enough evidence, and nothing was found.
    None,
    /// Not enough evidence to say either way (see `why` and `record`).
    CannotJudge,
}

/// A judgement with its reason, and for `cannot_judge` what to record so that it can be made.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Judgement {
    /// `found`, `none` or `cannot_judge`.
    pub state: JudgementState,
    /// Why, in words: what was judged (`judged 6 steps: nothing grows`) or what is missing
    /// (`the trace holds one backward pass and no repeated step`).
    pub why: String,
    /// For `cannot_judge`: what to record so that the analysis can judge, in words (`at least
    /// 4 steps of the training loop with ...`); `null` otherwise.
    pub record: Option<String>,
}

impl Judgement {
    /// Something was found.
    pub fn found(why: String) -> Judgement {
        Judgement {
            state: JudgementState::Found,
            why,
            record: None,
        }
    }

    /// Judged, and nothing was found.
    pub fn none(why: String) -> Judgement {
        Judgement {
            state: JudgementState::None,
            why,
            record: None,
        }
    }

    /// Could not judge: `why`, and what to `record`.
    pub fn cannot_judge(why: String, record: String) -> Judgement {
        Judgement {
            state: JudgementState::CannotJudge,
            why,
            record: Some(record),
        }
    }

    /// The judgement in one sentence, as text shows it: `cannot judge: WHY; record RECORD`,
    /// or the reason itself when judged.
    pub fn sentence(&self) -> String {
        match (&self.state, &self.record) {
            (JudgementState::CannotJudge, Some(r)) => {
                format!("cannot judge: {}; record {r}", self.why)
            }
            (JudgementState::CannotJudge, None) => format!("cannot judge: {}", self.why),
            _ => self.why.clone(),
        }
    }
}
