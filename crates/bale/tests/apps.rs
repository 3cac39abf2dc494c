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
        ("randperm -n 3000000000", "-n 3000000000"),
        ("randperm --model exstack", "selector or agp"),
    ] {
        let (ok, _, err) = bale(args);
        assert!(!ok, "{args} was accepted");
        assert!(err.contains(says), "{args}: {err}");
        assert!(!err.contains("panicked"), "{args}: {err}");
    }
}
