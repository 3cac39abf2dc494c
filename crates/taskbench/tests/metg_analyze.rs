//! METG analysis: logs in the reference format (made with the core's own display and report),
//! the interpolation, and every edge case with its message.

use taskbench::metg::analyze::{analyze_text, Params, Peak, Stat, Undefined};
use taskbench_core::app::App;

/// One run's output in the reference format: display, then report.
fn report(graph: &str, iter: i64, elapsed: f64) -> String {
    let flags: Vec<String> = graph
        .split(" -and ")
        .map(|g| format!("{g} -iter {iter}"))
        .collect::<Vec<_>>()
        .join(" -and ")
        .split_whitespace()
        .map(String::from)
        .collect();
    let (app, _) = App::parse(&flags, &[]).unwrap();
    app.display() + &app.report_timing(elapsed)
}

const G: &str = "-steps 1000 -width 2 -type stencil_1d -kernel compute_bound";
const PEAK: f64 = 8.0e10;

fn flops(iter: i64, graphs: i64) -> f64 {
    (graphs * 2000 * (128 * iter + 64)) as f64
}

/// Elapsed time giving efficiency `eff`, rounded to what `%e` prints (the log keeps 7 digits).
fn elapsed_for(iter: i64, graphs: i64, eff: f64) -> f64 {
    format!("{:.6e}", flops(iter, graphs) / (eff * PEAK))
        .parse()
        .unwrap()
}

fn params(ngraphs: usize) -> Params {
    Params {
        ngraphs,
        nodes: 1.0,
        cores: 2.0,
        threshold: 0.5,
        peak: Peak::Flops(PEAK),
        stat: Stat::Mean,
    }
}

/// The reference's value, computed directly: granularity at the last size at or above the
/// threshold, interpolated linearly in efficiency with the next size.
fn expected(upper: (i64, f64), lower: (i64, f64), graphs: i64) -> f64 {
    let point = |(iter, el): (i64, f64)| {
        let eff = flops(iter, graphs) / el / 1.0 / PEAK;
        (eff, el / (graphs * 2000) as f64 * 2.0)
    };
    let ((e1, g1), (e0, g0)) = (point(upper), point(lower));
    (g1 - g0) / (e1 - e0) * (0.5 - e0) + g0
}

fn close(a: f64, b: f64) -> bool {
    ((a - b) / b).abs() < 1e-9
}

#[test]
fn interpolates_between_the_last_efficient_size_and_the_next() {
    let effs = [(1024, 0.95), (512, 0.8), (256, 0.6), (128, 0.4), (64, 0.2)];
    let mut log = String::new();
    for (iter, eff) in effs {
        for _ in 0..3 {
            log += &report(G, iter, elapsed_for(iter, 1, eff));
        }
    }
    let a = analyze_text(&log, &params(1));
    assert_eq!(a.points.len(), 5);
    assert_eq!(a.points[0].iterations, 1024);
    let want = expected(
        (256, elapsed_for(256, 1, 0.6)),
        (128, elapsed_for(128, 1, 0.4)),
        1,
    );
    let got = a.metg.unwrap();
    assert!(close(got, want), "{got} vs {want}");
    // Between the two sizes' granularities.
    assert!(got > a.points[3].granularity && got < a.points[2].granularity);
}

#[test]
fn repetitions_may_differ_and_are_averaged() {
    // 2 reps at large sizes, 4 at small ones; each size's mean is what the efficiencies use.
    let mut log = String::new();
    let spread = |eff: f64, k: usize| eff * (1.0 + 0.02 * (k as f64 - 1.5));
    let sizes = [(512, 0.9, 2), (256, 0.7, 2), (128, 0.45, 4), (64, 0.3, 4)];
    let mut mean_el = std::collections::HashMap::new();
    for (iter, eff, reps) in sizes {
        let els: Vec<f64> = (0..reps)
            .map(|k| elapsed_for(iter, 1, spread(eff, k)))
            .collect();
        for &e in &els {
            log += &report(G, iter, e);
        }
        mean_el.insert(iter, els.iter().sum::<f64>() / reps as f64);
    }
    let a = analyze_text(&log, &params(1));
    assert_eq!(
        a.points.iter().map(|p| p.reps).collect::<Vec<_>>(),
        vec![2, 2, 4, 4]
    );
    let want = expected((256, mean_el[&256]), (128, mean_el[&128]), 1);
    assert!(close(a.metg.clone().unwrap(), want));
    // The median changes the answer, the minimum too.
    let median = analyze_text(
        &log,
        &Params {
            stat: Stat::Median,
            ..params(1)
        },
    );
    let min = analyze_text(
        &log,
        &Params {
            stat: Stat::Min,
            ..params(1)
        },
    );
    assert!(median.metg.is_ok() && min.metg.is_ok());
    assert!(min.metg.unwrap() < a.metg.unwrap());
}

#[test]
fn fewer_repetitions_after_the_crossing_means_a_truncated_run() {
    let mut log = String::new();
    for (iter, eff, reps) in [(512, 0.9, 3), (256, 0.7, 3), (128, 0.4, 1)] {
        for _ in 0..reps {
            log += &report(G, iter, elapsed_for(iter, 1, eff));
        }
    }
    let e = analyze_text(&log, &params(1)).metg.unwrap_err();
    assert_eq!(e, Undefined::FewerReps { iterations: 128 });
    assert!(e.to_string().contains("truncated"));
}

#[test]
fn several_graphs_per_run() {
    let g4 = [G; 4].join(" -and ");
    let mut log = String::new();
    for (iter, eff) in [(512, 0.9), (256, 0.55), (128, 0.35)] {
        log += &report(&g4, iter, elapsed_for(iter, 4, eff));
    }
    // Read as one graph per run, the per-graph lines do not line up with the reports.
    assert!(matches!(
        analyze_text(&log, &params(1)).metg,
        Err(Undefined::Inconsistent(_))
    ));
    let a = analyze_text(&log, &params(4));
    let want = expected(
        (256, elapsed_for(256, 4, 0.55)),
        (128, elapsed_for(128, 4, 0.35)),
        4,
    );
    assert!(close(a.metg.unwrap(), want));
}

#[test]
fn a_point_at_exactly_the_threshold_is_the_answer() {
    // 65664000 FLOPs in 1.31328e-3 s is exactly 5e10 FLOP/s: efficiency 0.5 against 1e11.
    let mut log = String::new();
    for (iter, el) in [(512, 1.5e-3), (256, 1.31328e-3), (128, 1.2e-3)] {
        log += &report(G, iter, el);
    }
    let p = Params {
        peak: Peak::Flops(1e11),
        ..params(1)
    };
    let a = analyze_text(&log, &p);
    assert_eq!(a.points[1].efficiency, 0.5);
    assert_eq!(a.metg.unwrap(), 1.31328e-3 / 2000.0 * 2.0);
}

#[test]
fn edge_cases_have_clear_messages() {
    let run = |sizes: &[(i64, f64)]| {
        let log: String = sizes
            .iter()
            .map(|&(i, eff)| report(G, i, elapsed_for(i, 1, eff)))
            .collect();
        analyze_text(&log, &params(1)).metg
    };
    let never = run(&[(512, 0.4), (256, 0.3)]).unwrap_err();
    assert!(matches!(never, Undefined::NeverReaches { .. }));
    assert!(
        never
            .to_string()
            .contains("never reaches the threshold (best efficiency 40.0%)"),
        "{never}"
    );
    let always = run(&[(512, 0.9), (256, 0.8)]).unwrap_err();
    assert!(
        always
            .to_string()
            .contains("never falls below the threshold"),
        "{always}"
    );
    assert!(always.to_string().contains("sweep smaller sizes"));
    let one = run(&[(512, 0.9)]).unwrap_err();
    assert!(matches!(one, Undefined::NeverFallsBelow { .. }));
    let one_below = run(&[(512, 0.2)]).unwrap_err();
    assert!(matches!(one_below, Undefined::NeverReaches { .. }));
    let suspicious = run(&[(512, 1.7), (256, 0.2)]).unwrap_err();
    assert!(
        suspicious.to_string().contains("above 150%"),
        "{suspicious}"
    );
    let zero = analyze_text(&(report(G, 512, 0.0) + &report(G, 256, 1e-3)), &params(1))
        .metg
        .unwrap_err();
    assert_eq!(zero, Undefined::ZeroElapsed { iterations: 512 });
    assert!(zero.to_string().contains("elapsed time of 0"));
    assert_eq!(
        analyze_text("no report here\n", &params(1))
            .metg
            .unwrap_err(),
        Undefined::Empty
    );
    // A report cut off before its elapsed time.
    let cut = report(G, 512, 1e-3);
    let cut = &cut[..cut.find("Elapsed").unwrap()];
    let e = analyze_text(&(report(G, 256, 1e-3) + cut), &params(1))
        .metg
        .unwrap_err();
    assert!(e.to_string().contains("uneven"), "{e}");
}

#[test]
fn without_a_peak_efficiency_is_relative_to_the_largest_size() {
    let mut log = String::new();
    // Time per iteration constant down to 256, then overhead dominates.
    for (iter, el) in [(1024, 4.0e-3), (512, 2.0e-3), (256, 1.2e-3), (128, 1.0e-3)] {
        log += &report(G, iter, el);
    }
    let a = analyze_text(
        &log,
        &Params {
            peak: Peak::Relative,
            ..params(1)
        },
    );
    let effs: Vec<f64> = a.points.iter().map(|p| p.efficiency).collect();
    assert_eq!(effs[0], 1.0);
    assert_eq!(effs[1], 1.0);
    assert!((effs[2] - 4.0e-3 / (1.2e-3 * 4.0)).abs() < 1e-12);
    assert!((effs[3] - 0.5).abs() < 1e-12);
}
