//! How far a METG can be trusted: the noise measured while sweeping turned into an interval of
//! granularities and a flag.
//!
//! METG is ill-conditioned where the efficiency curve runs flat near the threshold: a few
//! percent of noise then moves it by a factor. So next to the METG we report where the curve
//! crosses the threshold lowered and raised by the measured noise `δ`: the METG lies somewhere
//! in `[METG(thr·(1−δ)), METG(thr·(1+δ))]`. `δ` is the larger of half the median spread of a
//! contender's repetitions and half the drift of the calibration runs (how much the machine
//! itself moved during the sweep, [`drift`]).

use super::analyze::{metg, Point};
use super::sweep::{drift, SizeNoise};

/// The relative noise `δ` of one contender's sweep (at most 0.5).
pub fn delta(sizes: &[SizeNoise], calibration: &[f64]) -> f64 {
    let mut spreads: Vec<f64> = sizes.iter().map(|s| s.spread).collect();
    spreads.sort_by(f64::total_cmp);
    let median = spreads.get(spreads.len() / 2).copied().unwrap_or(0.0);
    (median / 2.0).max(drift(calibration) / 2.0).min(0.5)
}

/// The granularity interval (seconds) in which the curve is within `delta` of `threshold`;
/// either end is `None` where the curve never crosses that level.
pub fn interval(points: &[Point], threshold: f64, delta: f64) -> (Option<f64>, Option<f64>) {
    (
        metg(points, threshold * (1.0 - delta)).ok(),
        metg(points, threshold * (1.0 + delta)).ok(),
    )
}

/// Whether a size that decides the METG was measured under noise: any noisy size whose
/// granularity lies within a factor of 2 of the interval (or of the METG), or, where there
/// is no METG, any noisy size at all.
pub fn noisy_near(
    points: &[Point],
    sizes: &[SizeNoise],
    metg: Option<f64>,
    interval: (Option<f64>, Option<f64>),
) -> bool {
    let lo = interval.0.or(metg);
    let hi = interval.1.or(metg);
    sizes.iter().filter(|s| s.noisy).any(|s| {
        let Some(p) = points.iter().find(|p| p.iterations == s.iterations) else {
            return false;
        };
        match (lo, hi) {
            (Some(lo), Some(hi)) => {
                p.granularity >= lo.min(hi) / 2.0 && p.granularity <= hi.max(lo) * 2.0
            }
            _ => true,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(iterations: i64, granularity: f64, efficiency: f64) -> Point {
        Point {
            iterations,
            reps: 3,
            elapsed: 1.0,
            elapsed_std: 0.0,
            elapsed_min: 1.0,
            elapsed_max: 1.0,
            tasks: 1,
            flops: 1,
            bytes: 0,
            flops_per_second: 1.0,
            bytes_per_second: 0.0,
            granularity,
            efficiency,
        }
    }

    #[test]
    fn a_flat_curve_gives_a_wide_interval() {
        // Efficiency 0.52 down to 0.47 over a factor of 4 in granularity.
        let flat = [
            pt(64, 4e-6, 0.9),
            pt(32, 2e-6, 0.52),
            pt(16, 1e-6, 0.5),
            pt(8, 0.5e-6, 0.47),
            pt(4, 0.25e-6, 0.2),
        ];
        let (lo, hi) = interval(&flat, 0.5, 0.05);
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        assert!(hi / lo > 3.0, "[{lo}, {hi}]");
        let steep = [
            pt(64, 4e-6, 0.9),
            pt(32, 2e-6, 0.8),
            pt(16, 1e-6, 0.6),
            pt(8, 0.5e-6, 0.1),
        ];
        let (lo, hi) = interval(&steep, 0.5, 0.05);
        assert!(hi.unwrap() / lo.unwrap() < 1.2);
    }

    #[test]
    fn delta_takes_the_larger_noise() {
        let s = |spread| SizeNoise {
            iterations: 1,
            spread,
            calibration_drop: 0.0,
            foreign_load: None,
            attempts: 1,
            noisy: false,
        };
        assert_eq!(delta(&[s(0.1), s(0.2), s(0.3)], &[1.0, 1.0]), 0.1);
        assert_eq!(delta(&[s(0.0)], &[1.0, 0.6, 1.0]), 0.2);
        // One burst among many readings is not drift.
        let mut cal = vec![1.0; 20];
        cal[7] = 0.5;
        assert_eq!(delta(&[s(0.0)], &cal), 0.0);
        assert_eq!(delta(&[s(5.0)], &[]), 0.5);
    }
}
