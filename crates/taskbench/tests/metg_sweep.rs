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

/// An executable shell script `name` with `body` in a fresh directory; returns its path.
fn script(name: &str, body: &str) -> PathBuf {
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.sh"));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
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
        // What the noise was, per size, and the interval it allows.
        assert!(
            s["noisy"].is_boolean() && s["metg_within_noise_us"].is_array(),
            "{s}"
        );
        let sizes = s["per_run"][0]["sizes"].as_array().unwrap();
        assert!(!sizes.is_empty());
        for z in sizes {
            assert!(
                z["spread"].as_f64().unwrap() >= 0.0 && z["noisy"].is_boolean(),
                "{z}"
            );
        }
        assert!(!s["per_run"][0]["calibration_flops"]
            .as_array()
            .unwrap()
            .is_empty());
    }
    assert!(summary["noisy"].is_boolean() && summary["loaded"].is_boolean());
    assert!(summary["calibration_drift"].as_f64().unwrap() >= 0.0);
    assert!(
        summary["step_probe_ns"].as_f64().unwrap() > 0.0,
        "{summary}"
    );
    assert!(stdout.contains("Machine: other programs used"), "{stdout}");
    assert!(stdout.contains("Lower METG is better"), "{stdout}");
    assert!(out.join("metg.svg").exists() || stderr.contains("no TrueType font"));
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
        "--reps",
        "1",
        "--max-iter",
        "64",
        "--min-iter",
        "16",
    ];
    args.extend(GRAPH);
    let (code, stdout, stderr) = metg(&args);
    // The others' results are shown, and the exit status says that some contender failed.
    assert_eq!(code, 1, "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: fails, silent, other failed"),
        "{stderr}"
    );
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
    // bsp was measured at every size regardless.
    let bsp = stdout.lines().find(|l| l.starts_with("bsp")).unwrap();
    assert!(!bsp.contains("failed"), "{stdout}");
    assert!(stdout.contains("fails: stopped by an error"));
}

#[test]
fn bad_sweep_options_are_one_line_errors_with_exit_code_2() {
    let k = ["-kernel", "compute_bound"];
    let cases: &[(&[&str], &str)] = &[
        (&["--system", "nope"], "--system nope"),
        (&["-kernel", "empty"], "METG needs a kernel"),
        (&["-iter", "5"], "-iter is set by the sweep"),
        (&["--reps", "0"], "'0' for '--reps"),
        (&["--runs", "-3"], "'-3' for '--runs"),
        (&["--timeout", "nan"], "'nan' for '--timeout"),
        (&["--timeout", "inf"], "'inf' for '--timeout"),
        (&["--timeout", "1e30"], "'1e30' for '--timeout"),
        (&["--timeout", "-1"], "'-1' for '--timeout"),
        (&["--peak", "0"], "'0' for '--peak"),
        (&["--peak", "nan"], "'nan' for '--peak"),
        (&["--peak", "-inf"], "'-inf' for '--peak"),
        (&["--threshold", "nan"], "'nan' for '--threshold"),
        (&["--threshold", "7"], "'7' for '--threshold"),
        (&["--cores", "0"], "'0' for '--cores"),
        (&["--worker", "99999999999"], "'99999999999' for '--worker"),
        (&["--max-iter", "0"], "'0' for '--max-iter"),
        (
            &["--min-iter", "9", "--max-iter", "4"],
            "--min-iter 9 --max-iter 4",
        ),
        (&["--noise", "2"], "'2' for '--noise"),
        (&["--stat", "mode"], "'mode' for '--stat"),
        (&["--frobnicate"], "'--frobnicate'"),
        (
            &["--external", "a=true", "--external", "a=false"],
            "two contenders are named \"a\"",
        ),
        (&["--external", "'unbalanced"], "--external"),
        // A program that cannot start is a typo found before any run.
        (
            &["--external", "missing=/nonexistent/program"],
            "no program \"/nonexistent/program\"",
        ),
        (&["--external", "a=b=c"], "no program \"b=c\""),
        (&["--external", "x=nosuchprogram-here -n 2"], "no program"),
        (&["--out", "/proc/version"], "--out /proc/version"),
        (&["-steps", "-5"], "-steps -5"),
        (&["-width", "9223372036854775807"], "would need about"),
        (&["analyze", "x.log", "--cores", "0"], "'0' for '--cores"),
        (
            &["analyze", "x.log", "--cores", "nan"],
            "'nan' for '--cores",
        ),
        (
            &["analyze", "x.log", "--cores", "2", "--threshold", "nan"],
            "'nan' for '--threshold",
        ),
        (
            &["analyze", "x.log", "--cores", "2", "--peak", "0"],
            "'0' for '--peak",
        ),
        (
            &["analyze", "x.log", "--cores", "2", "--graphs", "0"],
            "'0' for '--graphs",
        ),
        (&["analyze", "--cores", "2"], "required"),
    ];
    for (args, msg) in cases {
        // The case's own flags come last, so they win over the default kernel.
        let mut all: Vec<&str> = Vec::new();
        if args.first() != Some(&"analyze") {
            all.extend(k);
        }
        all.extend(args.iter());
        let (code, stdout, stderr) = metg(&all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
    let (code, _, stderr) = metg(&["analyze", "/nonexistent.log", "--cores", "2"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("could not be read"), "{stderr}");
    for help in [
        &["-h"][..],
        &["--help"],
        &["analyze", "--help"],
        &["--version"],
    ] {
        let (code, stdout, _) = metg(help);
        assert_eq!(code, 0, "{help:?}");
        assert!(
            stdout.contains("taskbench metg") || stdout.contains("Usage"),
            "{stdout}"
        );
    }
}

#[test]
fn a_timeout_kills_the_whole_process_group_of_a_launcher() {
    // A script that runs its child without exec, as mpirun does: killing only the script
    // would leave the child holding the output pipe for 300 s.
    let marker = format!("taskbench-orphan-{}", std::process::id());
    let launcher = script(
        "launcher",
        &format!("sh -c 'sleep 300; echo {marker}'\necho done"),
    );
    let ext = format!("slow={}", launcher.display());
    let start = std::time::Instant::now();
    let (code, _, stderr) = metg(&[
        "--external",
        &ext,
        "--timeout",
        "1",
        "--reps",
        "1",
        "--max-iter",
        "4",
        "--min-iter",
        "4",
        "-steps",
        "4",
        "-kernel",
        "compute_bound",
    ]);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "waited for the orphan"
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("timed out after 1 s"), "{stderr}");
    let left = Command::new("pgrep")
        .args(["-f", "sleep 300"])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&left.stdout);
    for pid in pids.split_whitespace() {
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !cmdline.contains(&marker),
            "orphan {pid} survived: {cmdline}"
        );
    }
}

#[test]
fn implausible_reports_are_rejected_with_the_reason() {
    // An external whose report claims 1e-300 s: refused, never the peak.
    let fake = script(
        "fake",
        &format!("{EXE} \"$@\" -system serial | sed 's/^Elapsed Time .*/Elapsed Time 1.000000e-300 seconds/'"),
    );
    let ext = format!("fake={}", fake.display());
    let mut args = vec![
        "--system",
        "bsp",
        "--external",
        &ext,
        "--reps",
        "1",
        "--max-iter",
        "64",
        "--min-iter",
        "32",
    ];
    args.extend(GRAPH);
    let (code, stdout, stderr) = metg(&args);
    // A contender that failed makes the exit status 1, after the results are shown.
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("implausible elapsed time"), "{stderr}");
    assert!(
        stdout.contains("(measured: best mean rate of bsp"),
        "{stdout}"
    );
}

#[test]
fn several_runs_give_a_median_with_its_range_and_a_log_per_run() {
    let out = tmp("runs");
    let dir = out.to_str().unwrap();
    let mut args = vec![
        "--system",
        "bsp",
        "--runs",
        "2",
        "--reps",
        "2",
        "--max-iter",
        "64",
        "--min-iter",
        "16",
        "--out",
        dir,
    ];
    args.extend(GRAPH);
    let (code, stdout, stderr) = metg(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("range over 2 runs"), "{stdout}");
    for r in [1, 2] {
        let log = std::fs::read_to_string(out.join(format!("bsp.run{r}.log"))).unwrap();
        assert!(log.matches("Elapsed Time").count() >= 2);
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["runs"], 2);
    assert_eq!(
        summary["systems"][0]["per_run"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        summary["systems"][0]["metg_runs_us"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sigterm_and_sighup_end_a_sweep_with_its_results_written_and_no_orphan() {
    for (signal, code) in [(libc_sig::TERM, 143), (libc_sig::HUP, 129)] {
        let out = tmp(&format!("stopped-{signal}"));
        let pidfile = out.with_extension("pid");
        let _ = std::fs::remove_file(&pidfile);
        // An external that runs once, then hangs (as a stuck mpirun would), in a group of
        // its own under metg: the first size has results from both.
        let ran = out.with_extension("ran");
        let _ = std::fs::remove_file(&ran);
        let slow = script(
            &format!("hang-{signal}"),
            &format!(
                "if [ -e {ran} ]; then echo $$ > {pid}; sleep 300; echo done; else touch {ran}; exec {EXE} \"$@\" -system serial; fi",
                ran = ran.display(),
                pid = pidfile.display()
            ),
        );
        let ext = format!("slow={}", slow.display());
        let mut args = vec![
            "metg",
            "--system",
            "bsp",
            "--external",
            &ext,
            "--reps",
            "1",
            "--max-iter",
            "64",
            "--min-iter",
            "16",
        ];
        let dir = out.display().to_string();
        args.extend(["--out", &dir]);
        args.extend(GRAPH);
        let child = Command::new(EXE)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The hanging contender runs after bsp at the first size: bsp has results then.
        let start = std::time::Instant::now();
        while !pidfile.exists() {
            assert!(
                start.elapsed().as_secs() < 60,
                "the slow contender never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let script_pid = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .to_string();
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(code), "{stderr}");
        assert!(
            stderr.contains("finishing with what was measured"),
            "{stderr}"
        );
        for f in ["bsp.log", "points.csv", "summary.json"] {
            assert!(
                out.join(f).exists(),
                "{f} missing after SIG{signal}: {stderr}"
            );
        }
        let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
        assert!(summary.contains("\"interrupted\": true"), "{summary}");
        // The contender's whole group is gone (the script and its sleep).
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            !std::path::Path::new(&format!("/proc/{script_pid}")).exists(),
            "the contender {script_pid} outlived metg"
        );
    }
}

/// Signal names as `kill` takes them.
mod libc_sig {
    pub const TERM: &str = "TERM";
    pub const HUP: &str = "HUP";
}

#[test]
fn a_launcher_that_does_not_start_the_ranks_asked_for_is_refused_once() {
    let mut args = vec![
        "--system",
        "bsp",
        "--ranks",
        "2",
        "--launcher",
        "",
        "--reps",
        "1",
    ];
    args.extend(GRAPH);
    let (code, stdout, stderr) = metg(&args);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--launcher") && stderr.contains("must start 2 ranks"),
        "{stderr}"
    );
}
