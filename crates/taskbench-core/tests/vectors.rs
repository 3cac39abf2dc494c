//! Conformance with the reference Task Bench: every `-vv` display, raw dependency interval and
//! error case in `tests/vectors/` (copied from `shared/taskbench/vectors/`), and the SipHash
//! samples.

use std::fs;
use std::path::PathBuf;
use taskbench_core::app::App;
use taskbench_core::graph::{random_uniform, Interval};

fn vectors() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

fn flags_of(header: &str) -> Vec<String> {
    let after = header
        .split("for: ")
        .nth(1)
        .expect("header names its flags");
    let flags = after.split("   (").next().unwrap();
    flags.split_whitespace().map(String::from).collect()
}

/// Splits a vector file into (header line, body lines) sections.
fn sections(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("# Task Bench reference output")
            || line.starts_with("# raw dependency intervals")
        {
            out.push((line.to_string(), Vec::new()));
        } else if let Some(last) = out.last_mut() {
            if !line.starts_with("# reference:") && !line.is_empty() {
                last.1.push(line.to_string());
            }
        }
    }
    out
}

#[test]
fn displays_match_the_reference_byte_for_byte() {
    let mut checked = 0;
    for (name, text) in vectors() {
        for (header, body) in sections(&text) {
            if !header.starts_with("# Task Bench reference output") {
                continue;
            }
            let flags = flags_of(&header);
            let status: i32 = body
                .last()
                .unwrap()
                .trim_start_matches("# exit status: ")
                .parse()
                .unwrap();
            let result = App::parse(&flags, &[]);
            if status == 0 {
                let (app, _) = result.unwrap_or_else(|e| panic!("{name}: {flags:?} rejected: {e}"));
                let expected = body[..body.len() - 1].join("\n") + "\n";
                let got = app.display();
                if got != expected {
                    let line = got.lines().zip(expected.lines()).position(|(a, b)| a != b);
                    panic!("{name}: display differs at line {line:?}\n--- got\n{got}\n--- expected\n{expected}");
                }
            } else {
                let err = result.expect_err(&format!("{name}: {flags:?} must be rejected"));
                let msg = err.to_string();
                // Where the reference printed an error message, ours is the same line.
                if let Some(reference) = body.iter().find_map(|l| l.strip_prefix("error: ")) {
                    assert_eq!(msg, reference, "{flags:?}");
                }
                assert!(!msg.is_empty());
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} vectors found");
}

fn parse_intervals(s: &str) -> Vec<Interval> {
    s.split_whitespace()
        .map(|iv| {
            let (a, b) = iv
                .trim_matches(|c| c == '[' || c == ']')
                .split_once(',')
                .unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

#[test]
fn raw_intervals_match_the_reference() {
    let mut checked = 0;
    for (name, text) in vectors() {
        for (header, body) in sections(&text) {
            if !header.starts_with("# raw dependency intervals") {
                continue;
            }
            let (app, _) = App::parse(&flags_of(&header), &[]).unwrap();
            let g = &app.graphs[0];
            for line in &body {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.first() {
                    Some(&"graph") => {
                        let field =
                            |k: &str| words[words.iter().position(|w| *w == k).unwrap() + 1];
                        assert_eq!(field("period").parse::<i64>().unwrap(), g.period, "{name}");
                        assert_eq!(
                            field("max_dependence_sets").parse::<i64>().unwrap(),
                            g.max_dependence_sets()
                        );
                        assert_eq!(
                            field("timestep_period").parse::<i64>().unwrap(),
                            g.timestep_period()
                        );
                    }
                    Some(&"t") => {
                        let n = |i: usize| words[i].parse::<i64>().unwrap();
                        let t = n(1);
                        assert_eq!(g.offset_at_timestep(t), n(3), "{name} t={t}");
                        assert_eq!(g.width_at_timestep(t), n(5), "{name} t={t}");
                        assert_eq!(g.dependence_set_at_timestep(t), n(7), "{name} t={t}");
                    }
                    Some(&"dset") => {
                        let (dset, point) = (words[1].parse().unwrap(), words[3].parse().unwrap());
                        let (deps, rdeps) = line
                            .split_once("deps")
                            .unwrap()
                            .1
                            .split_once("| rdeps")
                            .unwrap();
                        assert_eq!(
                            g.dependencies(dset, point),
                            parse_intervals(deps),
                            "{name}: {line}"
                        );
                        assert_eq!(
                            g.reverse_dependencies(dset, point),
                            parse_intervals(rdeps),
                            "{name}: {line}"
                        );
                        checked += 1;
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(checked >= 100, "only {checked} interval lines");
}

#[test]
fn siphash_samples_match() {
    let text = fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/random_uniform_siphash_vectors.txt"),
    )
    .unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| l.starts_with("random_uniform")) {
        let (lhs, rhs) = line.split_once(" = ").unwrap();
        let seed: Vec<i64> = lhs
            .split_whitespace()
            .skip(1)
            .map(|w| w.parse().unwrap())
            .collect();
        let expected: f64 = rhs.parse().unwrap();
        assert_eq!(random_uniform(&seed), expected, "{line}");
        checked += 1;
    }
    assert!(checked >= 20);
}
