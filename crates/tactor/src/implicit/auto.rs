//! Automatic tracing: finding repeated fragments in the stream of launches without
//! annotations.
//!
//! **How it decides.** Every launch is summarised by a 64-bit hash of what a trace compares
//! (the task's closure type, its placement, its accesses, whether it waits for an outside
//! event — [`super::Program::launch_after`]). A direct-mapped table remembers
//! where each hash was last seen; when a launch's hash was seen `d` launches ago, `d` becomes
//! a candidate period (a few are followed at once, so that a launch repeated inside the period
//! does not hide the period itself), and each following launch that equals the one a period
//! before it extends that candidate's run. Once the run covers a whole fragment — the period repeated up to at least
//! [`MIN_FRAGMENT`] launches — the program predicts that the next fragment equals the last one
//! and opens a trace for it, whose id is the hash of the predicted sequence: recorded the
//! first time, replayed after that, fragment after fragment while the prediction holds.
//!
//! **Why it never changes results.** A traced fragment runs only once all of its launches
//! arrived and matched (hash and full comparison). At the first launch that differs, what was
//! buffered is analysed launch by launch, in program order, exactly as without tracing (a
//! recording in progress is ended early instead: it is the analysis of what was launched, and
//! is not kept for replay). Reading data back (`with`, `finish`) does the same with an open
//! fragment first.
//!
//! **What it costs.** A hash and two table updates per launch, and while tracing, the check a
//! replay makes anyway; measured by `examples/implicit.rs`.

/// Launches of history kept (a power of two).
const HISTORY: usize = 1 << 14;
/// Entries of the last-seen table (a power of two).
const TABLE: usize = 1 << 12;
/// Automatic tracing makes fragments of at least this many launches (whole periods), so that an
/// instance's fixed cost is spread over many tasks. 32 under Miri, which interprets every launch:
/// the same code runs on programs an eighth as long.
pub const MIN_FRAGMENT: usize = if cfg!(miri) { 32 } else { 256 };
/// And at most this many.
const MAX_FRAGMENT: usize = HISTORY / 4;

/// Candidate periods followed at once.
const CANDIDATES: usize = 4;

/// The detector's state.
pub(crate) struct Detector {
    history: Vec<u64>,
    seen: Vec<(u64, usize)>,
    launches: usize,
    /// Candidate periods and their runs (a period of 0 is an empty place).
    candidates: [(usize, usize); CANDIDATES],
    /// The shortest fragment made (whole periods of at least this many launches).
    min: usize,
}

/// A fragment predicted to come next: its trace id and the hashes of its launches.
pub(crate) struct Prediction {
    pub(crate) id: u64,
    pub(crate) expected: std::sync::Arc<[u64]>,
}

impl Default for Detector {
    fn default() -> Self {
        Detector {
            history: vec![0; HISTORY],
            seen: vec![(0, usize::MAX); TABLE],
            launches: 0,
            candidates: [(0, 0); CANDIDATES],
            min: MIN_FRAGMENT,
        }
    }
}

impl Detector {
    /// A detector whose fragments are whole periods of at least `min` launches (at most
    /// `MAX_FRAGMENT`).
    pub(crate) fn with_min(min: usize) -> Detector {
        Detector {
            min: min.clamp(1, MAX_FRAGMENT),
            ..Detector::default()
        }
    }

    /// Takes the next launch's hash; returns a prediction when a fragment has just repeated
    /// and `idle` (no fragment is open).
    pub(crate) fn observe(&mut self, hash: u64, idle: bool) -> Option<Prediction> {
        let pos = self.launches;
        self.launches += 1;
        self.history[pos % HISTORY] = hash;
        for i in 0..CANDIDATES {
            let (period, run) = self.candidates[i];
            let holds = period > 0 && pos >= period && self.at(pos - period) == hash;
            self.candidates[i].1 = if holds { run + 1 } else { 0 };
        }
        let slot = (hash as usize) % TABLE;
        let (h, last) = self.seen[slot];
        let d = pos.wrapping_sub(last);
        let new = h == hash && last != usize::MAX && d <= MAX_FRAGMENT;
        if new && !self.candidates.iter().any(|c| c.0 == d) {
            // Replace the candidate with the shortest run.
            let weakest = (0..CANDIDATES)
                .min_by_key(|&i| self.candidates[i].1)
                .expect("there are candidates");
            self.candidates[weakest] = (d, 1);
        }
        self.seen[slot] = (hash, pos);
        if !idle {
            return None;
        }
        let len = self.candidates.iter().find_map(|&(period, run)| {
            let len = period.checked_mul(self.min.div_ceil(period.max(1)))?;
            (period > 0 && len <= MAX_FRAGMENT && run >= len).then_some(len)
        })?;
        let expected: std::sync::Arc<[u64]> = (pos + 1 - len..=pos).map(|i| self.at(i)).collect();
        let id = expected
            .iter()
            .fold(0xA5A5_0000_0000_0000 ^ len as u64, |acc, &h| mix(acc, h));
        Some(Prediction { id, expected })
    }

    fn at(&self, i: usize) -> u64 {
        self.history[i % HISTORY]
    }
}

/// Folds `b` into `a` (a multiply-rotate mix: order matters, collisions are rare; a collision
/// is harmless, as a replay also compares launches in full).
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    (a ^ b).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(27) ^ (a >> 17)
}

/// A `Hasher` over [`mix`], for the parts of a launch's signature.
#[derive(Default)]
pub(crate) struct Mixer(pub(crate) u64);

impl std::hash::Hasher for Mixer {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = mix(self.0, u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = mix(self.0, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "safe code only: the detector's arithmetic")]
    fn a_repeating_stream_is_predicted_after_one_whole_fragment_and_a_broken_one_is_not() {
        let mut d = Detector::default();
        let period = [1u64, 2, 3, 2, 5];
        let (at, p) = (0..2000)
            .find_map(|i| d.observe(period[i % 5], true).map(|p| (i, p)))
            .expect("predicted");
        let whole = |period: usize| MIN_FRAGMENT.div_ceil(period) * period;
        assert_eq!(
            p.expected.len(),
            whole(5),
            "whole periods, at least MIN_FRAGMENT"
        );
        assert!(
            at < 5 + whole(5) + 5,
            "predicted once a fragment repeated, at launch {at}"
        );
        assert!(
            d.observe(period[(at + 1) % 5], false).is_none(),
            "not while a fragment is open"
        );
        let mut d = Detector::default();
        let predicted = (0..2000).any(|i| d.observe(mix(i, 7), true).is_some());
        assert!(!predicted, "nothing repeats");
        // A launch repeated inside the period does not hide the period.
        let mut d = Detector::default();
        let body = [1u64, 2, 1, 3, 4, 1, 5];
        let found = (0..3000).find_map(|i| d.observe(body[i % 7], true));
        assert_eq!(found.map(|p| p.expected.len()), Some(whole(7)));
    }
}
