//! The Task Bench test matrix, like the reference's own: 23 timesteps (coprime with 2, 3 and
//! 5), widths 1 to 16, every dependence type, every supported kernel, outputs of 16 and 1024
//! bytes, 1 to 4 graphs at once, on every system and 1 to 4 workers. Every run validates every
//! dependency and must execute exactly the graph's tasks.

use taskbench::cli::run_checked;
use taskbench::systems::{all, RunConfig};
use taskbench_core::app::App;
use taskbench_core::graph::{DependenceType, KernelType};

fn types() -> Vec<DependenceType> {
    DependenceType::ALL
        .into_iter()
        .filter(|t| *t != DependenceType::RandomSpread)
        .collect()
}

fn kernels() -> Vec<KernelType> {
    KernelType::ALL
        .into_iter()
        .filter(|k| k.is_supported())
        .collect()
}

/// Flags of one graph that is valid for `width`, adjusting what the type's rules require.
fn graph_flags(
    ty: DependenceType,
    width: i64,
    kernel: KernelType,
    output: usize,
) -> Option<String> {
    let mut f = format!("-steps 23 -width {width} -type {ty} -kernel {kernel} -output {output}");
    match ty {
        DependenceType::Stencil1DPeriodic if width < 3 => return None,
        DependenceType::Fft if width < 2 => return None,
        DependenceType::Spread => {
            let radix = width.min(3);
            let period = 3.min((width + radix - 1) / radix);
            f += &format!(" -radix {radix} -period {period}");
        }
        _ => {}
    }
    f += match kernel {
        // Scratch and sample sizes vary with the width: samples smaller than a word, odd
        // numbers of words, more samples than words.
        KernelType::MemoryBound => match width % 4 {
            0 => " -iter 6 -scratch 256 -sample 4",
            1 => " -iter 5 -scratch 64",
            2 => " -iter 7 -scratch 1000 -sample 3",
            _ => " -iter 9 -scratch 8 -sample 5",
        },
        KernelType::LoadImbalance => " -iter 16 -imbalance 1.5",
        _ => " -iter 16",
    };
    Some(f)
}

fn run_everywhere(flags: &str, workers: usize) {
    run_everywhere_with(flags, workers, None)
}

/// [`run_everywhere`] with `compiled`'s chunks of `chunk_tasks` tasks.
fn run_everywhere_with(flags: &str, workers: usize, chunk_tasks: Option<i64>) {
    let args: Vec<&str> = flags.split_whitespace().collect();
    let (app, _) = App::parse(&args, &[]).unwrap_or_else(|e| panic!("{flags}: {e}"));
    for sys in all() {
        let cfg = RunConfig {
            workers,
            pin: false,
            chunk_tasks,
            ..RunConfig::default()
        };
        if let Err(f) = run_checked(sys.as_ref(), &app, &cfg) {
            panic!(
                "{} with {workers} workers failed on {flags}: {}",
                sys.name(),
                f.message
            );
        }
    }
}

#[test]
fn every_type_at_every_width_with_rotating_kernels_outputs_and_graph_counts() {
    let (types, kernels) = (types(), kernels());
    let mut runs = 0;
    for (ti, &ty) in types.iter().enumerate() {
        for width in 1..=16i64 {
            let case = ti * 16 + width as usize;
            let output = if case % 2 == 0 { 16 } else { 1024 };
            let graphs = 1 + case % 4;
            // Graph k of the combination uses the k-th next type, so mixes vary.
            let flags: Vec<String> = (0..graphs)
                .filter_map(|k| {
                    let kty = if k == 0 {
                        ty
                    } else {
                        types[(ti + k) % types.len()]
                    };
                    graph_flags(kty, width, kernels[(case + k) % kernels.len()], output)
                })
                .collect();
            if flags.is_empty() {
                continue;
            }
            run_everywhere(&flags.join(" -and "), 1 + case % 4);
            runs += 1;
        }
    }
    assert!(runs >= 150, "{runs}");
}

#[test]
fn every_kernel_on_every_type() {
    for ty in types() {
        for kernel in kernels() {
            for output in [16, 1024] {
                let flags = graph_flags(ty, 7, kernel, output).unwrap();
                run_everywhere(&flags, 2);
            }
        }
    }
}

#[test]
fn four_graphs_of_mixed_shapes_run_together() {
    let flags = [
        "-steps 23 -width 16 -type dom -kernel busy_wait -iter 10",
        "-steps 5 -width 9 -type tree -output 1024",
        "-steps 23 -width 12 -type random_nearest -radix 5 -fraction 0.6",
        "-steps 17 -width 16 -type all_to_all -kernel compute_bound -iter 4",
    ]
    .join(" -and ");
    for workers in 1..=4 {
        run_everywhere(&flags, workers);
    }
}

/// Long enough for `compiled` to chain several instances of the same body plus a shorter
/// epilogue chunk (its chunks made small: 32 timesteps after the first, the least), with
/// every type and two graphs of different lengths side by side.
#[test]
fn long_graphs_chain_many_instances() {
    for ty in types() {
        let a = graph_flags(ty, 5, KernelType::ComputeBound, 16)
            .unwrap()
            .replace("-steps 23", "-steps 101");
        let b = graph_flags(DependenceType::Stencil1D, 3, KernelType::Empty, 16)
            .unwrap()
            .replace("-steps 23", "-steps 70");
        for workers in [1, 2] {
            run_everywhere_with(&format!("{a} -and {b}"), workers, Some(1));
        }
    }
}

/// memory_bound over scratch and sample sizes the reference accepts, including samples that
/// are not a whole number of words: every system keeps every word of the scratch intact
/// (validation checks all of it at the end of each point's run).
#[test]
fn memory_bound_is_exact_for_odd_scratch_and_sample_sizes() {
    for (scratch, sample) in [
        (8, 1),
        (8, 16),
        (24, 2),
        (64, 16),
        (120, 7),
        (248, 16),
        (1000, 16),
        (4104, 13),
    ] {
        for iter in [1, 4, 17] {
            let flags = format!(
                "-steps 9 -width 3 -type stencil_1d -kernel memory_bound -scratch {scratch} -sample {sample} -iter {iter}"
            );
            run_everywhere(&flags, 2);
        }
    }
}

/// The implicit systems' three ways to a point's inputs, each validated on every system: a
/// few kinds of timestep kept whole; too many kinds, but every graph's shapes kept (random
/// graphs of periods 60 and 61 meet in over 256 kinds); and a graph of too many shapes to
/// keep (a wide `dom`), whose lists are built per point.
#[test]
fn implicit_systems_keep_or_build_input_lists_by_how_many_shapes_the_graphs_have() {
    for flags in [
        "-steps 40 -type dom -width 12 -and -steps 40 -type stencil_1d -width 5",
        "-steps 300 -type random_nearest -width 6 -radix 3 -period 60 -and -steps 300 -type random_nearest -width 5 -radix 3 -period 61",
        "-steps 300 -type dom -width 200 -and -steps 300 -type stencil_1d -width 4",
    ] {
        run_everywhere(flags, 2);
    }
}
