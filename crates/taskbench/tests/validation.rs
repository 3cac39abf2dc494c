//! Validation catches a system that breaks a dependency: inputs in the wrong order, with the
//! wrong content (stale or from another point), missing or extra, and corrupted scratch.

use taskbench::systems::run_task;
use taskbench_core::app::App;
use taskbench_core::plan::Plan;
use taskbench_core::validate::{TaskError, Violation};

fn plan(flags: &str) -> Plan {
    let args: Vec<&str> = flags.split_whitespace().collect();
    Plan::new(App::parse(&args, &[]).unwrap().0.graphs.remove(0))
}

#[test]
fn wrong_order_wrong_content_and_missing_inputs_fail() {
    let p = plan("-steps 4 -width 4 -type stencil_1d");
    let out = |t, q| Plan::output_of(t, q, 16);
    let mut o = vec![0u8; 16];
    let (a, b, c) = (out(1, 0), out(1, 1), out(1, 2));
    // Point 1 at timestep 2 reads 0, 1, 2 of timestep 1.
    assert!(p
        .execute_point(2, 1, &mut o, &[&a, &b, &c], &mut [])
        .is_ok());
    let swapped = p
        .execute_point(2, 1, &mut o, &[&b, &a, &c], &mut [])
        .unwrap_err();
    assert_eq!(
        swapped.violation,
        Violation::InputContent {
            input: 0,
            dep: 0,
            found: (1, 1)
        }
    );
    assert!(
        swapped.to_string().contains("graph 0, timestep 2, point 1"),
        "{swapped}"
    );
    let stale = out(0, 2);
    let e = p
        .execute_point(2, 1, &mut o, &[&a, &b, &stale], &mut [])
        .unwrap_err();
    assert_eq!(
        e.violation,
        Violation::InputContent {
            input: 2,
            dep: 2,
            found: (0, 2)
        }
    );
    let e = p
        .execute_point(2, 1, &mut o, &[&a, &b], &mut [])
        .unwrap_err();
    assert_eq!(
        e.violation,
        Violation::InputCount {
            expected: 3,
            got: 2
        }
    );
    let e = p
        .execute_point(2, 1, &mut o, &[&a, &b, &c, &c], &mut [])
        .unwrap_err();
    assert_eq!(
        e.violation,
        Violation::InputCount {
            expected: 3,
            got: 4
        }
    );
    let short = &c[..8];
    let e = p
        .execute_point(2, 1, &mut o, &[&a, &b, short], &mut [])
        .unwrap_err();
    assert!(matches!(
        e.violation,
        Violation::InputSize {
            input: 2,
            dep: 2,
            ..
        }
    ));
    // A corrupted pair deep inside a larger output is caught too.
    let big = plan("-steps 4 -width 4 -type no_comm -output 1024");
    let mut input = Plan::output_of(0, 3, 1024);
    input[1000] ^= 1;
    let mut o = vec![0u8; 1024];
    assert!(big.execute_point(1, 3, &mut o, &[&input], &mut []).is_err());
    assert!(
        big.execute_point(1, 4, &mut o, &[&input], &mut []).is_err(),
        "no such point"
    );
}

#[test]
fn corrupted_scratch_fails() {
    let p = plan("-steps 2 -width 2 -kernel memory_bound -iter 2 -scratch 64 -sample 2");
    let mut scratch = taskbench_core::kernel::new_scratch(64);
    let mut o = vec![0u8; 16];
    assert!(p.execute_point(0, 0, &mut o, &[], &mut scratch).is_ok());
    scratch[0] = 0;
    assert_eq!(
        p.execute_point(0, 1, &mut o, &[], &mut scratch)
            .unwrap_err()
            .violation,
        Violation::ScratchCorrupted
    );
}

/// A serial system with one bug: it never swaps its rows after the first timestep, so from
/// timestep 2 on tasks read outputs of the wrong timestep. The run must fail, naming the task.
#[test]
fn a_system_that_reads_stale_outputs_is_stopped() {
    let p = plan("-steps 5 -width 3 -type stencil_1d");
    let (mut prev, mut cur) = (vec![vec![0u8; 16]; 3], vec![vec![0u8; 16]; 3]);
    let run = |prev: &mut Vec<Vec<u8>>, cur: &mut Vec<Vec<u8>>| {
        for t in 0..5 {
            for q in 0..3 {
                run_task(&p, t, q, &mut cur[q as usize], &mut [], |d| {
                    &prev[d as usize]
                })?;
            }
            if t == 0 {
                std::mem::swap(prev, cur);
            }
        }
        Ok::<(), TaskError>(())
    };
    let err = run(&mut prev, &mut cur).unwrap_err();
    assert_eq!((err.timestep, err.point), (2, 0), "{err}");
}
