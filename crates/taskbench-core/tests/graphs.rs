//! Graph properties: the reference's known totals (SPEC §5), reverse dependencies mirroring
//! forward ones for every type over many sizes, and the rules of SPEC §1.

use taskbench_core::app::App;
use taskbench_core::graph::{DependenceType, TaskGraph};
use taskbench_core::ConfigError;

fn app(flags: &str) -> Result<App, ConfigError> {
    let args: Vec<&str> = flags.split_whitespace().collect();
    App::parse(&args, &[]).map(|(a, _)| a)
}

#[test]
fn dependency_totals_match_the_reference() {
    let cases = [
        ("trivial", 0),
        ("no_comm", 88),
        ("stencil_1d", 220),
        ("stencil_1d_periodic", 264),
        ("fft", 198),
        ("all_to_all", 352),
        ("nearest", 220),
        ("spread -period 2", 264),
    ];
    for (ty, deps) in cases {
        let t = app(&format!("-steps 23 -width 4 -type {ty}"))
            .unwrap()
            .totals();
        assert_eq!((t.tasks, t.deps), (92, deps), "{ty}");
    }
    let dom = app("-steps 23 -width 4 -type dom").unwrap().totals();
    assert_eq!((dom.tasks, dom.deps), (80, 136));
    let tree = app("-steps 23 -width 4 -type tree").unwrap().totals();
    assert_eq!((tree.tasks, tree.deps), (87, 86));
    let nodes = app("-steps 100 -width 32 -type stencil_1d -nodes 4")
        .unwrap()
        .totals();
    assert_eq!(
        (
            nodes.tasks,
            nodes.deps,
            nodes.local_deps,
            nodes.nonlocal_deps
        ),
        (3200, 9306, 8712, 594)
    );
    assert_eq!(nodes.nonlocal_transfer, 594 * 16);
}

#[test]
fn flops_and_bytes_follow_the_kernels() {
    let t = app("-steps 1000 -width 2 -type stencil_1d -kernel compute_bound -iter 1024")
        .unwrap()
        .totals();
    assert_eq!(
        (t.tasks, t.deps, t.flops, t.bytes),
        (2000, 3996, 262_272_000, 0)
    );
    let m = app("-steps 10 -width 2 -kernel memory_bound -iter 8 -scratch 4096 -sample 16")
        .unwrap()
        .totals();
    assert_eq!((m.flops, m.bytes), (0, 20 * 4096 * 8 / 16));
    let c2 = app("-steps 10 -width 2 -kernel compute_bound2 -iter 5")
        .unwrap()
        .totals();
    assert_eq!(c2.flops, 20 * 64 * 5);
    // load_imbalance credits each task with its own iteration count.
    let li = app("-steps 6 -width 8 -kernel load_imbalance -iter 1000 -imbalance 0.5").unwrap();
    let g = &li.graphs[0];
    let expected: i64 = (0..6)
        .flat_map(|t| (0..8).map(move |p| (t, p)))
        .map(|(t, p)| 128 * g.kernel.imbalanced_iterations(0, t, p) + 64)
        .sum();
    assert_eq!(li.totals().flops, expected);
    assert_ne!(expected, 48 * (128 * 1000 + 64));
}

#[test]
fn report_has_the_reference_lines() {
    let a = app("-steps 1000 -width 2 -type stencil_1d -kernel compute_bound -iter 1024").unwrap();
    let r = a.report_timing(0.01234567);
    let expected = "Total Tasks 2000\nTotal Dependencies 3996\n  Unable to estimate local/nonlocal dependencies\n\
        Total FLOPs 262272000\nTotal Bytes 0\nElapsed Time 1.234567e-02 seconds\nFLOP/s 2.124405e+10\n\
        B/s 0.000000e+00\nTransfer (estimated):\n  Unable to estimate local/nonlocal transfer\n";
    assert_eq!(r, expected);
    let n = app("-steps 100 -width 32 -type stencil_1d -nodes 4")
        .unwrap()
        .report_timing(2.0);
    assert!(n.contains("  Local Dependencies 8712 (estimated)\n  Nonlocal Dependencies 594 (estimated)\n  Number of Nodes (used for estimate) 4\n"));
    assert!(n.contains("  Local Bytes 139392\n  Nonlocal Bytes 9504\n  Local Bandwidth 6.969600e+04 B/s\n  Nonlocal Bandwidth 4.752000e+03 B/s\n"));
}

/// Every valid graph of every type over many sizes: the filtered reverse dependencies are the
/// exact mirror of the filtered dependencies, no task lists a point twice, and every dependency
/// lies in the previous timestep's window. Computed by brute force, independent of the plan.
#[test]
fn reverse_dependencies_mirror_forward_ones() {
    let mut graphs = 0;
    for ty in DependenceType::ALL {
        for w in 1..=20 {
            for radix in [0, 1, 2, 3, 4, 5, 7] {
                for period in [0, 1, 2, 3, 5] {
                    for steps in [1, 2, 7, 23] {
                        let g = TaskGraph {
                            dependence: ty,
                            max_width: w,
                            radix,
                            period,
                            timesteps: steps,
                            graph_index: (w % 3),
                            ..TaskGraph::default()
                        };
                        let period_given = ty.has_period();
                        if taskbench_core::app::validate_graph(&g, period_given).is_err()
                            || (!period_given && period != 0)
                        {
                            continue;
                        }
                        // A point listed twice (spread with radix above width) is rejected by
                        // the graph check; everything else must pass it and mirror exactly.
                        match taskbench_core::graph::check_graph(&g) {
                            Err(e) if e.to_string().contains("appears twice") => continue,
                            Err(e) => panic!("{e}"),
                            Ok(()) => {}
                        }
                        check_mirror(&g);
                        graphs += 1;
                    }
                }
            }
        }
    }
    assert!(graphs > 2000, "{graphs}");
}

fn check_mirror(g: &TaskGraph) {
    for t in 0..g.timesteps {
        let (off, wid) = (g.offset_at_timestep(t), g.width_at_timestep(t));
        let (loff, lwid) = (g.offset_at_timestep(t - 1), g.width_at_timestep(t - 1));
        let mut edges = Vec::new();
        for p in off..off + wid {
            let deps = g.filtered_dependencies(t, p);
            let mut sorted = deps.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                deps.len(),
                "{g:?} t={t} p={p}: duplicate in {deps:?}"
            );
            for d in deps {
                assert!(d >= loff && d < loff + lwid);
                edges.push((d, p));
            }
        }
        let mut redges = Vec::new();
        for q in loff..loff + lwid {
            for c in g.filtered_reverse_dependencies(t, q) {
                redges.push((q, c));
            }
        }
        edges.sort();
        redges.sort();
        assert_eq!(
            edges, redges,
            "{:?} width {} radix {} period {} t={t}",
            g.dependence, g.max_width, g.radix, g.period
        );
    }
}

#[test]
fn rules_are_enforced_with_clear_messages() {
    let bad = [
        ("-steps 0", "Invalid flag \"-steps 0\" must be > 0"),
        ("-width -3", "Invalid flag \"-width -3\" must be > 0"),
        ("-output 8", "Invalid flag \"-output 8\" must be >= 16"),
        ("-scratch 12", "Invalid flag \"-scratch 12\" must be a multiple of 8"),
        ("-fraction 1.5", "Invalid flag \"-fraction 1.500000\" must be >= 0 and <= 1"),
        ("-iter -1", "Invalid flag \"-iter -1\" must be >= 0"),
        ("-steps abc", "Invalid flag \"-steps abc\": expected an integer"),
        ("-steps", "Flag \"-steps\" requires an argument"),
        ("-bogus 3", "Unknown flag \"-bogus\" (see -h for the flags taskbench accepts)"),
        ("-type spread -period 0", "Graph type \"spread\" requires a period that is at least 1"),
        ("-type fft -width 1", "Graph type \"fft\" requires a width of at least 2 (got 1): one point has no butterfly (the reference divides by zero)"),
        ("-type stencil_1d -period 3", "Graph type \"stencil_1d\" does not support user-configurable period"),
    ];
    for (flags, msg) in bad {
        assert_eq!(app(flags).unwrap_err().to_string(), msg, "{flags}");
    }
    assert!(app("-type bogus")
        .unwrap_err()
        .to_string()
        .contains("-type bogus"));
    assert!(app("-kernel io_bound")
        .unwrap_err()
        .to_string()
        .contains("io_bound"));
    assert!(app("-kernel compute_dgemm")
        .unwrap_err()
        .to_string()
        .contains("not supported"));
    // The second graph is checked too, and named by its flags.
    assert!(app("-and -steps 0").is_err());
    // spread with a radix above the width would list a point twice: refused up front, and
    // an absurd radix cannot overflow the period rule.
    let e = app("-type spread -width 2 -radix 3 -period 1").unwrap_err();
    assert!(e.to_string().contains("-radix 3"), "{e}");
    let e = app("-type spread -radix 9223372036854775807 -period 1").unwrap_err();
    assert!(e.to_string().contains("-radix 9223372036854775807"), "{e}");
    let e = app("-type spread -width 9223372036854775807 -radix 2 -period 9223372036854775807")
        .unwrap_err();
    assert!(e.to_string().contains("at most 4611686018427387904"), "{e}");
}

#[test]
fn each_graph_after_and_starts_from_defaults_and_gets_its_index() {
    let a = app("-steps 9 -type nearest -radix 5 -and -type spread -width 9 -and").unwrap();
    assert_eq!(a.graphs.len(), 3);
    assert_eq!(
        (a.graphs[0].timesteps, a.graphs[0].radix, a.graphs[0].period),
        (9, 5, 0)
    );
    assert_eq!(
        (
            a.graphs[1].timesteps,
            a.graphs[1].period,
            a.graphs[1].max_width
        ),
        (4, 3, 9)
    );
    assert_eq!(
        a.graphs.iter().map(|g| g.graph_index).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
}

/// Totals computed per class of timesteps equal a count over every task, for every type,
/// with and without `-nodes` (and `-nodes` beyond the width cannot overflow).
#[test]
fn class_totals_equal_a_count_over_every_task() {
    for ty in DependenceType::ALL {
        if ty == DependenceType::RandomSpread {
            continue;
        }
        for (steps, width) in [(1, 3), (9, 4), (37, 7), (70, 16)] {
            for nodes in ["", "-nodes 3", "-nodes 9223372036854775807"] {
                let flags = format!(
                    "-steps {steps} -width {width} -type {ty} -radix 2 -kernel load_imbalance -iter 9 -imbalance 1 {nodes}"
                );
                let Ok(a) = app(&flags) else { continue };
                let g = &a.graphs[0];
                let n = a.nodes.max(1) as i128;
                let node = |p: i64| p as i128 * n / g.max_width as i128;
                let (mut tasks, mut deps, mut local, mut flops) = (0i64, 0i64, 0i64, 0i64);
                for t in 0..steps {
                    for p in 0..width {
                        if !g.contains(t, p) {
                            continue;
                        }
                        tasks += 1;
                        flops += g.kernel.flops(g.graph_index, t, p);
                        for d in g.filtered_dependencies(t, p) {
                            deps += 1;
                            local += i64::from(node(p) == node(d));
                        }
                    }
                }
                let tot = a.totals();
                assert_eq!(
                    (tot.tasks, tot.deps, tot.local_deps, tot.flops),
                    (tasks, deps, local, flops),
                    "{flags}"
                );
                assert_eq!(tot.local_deps + tot.nonlocal_deps, tot.deps, "{flags}");
            }
        }
    }
}
