//! Records the compiler version (for the machine description in METG summaries) and the git
//! revision (for `--version`).
use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(&rustc, &["--version"]).unwrap_or_else(|| "unknown rustc".into());
    println!("cargo:rustc-env=TASKBENCH_RUSTC_VERSION={version}");
    let revision = match output("git", &["rev-parse", "--short=12", "HEAD"]) {
        Some(rev) => {
            let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev}-modified")
            } else {
                rev
            }
        }
        None => "unknown revision".into(),
    };
    println!("cargo:rustc-env=TASKBENCH_GIT_REVISION={revision}");
    println!("cargo:rerun-if-changed=build.rs");
    // A commit moves HEAD or the branch it names, and rewrites the index.
    if let Some(dir) = output("git", &["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(r) = output("git", &["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
    }
}
