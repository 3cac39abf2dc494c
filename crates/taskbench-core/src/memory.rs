//! Memory a run would need, estimated before anything is allocated, and what the machine has.
//! Every size is computed in `u128` with saturating arithmetic, so an absurd flag gives an
//! absurd estimate and a clear refusal instead of a wrapped size or an allocation abort.

use crate::graph::TaskGraph;

/// Bytes this process can still allocate without swapping: `MemAvailable` of
/// `/proc/meminfo`, lowered to the cgroup's remaining allowance where one is set. `None` where
/// neither can be read (then no run is refused for memory).
///
/// ```
/// if let Some(bytes) = taskbench_core::memory::available() {
///     assert!(bytes > 0);
/// }
/// ```
pub fn available() -> Option<u64> {
    // Miri isolates the program from the file system.
    if cfg!(miri) {
        return None;
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let host = meminfo.as_deref().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    });
    let read = |f: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{f}")).ok();
    let cgroup = match (read("memory.max"), read("memory.current")) {
        (Some(max), Some(cur)) => match (max.trim().parse::<u64>(), cur.trim().parse::<u64>()) {
            (Ok(max), Ok(cur)) => Some(max.saturating_sub(cur)),
            _ => None, // "max": no limit
        },
        _ => None,
    };
    match (host, cgroup) {
        (Some(h), Some(c)) => Some(h.min(c)),
        (h, c) => h.or(c),
    }
}

/// `bytes` for people: `1.5 GiB`.
///
/// ```
/// assert_eq!(taskbench_core::memory::human(1536 * 1024 * 1024), "1.5 GiB");
/// assert_eq!(taskbench_core::memory::human(100), "100 B");
/// ```
pub fn human(bytes: u128) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else if v >= 1024.0 {
        format!("{v:.3e} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `a × b` for sizes, saturating (a size near `u128::MAX` is refused anyway).
pub fn mul(a: impl TryInto<u128>, b: impl TryInto<u128>) -> u128 {
    let (a, b) = (a.try_into().unwrap_or(0), b.try_into().unwrap_or(0));
    a.saturating_mul(b)
}

impl TaskGraph {
    /// An upper bound on the bytes that checking and planning this graph take: the shape of
    /// every timestep (4 bytes each), and per distinct shape the dependency lists both ways
    /// (8 bytes an entry) and their index arrays; plus the graph check's per-point lists.
    pub fn plan_bytes(&self) -> u128 {
        let w = self.max_width.max(0);
        let (deps, rdeps) = (self.max_deps_per_point(), self.max_rdeps_per_point());
        let mut total = mul(self.timesteps.max(0), 4u32);
        for c in self.timestep_classes() {
            let (now, before) = (
                self.width_at_timestep(c.first).max(0),
                self.width_at_timestep(c.first - 1).max(0),
            );
            total = total
                .saturating_add(mul(now.saturating_add(before).saturating_add(2), 4u32))
                .saturating_add(mul(mul(now, deps), 8u32))
                .saturating_add(mul(mul(before, rdeps), 8u32));
        }
        // The check: a stamp per point and each point's kept dependencies (a Vec each).
        total
            .saturating_add(mul(w, 8u32 + 24))
            .saturating_add(mul(mul(w, deps), 8u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DependenceType;

    #[test]
    fn absurd_graphs_have_absurd_estimates_without_overflow() {
        let g = TaskGraph {
            timesteps: i64::MAX,
            max_width: i64::MAX,
            dependence: DependenceType::AllToAll,
            ..TaskGraph::default()
        };
        assert!(g.plan_bytes() > u64::MAX as u128);
        let small = TaskGraph::default();
        assert!(small.plan_bytes() < 4096);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(2048), "2.0 KiB");
        assert!(human(u128::MAX).ends_with("EiB"));
    }
}
