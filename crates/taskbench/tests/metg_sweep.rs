//! `taskbench metg` end to end, on tiny graphs: our systems and external commands in one
//! sweep, the files it writes, and externals that fail, print no report or report another graph.

use std::path::PathBuf;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_taskbench");

fn metg(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(EXE).arg("metg").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("taskbench-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const GRAPH: [&str; 8] = [
    "-steps",
    "20",
    "-width",
    "2",
    "-type",
    "stencil_1d",
    "-kernel",
    "compute_bound",
];

#[test]
fn sweeps_our_systems_and_an_external_copy_of_taskbench() {
    let out = tmp("sweep");
    let external = format!("self={EXE} -system bsp -worker 2 -no-pin");
    let mut args = vec![
        "--system",
        "serial,bsp",
        "--external",
        &external,
        "--reps",
        "2",
        "--max-iter",
        "256",
        "--min-iter",
        "32",
    ];
    let dir = out.to_str().unwrap();
    args.extend(["--out", dir]);
    args.extend(GRAPH);
    let (code, stdout, stderr) = metg(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Peak: ") && stdout.contains("METG(50%)"),
        "{stdout}"
    );
    for name in ["serial", "bsp", "self"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(name)),
            "{name} missing from table:\n{stdout}"
        );
        let log = std::fs::read_to_string(out.join(format!("{name}.log"))).unwrap();
        // Raw logs are the reference format: one report per run.
        assert_eq!(
            log.matches("Running Task Benchmark").count(),
            log.matches("Elapsed Time").count()
        );
        assert!(log.matches("Elapsed Time").count() >= 2);
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(summary["peak"]["value"].as_f64().unwrap() > 0.0);
    assert_eq!(summary["graph_flags"], GRAPH.join(" "));
    for key in ["cpu", "cores", "os", "compiler", "git_revision"] {
        assert!(!summary["machine"][key].is_null(), "{key}");
    }
    let systems = summary["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 3);
    for s in systems {
        assert!(s.get("metg_us").is_some() && s["name"].is_string());
        assert!(s["error"].is_null(), "{s}");
    }
    let csv = std::fs::read_to_string(out.join("points.csv")).unwrap();
    assert!(csv.starts_with("system,iterations,reps,"));
    assert!(csv.lines().count() > 3);
    // The saved logs re-analyse to the same METG.
    let bsp = &systems[1];
    if let Some(m) = bsp["metg_us"].as_f64() {
        let peak = summary["peak"]["value"].as_f64().unwrap().to_string();
        let log = out.join("bsp.log");
        let a = Command::new(EXE)
            .args([
                "metg",
                "analyze",
                log.to_str().unwrap(),
                "--cores",
                &summary["cores"].to_string(),
                "--peak",
                &peak,
                "--json",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
        assert!((v[0]["metg_us"].as_f64().unwrap() - m).abs() < 1e-6 * m);
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn broken_externals_are_reported_and_the_others_go_on() {
    let other_graph =
        format!("other=sh -c '{EXE} -steps 7 -width 2 -kernel compute_bound -iter 4' --");
    let mut args = vec![
        "--system",
        "bsp",
        "--external",
        "fails=false",
        "--external",
        "silent=echo hello",
        "--external",
        &other_graph,
        "--external",
        "missing=/nonexistent/program",
        "--reps",
        "1",
        "--max-iter",
        "64",
        "--min-iter",
        "16",
    ];
    args.extend(GRAPH);
    let (code, stdout, stderr) = metg(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("fails: stopped: `false -steps 20")
            && stderr.contains("failed (exit status: 1)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("silent: stopped: `echo hello")
            && stderr.contains("printed no usable Task Bench report"),
        "{stderr}"
    );
    assert!(stderr.contains("hello"), "the command's output is shown");
    assert!(
        stderr.contains("other: stopped:") && stderr.contains("reported another graph"),
        "{stderr}"
    );
    assert!(
        stderr.contains("missing: stopped:") && stderr.contains("could not start"),
        "{stderr}"
    );
    // bsp was measured at every size regardless.
    let bsp = stdout.lines().find(|l| l.starts_with("bsp")).unwrap();
    assert!(!bsp.contains("failed"), "{stdout}");
    assert!(stdout.contains("fails: stopped by an error"));
}

#[test]
fn bad_sweep_options_are_clear_errors() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--system", "nope", "-kernel", "compute_bound"],
            "--system nope",
        ),
        (&["-kernel", "empty"], "METG needs a kernel"),
        (
            &["-kernel", "compute_bound", "-iter", "5"],
            "-iter is set by the sweep",
        ),
        (&["--reps", "0", "-kernel", "compute_bound"], "--reps 0"),
    ];
    for (args, msg) in cases {
        let (code, _, stderr) = metg(args);
        assert_ne!(code, 0, "{args:?}");
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"));
    }
    let (code, _, stderr) = metg(&["analyze", "/nonexistent.log", "--cores", "2"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("could not be read"), "{stderr}");
}
