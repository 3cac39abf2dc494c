//! The apps, each on the selector API, each checking its answer against a serial replay of
//! the same random streams. Each selector version is written once against [`Pes`] and runs
//! in one process or with PEs on several ranks; the baselines run in one process.

pub mod histogram;
pub mod index_gather;
mod pes;
pub mod randperm;
pub mod reshape;
pub mod toposort;
pub mod triangles;

pub use crate::memory::table_bytes;
pub use pes::{extend_from_bytes, Pes, RANK_ERROR};
use serde::Serialize;
use tactor::Runtime;

/// What one run of an app measured and whether its answer was right.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The app.
    pub app: &'static str,
    /// How it was written (`selector`, `lambda`, ...).
    pub model: &'static str,
    /// PEs (workers of every rank).
    pub pes: usize,
    /// Seconds the parallel part took.
    pub seconds: f64,
    /// Operations done in all (updates, requests, ...).
    pub operations: u64,
    /// What an operation is, for the rate.
    pub unit: &'static str,
    /// Millions of operations per second.
    pub rate_millions: f64,
    /// What the app computed, where it is a number (triangles found).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<u64>,
}

impl Outcome {
    /// An outcome of `operations` done in `seconds`.
    pub fn new(
        app: &'static str,
        model: &'static str,
        pes: usize,
        seconds: f64,
        operations: u64,
        unit: &'static str,
    ) -> Outcome {
        Outcome {
            app,
            model,
            pes,
            seconds,
            operations,
            unit,
            rate_millions: operations as f64 / seconds.max(1e-12) / 1e6,
            result: None,
        }
    }
}

/// A table of `entries` per PE is indexed by `u32` in messages: 1 to `u32::MAX` entries.
pub fn check_table(entries: u64) -> Result<(), String> {
    if entries == 0 || entries > u64::from(u32::MAX) {
        return Err(format!(
            "-T {entries}: the table needs 1 to {} entries per PE",
            u32::MAX
        ));
    }
    Ok(())
}

/// Runs `body(pe)` on every worker of `rt` (one PE each), like the selector's PEs.
pub(crate) fn on_pes(rt: &Runtime, body: impl Fn(usize) + Sync) {
    let body = &body;
    rt.scope(|s| {
        for pe in 0..rt.workers() {
            s.launch(tactor::Placement::Worker(pe), &[], move |_| body(pe));
        }
    })
    .expect("a PE failed");
}

/// Runs `body(pe)` for every PE of this rank at once, `pe` being the global PE number.
pub(crate) fn on_my_pes(pes: &Pes, body: impl Fn(usize) + Sync) {
    let first = pes.mine().start;
    on_pes(pes.runtime(), |l| body(first + l));
}

/// `f(pe)` on every PE at once, the results in PE order (what each PE does with its own part
/// after an exchange, timed as the app).
pub(crate) fn per_pe<T: Send>(rt: &Runtime, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let out: Vec<std::sync::Mutex<Option<T>>> = (0..rt.workers())
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    on_pes(rt, |pe| {
        let r = f(pe);
        *out[pe].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    });
    out.into_iter()
        .map(|o| {
            o.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every PE ran")
        })
        .collect()
}
