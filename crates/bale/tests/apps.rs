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
        ("histogram -T 4000000000 --pes 4", "does not fit"),
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
    ] {
        let (ok, _, err) = bale(args);
        assert!(!ok, "{args} was accepted");
        assert!(err.contains(says), "{args}: {err}");
        assert!(!err.contains("panicked"), "{args}: {err}");
    }
}
