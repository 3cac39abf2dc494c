//! Every app on 1, 2 and 3 PEs with several seeds (each run checks its answer against a
//! serial replay and fails otherwise), and bad input said in one line.

use std::process::Command;

fn bale(args: &str) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_bale"))
        .args(args.split_whitespace())
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_app_checks_out_on_one_two_and_three_pes() {
    for pes in 1..=3 {
        for seed in [1, 7, 12345] {
            for app in [
                "histogram -n 20000 -T 37",
                "histogram -n 20000 -T 37 --model lambda",
                "histogram -n 20000 -T 37 --model agp",
                "histogram -n 20000 -T 37 --model exstack",
                "ig -n 20000 -T 53",
                "ig -n 20000 -T 53 --model agp",
                "ig -n 20000 -T 53 --model exstack",
                "histogram -n 0 -T 5",
                "ig -n 1 -T 1",
                "transpose -n 700 -z 6",
                "transpose -n 700 -z 6 --model agp",
                "transpose -n 700 -z 6 --model exstack",
                "permute -n 700 -z 6 --model exstack",
                "randperm -n 5000 --model exstack",
                "triangles -n 300 -z 9 --model exstack",
                "triangles -K 1:3x4x5 --model exstack",
                "permute -n 700 -z 6",
                "permute -n 700 -z 6 --model agp",
                "transpose -n 1 -z 0",
                "toposort -n 700 -z 6",
                "toposort -n 700 -z 6 --model agp",
                "toposort -n 700 -z 6 --model exstack",
                "toposort -n 300 -z 8 --graph geometric --model exstack",
                "toposort -n 1 -z 0 --model exstack",
                "toposort -n 1 -z 0",
                "triangles -n 300 -z 12",
                "triangles -n 300 -z 12 --graph geometric",
                "transpose -n 300 -z 8 --graph geometric --model agp",
                "permute -n 300 -z 8 --graph geometric",
                "toposort -n 300 -z 8 --graph geometric",
                "triangles -n 300 -z 12 --model agp",
                "triangles -n 1 -z 0",
                "triangles -K 1:3x4x2",
                "triangles -K 2:3x4x5 --model agp",
                "randperm -n 5000",
                "randperm -n 5000 --model agp",
                "randperm -n 1",
            ] {
                let args = format!("{app} --pes {pes} -s {seed}");
                let (ok, out, err) = bale(&args);
                assert!(ok, "{args}: {err}");
                assert!(out.contains("checked"), "{args}: {out}");
            }
        }
    }
}

#[test]
fn matrix_market_files_are_read_and_their_errors_named() {
    let dir = std::env::temp_dir().join(format!("bale-mm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.mm");
    // A symmetric real matrix with a comment: the lower triangle is listed, values ignored.
    std::fs::write(
        &good,
        "%%MatrixMarket matrix coordinate real symmetric\n% from a user\n5 5 6\n1 1 2.0\n\
         2 1 -1\n3 2 -1\n4 3 -1\n5 4 -1\n5 1 0.5\n",
    )
    .unwrap();
    for pes in 1..=3 {
        for app in ["transpose", "permute"] {
            for model in ["selector", "agp"] {
                let args = format!("{app} -f {} --pes {pes} --model {model}", good.display());
                let (ok, out, err) = bale(&args);
                assert!(ok, "{args}: {err}");
                assert!(out.contains("11 nonzeros checked"), "{args}: {out}");
            }
        }
    }
    // Not morally upper triangular (rows 1 and 5 are symmetric), and a permuted identity.
    let (ok, _, err) = bale(&format!("toposort -f {} --pes 2", good.display()));
    assert!(
        !ok && err.contains("not a permuted upper triangle"),
        "{err}"
    );
    let perm = dir.join("perm.mm");
    std::fs::write(
        &perm,
        "%%MatrixMarket matrix coordinate pattern general\n3 3 4\n1 3\n2 1\n3 2\n1 1\n",
    )
    .unwrap();
    for model in ["selector", "agp", "exstack"] {
        let (ok, out, err) = bale(&format!(
            "toposort -f {} --pes 2 --model {model}",
            perm.display()
        ));
        assert!(ok && out.contains("3 rows checked"), "{err}{out}");
    }
    // The symmetric file as a graph: edges 1-2, 2-3, 3-4, 4-5, 5-1 (a 5-cycle), no triangle.
    let (ok, out, err) = bale(&format!("triangles -f {} --pes 2", good.display()));
    assert!(ok && out.contains("5 edges checked, 0 found"), "{err}{out}");
    let bad = dir.join("bad.mm");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n3 1\n",
    )
    .unwrap();
    let (ok, _, err) = bale(&format!("transpose -f {}", bad.display()));
    assert!(
        !ok && err.contains("bad.mm: line 3: row 3 outside"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let (ok, _, err) = bale(&format!("permute -f {}", dir.join("none.mm").display()));
    assert!(!ok && err.contains("none.mm"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Inputs that are not morally upper triangular, each in a way that stops the elimination
/// differently — two rows left with the same column, a row with none, a cycle, a column in
/// no row — are named in one line by every model on any PE count, never a panic. Bale
/// writes its files without the symmetry word: read as general.
#[test]
fn toposort_names_every_kind_of_bad_input_without_a_panic() {
    let dir = std::env::temp_dir().join(format!("bale-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        // Rows 1 and 2 both pivot on column 1, whose removal then reaches row 3 twice:
        // the row's column sum, 1 + 2 + 3 less 1 twice, names a column that is not there.
        ("twice", "3 3 5\n1 1\n2 1\n3 1\n3 2\n3 3\n"),
        ("empty-row", "3 3 3\n1 1\n1 2\n3 3\n"),
        ("cycle", "3 3 6\n1 1\n1 2\n2 2\n2 3\n3 3\n3 1\n"),
        ("chain-then-twice", "4 4 6\n1 1\n2 1\n2 2\n3 2\n4 2\n4 4\n"),
    ];
    for (name, body) in cases {
        let f = dir.join(format!("{name}.mm"));
        let text = format!("%%MatrixMarket matrix coordinate pattern\n{body}");
        std::fs::write(&f, text).unwrap();
        for model in ["selector", "agp", "exstack"] {
            for pes in 1..=3 {
                let args = format!("toposort -f {} --pes {pes} --model {model}", f.display());
                let (ok, _, err) = bale(&args);
                assert!(!ok, "{args} was accepted");
                assert!(
                    err.contains("not a permuted upper triangle"),
                    "{args}: {err}"
                );
                assert_eq!(err.lines().count(), 1, "{args}: {err}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_output_is_one_object() {
    let (ok, out, err) = bale("ig -n 1000 -T 10 --pes 2 --json");
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["app"], "index-gather");
    assert_eq!(v["pes"], 2);
    assert_eq!(v["operations"], 2000);
}

#[test]
fn bad_input_is_one_line() {
    for (args, says) in [
        ("histogram -T 0", "-T 0"),
        ("ig -T 0", "-T 0"),
        ("histogram -T 99999999999999 --pes 1", "-T 99999999999999"),
        ("histogram -T 4000000000 --pes 4", "would need about"),
        ("histogram --pes 0", "--pes"),
        ("histogram -n x", "-n"),
        ("nosuchapp", "nosuchapp"),
        ("ig --model lambda", "no lambda"),
        ("randperm -n 0", "-n 0"),
        ("transpose -n 0", "-n 0"),
        ("transpose -z -1", "-z -1"),
        ("permute -n 5 -z 100 --pes 2", "-z 100"),
        ("transpose --model lambda", "only histogram has a lambda"),
        ("toposort --model lambda", "only histogram has a lambda"),
        ("triangles --model lambda", "only histogram has a lambda"),
        ("toposort -n 0", "-n 0"),
        ("toposort -n 5 -z 100 --pes 2", "-z 100"),
        ("toposort -z -2", "-z -2"),
        ("transpose --graph grid", "grid"),
        ("triangles -K 1:3y4", "-K 1:3y4"),
        ("triangles -K 7:3x4", "-K 7"),
        ("triangles -K 1:1000x1000x1000", "2^26"),
        ("randperm -n 3000000000", "-n 3000000000"),
        ("randperm --model lambda", "only histogram has a lambda"),
        // Sizes that parse but overflow or cannot fit.
        ("histogram -n 9223372036854775808 --pes 2", "overflow"),
        (
            "histogram -n 10 -T 10 --pes 4096",
            "aggregation buffers of 4096 PEs",
        ),
        ("transpose -n 1000000000 -z 0 --pes 4", "would need about"),
        ("histogram -n 18446744073709551616", "-n"),
        // Flags that have no effect together, and clap's own errors, in one line.
        ("transpose -f x.mm -n 5", "cannot be used with"),
        ("permute -f x.mm -z 5", "cannot be used with"),
        ("toposort -f x.mm --graph geometric", "cannot be used with"),
        ("triangles -K 1:3x4 -n 5", "cannot be used with"),
        ("triangles -K 1:3x4 -z 5", "cannot be used with"),
        ("triangles -K 1:3x4 -f x.mm", "cannot be used with"),
        ("histogram --bogus", "--bogus"),
        ("histogram -n", "-n"),
        ("", "needs one of: histogram"),
    ] {
        let (ok, out, err) = bale(args);
        assert!(!ok, "{args} was accepted");
        assert!(err.contains(says), "{args}: {err}");
        assert!(!err.contains("panicked"), "{args}: {err}");
        assert_eq!(err.lines().count(), 1, "{args}: {err}");
        assert!(err.starts_with("error: "), "{args}: {err}");
        assert!(out.is_empty(), "{args}: {out}");
    }
}

#[test]
fn bales_own_app_names_are_accepted() {
    for app in [
        "histo -n 100",
        "ig -n 100",
        "topo -n 50",
        "permute_matrix -n 50",
        "transpose_matrix -n 50",
        "triangles -n 50",
        "randperm -n 100",
    ] {
        let args = format!("{app} --pes 2");
        let (ok, out, err) = bale(&args);
        assert!(ok && out.contains("checked"), "{args}: {err}");
    }
}

/// Runs `bale ARGS` under `sh -c` with `setup` first (a `ulimit`, a redirection).
fn bale_in_shell(setup: &str, args: &str) -> (Option<i32>, String, String) {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" {args}"))
        .arg(env!("CARGO_BIN_EXE_bale"))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_memory_limit_a_job_runs_under_is_the_one_checked() {
    // 1 GiB of address space: a table of 1.5 GiB is refused by that limit, by name, and
    // small runs still work under it.
    let limit = "ulimit -v 1048576";
    let (code, _, err) = bale_in_shell(limit, "histogram -n 1000 -T 100000000 --pes 2");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("RLIMIT_AS"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, out, err) = bale_in_shell(limit, "histogram -n 1000 --pes 2");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("checked"), "{out}");
    // A file whose size line declares a matrix larger than the limit.
    let dir = std::env::temp_dir().join(format!("bale-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let huge = dir.join("huge.mm");
    std::fs::write(
        &huge,
        "%%MatrixMarket matrix coordinate pattern general\n4294967295 4294967295 1\n1 1\n",
    )
    .unwrap();
    for app in ["transpose", "permute", "toposort", "triangles"] {
        let (code, _, err) = bale_in_shell(limit, &format!("{app} -f {} --pes 2", huge.display()));
        assert_eq!(code, Some(1), "{app}: {err}");
        assert!(
            err.contains("huge.mm: line 2") && err.contains("RLIMIT_AS"),
            "{app}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_or_closed_stdout_is_one_line_or_quiet() {
    let (code, _, err) = bale_in_shell("exec > /dev/full", "histogram -n 10 --pes 2");
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "error: writing output: No space left on device (os error 28)"
    );
    let (code, _, err) = bale_in_shell("exec > /dev/full", "ig -n 10 --pes 2 --json");
    assert_eq!(code, Some(1), "{err}");
    // A reader that went away: quiet, and the run's own status.
    let o = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" histogram -n 100000 --pes 2 | true; echo \"$?\"")
        .arg(env!("CARGO_BIN_EXE_bale"))
        .output()
        .unwrap();
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn sigterm_ends_a_run_with_one_line() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bale"))
        .args(["histogram", "-n", "100000000000", "--pes", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed().as_secs() < 20,
            "SIGTERM did not end the run"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(143));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "bale: stopped by SIGTERM\n"
    );
}
