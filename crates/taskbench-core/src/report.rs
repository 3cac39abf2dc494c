//! What `taskbench` prints (SPEC §5): the configuration display before the run and the report
//! after it, byte for byte as the reference prints them.

use crate::app::App;
use crate::error::ConfigError;
use crate::graph::KernelType;
use crate::plan::Plan;
use std::fmt::Write;

/// Formats like C's `printf("%e")`: six decimals and an exponent of at least two digits.
///
/// ```
/// use taskbench_core::report::c_exp;
/// assert_eq!(c_exp(0.01234567), "1.234567e-02");
/// assert_eq!(c_exp(2.124470e10), "2.124470e+10");
/// assert_eq!(c_exp(0.0), "0.000000e+00");
/// ```
pub fn c_exp(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let s = format!("{x:.6e}");
    let (mantissa, exp) = s.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

/// Everything the report counts, summed over all graphs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tasks executed.
    pub tasks: i64,
    /// Dependencies (edges) executed.
    pub deps: i64,
    /// Dependencies whose ends sit on the same node (with `-nodes`).
    pub local_deps: i64,
    /// Dependencies that cross nodes (with `-nodes`).
    pub nonlocal_deps: i64,
    /// FLOPs credited to the kernels.
    pub flops: i64,
    /// Bytes credited to the kernels.
    pub bytes: i64,
    /// `local_deps` × output bytes.
    pub local_transfer: i64,
    /// `nonlocal_deps` × output bytes.
    pub nonlocal_transfer: i64,
}

impl App {
    /// Tasks, dependencies, FLOPs and bytes of all graphs, as counted when the command line
    /// was parsed (the count costs a pass over every distinct timestep shape, and a run needs
    /// it before and after). After changing `graphs` or `nodes` by hand, use
    /// [`App::try_totals`] for a fresh count.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Counts tasks, dependencies, FLOPs and bytes of all graphs, or says which count does
    /// not fit the report's 64-bit counters. Timesteps of one class
    /// ([`crate::graph::TaskGraph::timestep_classes`]) have the same tasks and dependencies,
    /// so the work is proportional to the distinct shapes, not to `-steps` (except for
    /// `load_imbalance`, whose FLOPs differ per task).
    pub fn try_totals(&self) -> Result<Totals, ConfigError> {
        let mut tot = [0i128; 8];
        for g in &self.graphs {
            let out = g.output_bytes_per_task as i128;
            let nodes = i128::from(self.nodes.max(1));
            let node = |p: i64| match self.placement {
                Some(pl) => i128::from(pl.rank_of(p, g.max_width)),
                None => i128::from(p) * nodes / i128::from(g.max_width),
            };
            let bytes = i128::from(g.kernel.bytes(g.scratch_bytes_per_task));
            let per_task_flops = g.kernel.kind != KernelType::LoadImbalance;
            for c in g.timestep_classes() {
                let (t, n) = (c.first, i128::from(c.count));
                let (off, wid) = (g.offset_at_timestep(t), g.width_at_timestep(t));
                let mut class = [0i128; 8];
                class[0] = i128::from(wid);
                class[5] = bytes * i128::from(wid);
                for p in off..off + wid {
                    if per_task_flops {
                        class[4] += i128::from(g.kernel.flops(g.graph_index, t, p));
                    }
                    for d in g.filtered_dependencies(t, p) {
                        class[1] += 1;
                        let k = if node(p) == node(d) { 2 } else { 3 };
                        class[k] += 1;
                        class[k + 4] += out;
                    }
                }
                for (total, v) in tot.iter_mut().zip(class) {
                    *total = total.saturating_add(v.saturating_mul(n));
                }
                if !per_task_flops {
                    for k in 0..c.count {
                        let tk = t + k * c.stride;
                        for p in off..off + wid {
                            tot[4] += i128::from(g.kernel.flops(g.graph_index, tk, p));
                        }
                    }
                }
            }
        }
        let names = [
            "tasks",
            "dependencies",
            "local dependencies",
            "nonlocal dependencies",
            "FLOPs",
            "bytes",
            "local transfer bytes",
            "nonlocal transfer bytes",
        ];
        let mut fit = [0i64; 8];
        for ((f, v), name) in fit.iter_mut().zip(tot).zip(names) {
            // i64::MAX itself is refused too: kernels saturate there.
            *f = i64::try_from(v).ok().filter(|&x| x < i64::MAX).ok_or_else(|| {
                ConfigError::TooLarge(format!(
                    "the graphs' total {name} exceed the report's 64-bit counter ({}); use fewer -steps, -width or -iter",
                    i64::MAX
                ))
            })?;
        }
        let [tasks, deps, local_deps, nonlocal_deps, flops, bytes, local_transfer, nonlocal_transfer] =
            fit;
        Ok(Totals {
            tasks,
            deps,
            local_deps,
            nonlocal_deps,
            flops,
            bytes,
            local_transfer,
            nonlocal_transfer,
        })
    }

    /// The configuration display, with per-timestep points and dependencies for `-v` and
    /// reverse dependencies for `-vv`.
    pub fn display(&self) -> String {
        let mut s = String::from("Running Task Benchmark\n  Configuration:\n");
        for (n, g) in self.graphs.iter().enumerate() {
            let k = &g.kernel;
            let _ = write!(
                s,
                "    Task Graph {}:\n      Time Steps: {}\n      Max Width: {}\n      Dependence Type: {}\n      \
                 Radix: {}\n      Period: {}\n      Fraction Connected: {:.6}\n      Kernel:\n        Type: {}\n        \
                 Iterations: {}\n        Samples: {}\n        Imbalance: {:.6}\n      Output Bytes: {}\n      \
                 Scratch Bytes: {}\n",
                n + 1,
                g.timesteps,
                g.max_width,
                g.dependence,
                g.radix,
                g.period,
                g.fraction_connected,
                k.kind,
                k.iterations,
                k.samples,
                k.imbalance,
                g.output_bytes_per_task,
                g.scratch_bytes_per_task
            );
            if self.verbose > 0 {
                Self::display_timesteps(&mut s, &Plan::new(g.clone()), self.verbose > 1);
            }
        }
        s
    }

    fn display_timesteps(s: &mut String, plan: &Plan, reverse: bool) {
        let list = |s: &mut String, points: &[i64]| {
            for p in points {
                let _ = write!(s, " {p}");
            }
            s.push('\n');
        };
        for t in 0..plan.graph().timesteps {
            let (off, wid) = (plan.offset(t), plan.width(t));
            let (loff, lwid) = (plan.offset(t - 1), plan.width(t - 1));
            let _ = writeln!(s, "      Timestep {t} (offset {off}, width {wid}, last offset {loff}, last width {lwid}):");
            s.push_str("        Points:");
            list(s, &(off..off + wid).collect::<Vec<_>>());
            s.push_str("        Dependencies:\n");
            for p in off..off + wid {
                let _ = write!(s, "          Point {p}:");
                list(s, plan.deps(t, p));
            }
            if reverse {
                s.push_str("        Reverse Dependencies:\n");
                for q in loff..loff + lwid {
                    let _ = write!(s, "          Point {q}:");
                    list(s, plan.rdeps(t, q));
                }
            }
        }
    }

    /// The report printed after the run, for a measured `elapsed_seconds`.
    pub fn report_timing(&self, elapsed_seconds: f64) -> String {
        let t = self.totals();
        let mut s = String::new();
        let _ = writeln!(s, "Total Tasks {}", t.tasks);
        let _ = writeln!(s, "Total Dependencies {}", t.deps);
        if let Some(pl) = self.placement {
            let how = format!("({} ranks x {} workers)", pl.ranks, pl.workers);
            let _ = writeln!(s, "  Local Dependencies {} {how}", t.local_deps);
            let _ = writeln!(s, "  Nonlocal Dependencies {} {how}", t.nonlocal_deps);
            let _ = writeln!(s, "  Number of Ranks {}", pl.ranks);
        } else if self.nodes > 0 {
            let _ = writeln!(s, "  Local Dependencies {} (estimated)", t.local_deps);
            let _ = writeln!(s, "  Nonlocal Dependencies {} (estimated)", t.nonlocal_deps);
            let _ = writeln!(s, "  Number of Nodes (used for estimate) {}", self.nodes);
        } else {
            s.push_str("  Unable to estimate local/nonlocal dependencies\n");
        }
        let _ = writeln!(s, "Total FLOPs {}", t.flops);
        let _ = writeln!(s, "Total Bytes {}", t.bytes);
        let _ = writeln!(s, "Elapsed Time {} seconds", c_exp(elapsed_seconds));
        let _ = writeln!(s, "FLOP/s {}", c_exp(t.flops as f64 / elapsed_seconds));
        let _ = writeln!(s, "B/s {}", c_exp(t.bytes as f64 / elapsed_seconds));
        s.push_str(if self.placement.is_some() {
            "Transfer:\n"
        } else {
            "Transfer (estimated):\n"
        });
        if self.nodes > 0 || self.placement.is_some() {
            let _ = writeln!(s, "  Local Bytes {}", t.local_transfer);
            let _ = writeln!(s, "  Nonlocal Bytes {}", t.nonlocal_transfer);
            let _ = writeln!(
                s,
                "  Local Bandwidth {} B/s",
                c_exp(t.local_transfer as f64 / elapsed_seconds)
            );
            let _ = writeln!(
                s,
                "  Nonlocal Bandwidth {} B/s",
                c_exp(t.nonlocal_transfer as f64 / elapsed_seconds)
            );
        } else {
            s.push_str("  Unable to estimate local/nonlocal transfer\n");
        }
        s
    }
}
