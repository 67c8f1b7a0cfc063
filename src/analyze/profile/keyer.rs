//! Normalized keys of stacks: the site (with `--frame-depth` callers) or the whole stack,
//! paths stripped of the snapshot's root, each stack's key built once.

use super::{normalize_frame, snapshot_root, ProfileOptions, SiteKey, SiteTotal};
use crate::model::{PerStack, Snapshot, StackId};
use crate::vocab::sites::{self, NO_FRAMES};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Turns stacks into normalized keys, each stack's key built once ([`PerStack`]).
pub struct Keyer<'a> {
    snap: &'a Snapshot,
    root: Option<String>,
    opts: ProfileOptions,
    cache: PerStack<String>,
}

impl<'a> Keyer<'a> {
    /// A keyer for `snap` (its root computed once).
    pub fn new(snap: &'a Snapshot, opts: ProfileOptions) -> Self {
        Keyer {
            snap,
            root: snapshot_root(snap),
            opts,
            cache: PerStack::new(&snap.stacks),
        }
    }

    /// The stripped root.
    pub fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// The key of `stack`.
    pub fn key(&self, stack: StackId) -> &str {
        self.cache.get_or_init(stack, || self.build(stack))
    }

    fn build(&self, stack: StackId) -> String {
        let (snap, root, opts) = (self.snap, self.root.as_deref(), self.opts);
        match opts.key {
            SiteKey::Site => {
                // A Python site is normalized; a C++ one (an autograd node, a C++ function,
                // an operator) names no path and is kept as is.
                let site = sites::site_of(snap, stack, opts.sites);
                match site.python_frame() {
                    Some(f) => {
                        let mut key =
                            normalize_frame(snap, snap.frames.get(f), root, opts.ignore_lines);
                        if opts.frame_depth > 0 {
                            let frames = sites::filtered_frames(snap, stack);
                            let callers = frames
                                .iter()
                                .skip_while(|&&x| x != f)
                                .skip(1)
                                .map(|&x| snap.frames.get(x))
                                .filter(|fr| !sites::is_native(snap.strings.get(fr.filename)))
                                .take(opts.frame_depth);
                            for fr in callers {
                                key.push_str(" < ");
                                key.push_str(&normalize_frame(snap, fr, root, opts.ignore_lines));
                            }
                        }
                        key
                    }
                    None => site.label,
                }
            }
            SiteKey::Stack => {
                let frames: Vec<String> = sites::filtered_frames(snap, stack)
                    .into_iter()
                    .map(|f| snap.frames.get(f))
                    .filter(|fr| !sites::is_native(snap.strings.get(fr.filename)))
                    .map(|fr| normalize_frame(snap, fr, root, opts.ignore_lines))
                    .collect();
                if frames.is_empty() {
                    NO_FRAMES.to_string()
                } else {
                    frames.join(" < ")
                }
            }
        }
    }

    /// Per-stack totals summed under each stack's key: keys are built per distinct stack,
    /// never per allocation.
    pub(super) fn by_key(
        &self,
        per_stack: FxHashMap<StackId, SiteTotal>,
    ) -> BTreeMap<String, SiteTotal> {
        let mut out: BTreeMap<String, SiteTotal> = BTreeMap::new();
        for (stack, t) in per_stack {
            let key = self.key(stack);
            let e = match out.get_mut(key) {
                Some(e) => e,
                None => out.entry(key.to_string()).or_default(),
            };
            e.bytes += t.bytes;
            e.count += t.count;
        }
        out
    }
}
