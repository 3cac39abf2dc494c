#!/usr/bin/env bash
# A core-to-core round trip through one atomic word (two threads, each spinning until the
# other answers), in ns: this VM switches between a fast state (about 40–150 ns) and a slow
# one (about 400–500 ns) in which every fine-grained time is 3–4× slower, so A/B rounds are
# taken only in one state (`AB_FAST_NS` in scripts/ab.sh). Prints "round trip N ns".
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/pingpong
bin=$dir/pingpong
if [ ! -x "$bin" ] || [ "$0" -nt "$bin" ]; then
  mkdir -p "$dir"
  cat > "$dir/pingpong.rs" <<'RS'
use std::sync::atomic::{AtomicU64, Ordering::{Acquire, Release}};
use std::sync::Arc;
fn main() {
    let n = 200_000u64;
    let a = Arc::new(AtomicU64::new(0));
    let b = a.clone();
    let other = std::thread::spawn(move || {
        for i in 0..n {
            while b.load(Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            b.store(2 * i + 2, Release);
        }
    });
    let start = std::time::Instant::now();
    for i in 0..n {
        a.store(2 * i + 1, Release);
        while a.load(Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
    }
    other.join().unwrap();
    println!("round trip {:.0} ns", start.elapsed().as_nanos() as f64 / n as f64);
}
RS
  rustc -O -o "$bin" "$dir/pingpong.rs"
fi
"$bin"
