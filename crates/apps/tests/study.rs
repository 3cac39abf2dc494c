//! The study command end to end on a tiny size: every Tactor placement run, the table, CSV and
//! JSON written, the traced speed-up of each placement reported; a peer that is not there is
//! one line.

use std::process::Command;

fn study(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_apps-study"))
        .args(args)
        .output()
        .unwrap()
}

#[cfg(feature = "mpi")]
#[test]
fn a_tiny_study_reports_every_placement_and_what_tracing_bought() {
    let dir = std::env::temp_dir().join(format!("apps-study-test-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let run = study(&[
        "--apps", "cg", "--sizes", "2000", "--reps", "2", "--pieces", "3", "--out", out,
    ]);
    let text = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{text}{err}");
    // Two repetitions of six placements, each shown as it ends.
    assert_eq!(err.matches("µs/iteration").count(), 12, "{err}");
    let csv = std::fs::read_to_string(dir.join("apps-study.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
    for place in ["w1", "w2", "r2"] {
        assert!(csv.contains(&format!("tactor {place} traced,")), "{csv}");
        let line = text
            .lines()
            .find(|l| l.starts_with("cg") && l.contains(&format!(" {place} ")) && l.ends_with('x'))
            .unwrap_or_else(|| panic!("no speed-up for {place}: {text}"));
        let ratio: f64 = line
            .trim_end_matches('x')
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(ratio > 0.0, "{line}");
    }
    assert!(text.contains("3 piece(s) a worker"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("apps-study.json")).unwrap())
            .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 6);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_peer_is_one_line() {
    let run = study(&["--apps", "cg", "--petsc-ex23", "/nonexistent/ex23"]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--petsc-ex23 /nonexistent/ex23: no such program"),
        "{err}"
    );
}
