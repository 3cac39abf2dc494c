//! The `taskbench` binary: reference display, clean errors with non-zero exit, help and the
//! system list.

use std::process::Command;

fn taskbench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_taskbench"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn prints_the_display_then_the_report() {
    let (code, out, err) = taskbench(&[
        "-steps", "6", "-width", "8", "-type", "fft", "-vv", "-system", "serial",
    ]);
    assert_eq!(code, 0, "{err}");
    let vector = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../taskbench-core/tests/vectors/fft_w8_s6.txt"
    ))
    .unwrap();
    let expected: String = vector
        .lines()
        .skip_while(|l| !l.starts_with("Running"))
        .take_while(|l| !l.starts_with("# exit"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(out.starts_with(&expected), "display differs");
    let report = &out[expected.len()..];
    assert!(
        report.starts_with("Total Tasks 48\nTotal Dependencies "),
        "{report}"
    );
    for line in ["Elapsed Time ", "FLOP/s ", "B/s ", "Transfer (estimated):"] {
        assert!(report.contains(line), "{line}");
    }
}

/// `-barrier` turns `futures` into `futures-barrier`, which runs the graph whole.
#[test]
fn the_barrier_flag_selects_futures_barrier() {
    for system in ["futures", "futures-barrier"] {
        let args = [
            "-steps",
            "5",
            "-width",
            "3",
            "-type",
            "stencil_1d",
            "-system",
            system,
            "-barrier",
        ];
        let (code, out, err) = taskbench(&args);
        assert_eq!(code, 0, "{system}: {err}");
        assert!(out.contains("Total Tasks 15\n"), "{system}: {out}");
    }
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["-steps", "0"],
            "error: Invalid flag \"-steps 0\" must be > 0\n",
        ),
        (&["-type", "random_spread"], "random_spread"),
        (
            &["-type", "stencil_1d_periodic", "-width", "2"],
            "stencil_1d_periodic",
        ),
        (&["-frobnicate"], "Unknown flag \"-frobnicate\""),
        (&["-system", "nope"], "Invalid flag \"-system nope\""),
        (&["-worker", "0"], "Invalid flag \"-worker 0\""),
        (&["-width"], "Flag \"-width\" requires an argument"),
    ];
    for (args, msg) in cases {
        let (code, out, err) = taskbench(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty(), "{args:?} printed {out}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn help_and_list() {
    let (code, out, _) = taskbench(&["-h"]);
    assert_eq!(code, 0);
    assert!(out.contains("-steps") && out.contains("-system"));
    let (code, out, _) = taskbench(&["--list"]);
    assert_eq!(code, 0);
    assert!(out.contains("serial") && out.contains("bsp"));
}

#[test]
fn nodes_estimate_in_the_report() {
    let (code, out, _) = taskbench(&[
        "-steps",
        "100",
        "-width",
        "32",
        "-type",
        "stencil_1d",
        "-nodes",
        "4",
        "-worker",
        "2",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains(
        "  Local Dependencies 8712 (estimated)\n  Nonlocal Dependencies 594 (estimated)\n"
    ));
    assert!(out.contains("  Local Bytes 139392\n  Nonlocal Bytes 9504\n"));
}

/// Every class of bad input: one line naming the flag or what does not fit, exit code 2,
/// nothing on stdout, no panic, and quickly (none of these may start a run).
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let max = "9223372036854775807";
    let cases: &[(&[&str], &str)] = &[
        (&["-steps", "0"], "-steps 0"),
        (&["-steps", "nan"], "-steps nan"),
        (&["-steps", max], "would need about"),
        (&["-steps", max, "-width", "1"], "would need about"),
        (&["-width", max], "would need about"),
        (&["-width", "-1"], "-width -1"),
        (
            &["-width", "100000", "-type", "all_to_all"],
            "would need about",
        ),
        (&["-output", max], "would need about"),
        (
            &["-output", "4611686018427387904", "-system", "tasks"],
            "would need about",
        ),
        (
            &["-output", "4611686018427387904", "-system", "futures"],
            "would need about",
        ),
        (&["-output", "-16"], "-output -16"),
        (&["-output", "15"], "-output 15"),
        (&["-scratch", "12"], "-scratch 12"),
        (
            &["-scratch", "9223372036854775800", "-kernel", "memory_bound"],
            "would need about",
        ),
        (&["-kernel", "memory_bound"], "-scratch 0"),
        (
            &["-kernel", "memory_bound", "-scratch", "64", "-sample", "0"],
            "-sample 0",
        ),
        (&["-kernel", "compute_bound", "-iter", max], "FLOPs exceed"),
        (&["-kernel", "nope"], "-kernel nope"),
        (
            &["-type", "spread", "-radix", max, "-period", "1"],
            "-radix 9223372036854775807",
        ),
        (
            &[
                "-type", "spread", "-width", "5", "-radix", "6", "-period", "1",
            ],
            "-radix 6",
        ),
        (&["-type", "nearest", "-radix", "-1"], "-radix -1"),
        (&["-fraction", "nan"], "-fraction nan"),
        (&["-fraction", "inf"], "-fraction inf"),
        (&["-imbalance", "3"], "-imbalance"),
        (&["-nodes", "-2"], "-nodes -2"),
        (&["-worker", "0"], "-worker 0"),
        (&["-worker", max], "-worker 9223372036854775807"),
        (&["-worker", "100000"], "-worker 100000"),
        (&["-worker", "4096", "-system", "tasks"], "would need about"),
        (&["-worker", "-1"], "-worker -1"),
        (&["-system", "nope"], "-system nope"),
        (&["-system", "compiled", "-barrier"], "-barrier"),
        (&["-barrier"], "-barrier"),
        (&["-steps"], "requires an argument"),
        (&["--bogus"], "--bogus"),
    ];
    for (args, msg) in cases {
        let start = std::time::Instant::now();
        let (code, out, err) = taskbench(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            start.elapsed().as_secs() < 20,
            "{args:?} took {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn version_and_a_closed_pipe() {
    let (code, out, _) = taskbench(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("taskbench ") && out.contains('('), "{out}");
    // A reader that goes away after the first line: no error, no panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskbench"))
        .args(["-steps", "200", "-width", "8", "-vv", "-system", "serial"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `taskbench ARGS` under `sh -c` with `setup` first (a `ulimit`, a redirection).
fn in_shell(setup: &str, args: &str) -> (Option<i32>, String, String) {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" {args}"))
        .arg(env!("CARGO_BIN_EXE_taskbench"))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_address_space_limit_is_checked_before_allocating() {
    // 2 GiB of address space: a run that needs more is refused by that limit, named; a small
    // one still runs under it.
    let limit = "ulimit -v 2097152";
    for system in ["bsp", "compiled", "tasks", "serial"] {
        let (code, out, err) = in_shell(
            limit,
            &format!("-width 100000000 -steps 2 -system {system}"),
        );
        assert_eq!(code, Some(2), "{system}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("would need about") && err.contains("RLIMIT_AS"),
            "{system}: {err}"
        );
        let (code, _, err) = in_shell(limit, &format!("-steps 20 -width 4 -system {system}"));
        assert_eq!(code, Some(0), "{system}: {err}");
    }
}

#[test]
fn a_full_disk_is_one_line_and_exit_status_1() {
    for args in [
        "-steps 4",
        "--version",
        "--list",
        "-h",
        "metg analyze /dev/null --cores 2",
    ] {
        let (code, _, err) = in_shell("exec > /dev/full", args);
        assert_eq!(code, Some(1), "{args}: {err}");
        assert_eq!(err.lines().count(), 1, "{args}: {err}");
        assert!(
            err.starts_with("error: writing output: ") && err.contains("No space left"),
            "{args}: {err}"
        );
    }
}

#[test]
fn metg_names_missing_options_and_bounds_its_counts() {
    for (args, says) in [
        (&["metg", "analyze", "/dev/null"][..], "--cores"),
        (&["metg", "analyze", "--cores", "2"], "<FILES>"),
        (
            &[
                "metg",
                "--runs",
                "18446744073709551615",
                "-kernel",
                "compute_bound",
            ],
            "--runs",
        ),
        (
            &["metg", "--reps", "100000", "-kernel", "compute_bound"],
            "--reps",
        ),
        (
            &[
                "metg",
                "analyze",
                "/dev/null",
                "--cores",
                "2",
                "--graphs",
                "99999999",
            ],
            "--graphs",
        ),
    ] {
        let (code, out, err) = taskbench(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
}

#[test]
fn sigterm_and_sighup_end_a_run_with_one_line() {
    for (signal, code) in [("TERM", 143), ("HUP", 129), ("INT", 130)] {
        let child = Command::new(env!("CARGO_BIN_EXE_taskbench"))
            .args(["-steps", "100000000", "-width", "2", "-worker", "2"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(code), "SIG{signal}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!("taskbench: stopped by SIG{signal}\n")
        );
    }
}

/// Every reference vector's display, byte for byte, and a report, from every system in one
/// process (the vectors' flags are on their first line).
#[test]
fn every_system_prints_every_vectors_reference_display() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../taskbench-core/tests/vectors"
    );
    let (_, list, _) = taskbench(&["--list"]);
    let systems: Vec<&str> = list
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(systems.len() >= 11, "{list}");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(flags) = text.lines().next().and_then(|l| l.split_once("for: ")) else {
            continue;
        };
        let expected: String = text
            .lines()
            .skip_while(|l| !l.starts_with("Running"))
            .take_while(|l| !l.starts_with("# exit"))
            .map(|l| format!("{l}\n"))
            .collect();
        if expected.is_empty() {
            continue;
        }
        for system in &systems {
            let mut args: Vec<&str> = flags.1.split_whitespace().collect();
            args.extend(["-system", system, "-worker", "2"]);
            let (code, out, err) = taskbench(&args);
            assert_eq!(code, 0, "{system} {}: {err}", path.display());
            assert!(
                out.starts_with(&expected),
                "{system} {}: display differs",
                path.display()
            );
            assert!(
                out[expected.len()..].starts_with("Total Tasks "),
                "{system} {}",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} vectors");
}
