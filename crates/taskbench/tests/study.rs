//! `taskbench study` end to end on tiny sizes: every figure's files, the rows they hold, an
//! external program beside our systems, and bad input.

use std::path::PathBuf;
use std::process::Command;

fn study(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_taskbench"))
        .arg("study")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("taskbench-study-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Every figure at two points (figure 2 on one rank: no launcher needed), two of our systems
/// and an external one: each figure's CSV has a row per system and point, with the value
/// its metric needs, and its JSON and plots are written.
#[test]
fn every_figure_is_measured_and_written() {
    let out = tmp("all");
    let exe = env!("CARGO_BIN_EXE_taskbench");
    let external = format!("ext={exe} -system bsp -worker 1");
    let (code, stdout, stderr) = study(&[
        "--system",
        "serial,forkjoin",
        "--external",
        &external,
        "--widths",
        "1,2",
        "--ranks",
        "1",
        "--imbalance",
        "0,2",
        "--radix",
        "1,2",
        "--steps",
        "20",
        "--fixed-steps",
        "5",
        "--iter",
        "64",
        "--reps",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("study: figures written"), "{stdout}");
    assert!(
        stderr.contains("[1/9]") && stderr.contains("[9/9]"),
        "progress: {stderr}"
    );
    for (fig, points, systems) in [(1, 2, 3), (2, 1, 2), (3, 2, 3), (4, 2, 3), (5, 2, 3)] {
        let csv = std::fs::read_to_string(out.join(format!("fig{fig}.csv"))).unwrap();
        let rows: Vec<&str> = csv.lines().skip(1).collect();
        assert_eq!(rows.len(), points * systems, "figure {fig}:\n{csv}");
        for row in &rows {
            let cols: Vec<&str> = row.split(',').collect();
            let (metg, vs_first, note) = (cols[4], cols[6], cols[7..].join(","));
            if [3, 4].contains(&fig) {
                let v: f64 = vs_first
                    .parse()
                    .unwrap_or_else(|_| panic!("figure {fig}: {row}"));
                assert!(v > 0.0, "{row}");
            } else {
                // A METG, or the reason there is none (a one-worker contender on two cores
                // may never reach half the machine's peak).
                let has_metg = metg.parse::<f64>().is_ok_and(|m| m > 0.0);
                assert!(has_metg || !note.is_empty(), "figure {fig}: {row}");
            }
        }
        if ![3, 4].contains(&fig) {
            let forkjoin = rows.iter().filter(|r| r.contains(",forkjoin,"));
            assert!(forkjoin.clone().count() == points, "figure {fig}:\n{csv}");
        }
        let json = std::fs::read_to_string(out.join(format!("fig{fig}.json"))).unwrap();
        assert!(json.contains("\"rows\""), "{json}");
    }
    // Figure 2 leaves out an external without {R}; figure 1 keeps it.
    let fig1 = std::fs::read_to_string(out.join("fig1.csv")).unwrap();
    assert!(fig1.contains(",ext,"), "{fig1}");
    let fig2 = std::fs::read_to_string(out.join("fig2.csv")).unwrap();
    assert!(!fig2.contains(",ext,"), "{fig2}");
    std::fs::remove_dir_all(out).unwrap();
}

#[test]
fn bad_input_is_one_line_with_status_2() {
    for args in [
        &["--figures", "6"][..],
        &["--figures", "x"],
        &["--system", "nope"],
        &["--imbalance", "3"],
        &["--widths", "0"],
        &["--radix", "99", "--figures", "4"],
        &["--steps", "0"],
        &[
            "--external",
            "x=/no/such/program",
            "--figures",
            "1",
            "--widths",
            "1",
        ],
    ] {
        let dir = tmp("bad");
        let mut all: Vec<&str> = args.to_vec();
        let d = dir.display().to_string();
        all.extend(["--out", &d]);
        let (code, _, stderr) = study(&all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.starts_with("study:"))
            .collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(lines[0].starts_with("error: "), "{args:?}: {stderr}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
