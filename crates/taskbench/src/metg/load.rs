//! CPU time that other programs take from the machine while we measure: the direct sign of a
//! shared machine. From `/proc/stat` (every core's busy time, including time the hypervisor
//! stole for other guests) minus what this process and the runs it waited for used
//! (`getrusage`). A quiet machine shows a few percent at most; one other busy process on a
//! 2-core machine shows about 50 %.

/// A start point for measuring other programs' load.
#[derive(Clone, Copy, Debug)]
pub struct LoadMeter {
    busy: u64,
    total: u64,
    ours: f64,
}

/// `(busy, total)` jiffies over all cores, from the first line of `/proc/stat`.
fn read_stat() -> Option<(u64, u64)> {
    // Miri isolates the program from the file system.
    if cfg!(miri) {
        return None;
    }
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = v[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    Some((busy, busy + idle + iowait))
}

/// CPU seconds used by this process and by the children it has waited for.
fn our_cpu() -> f64 {
    let seconds = |who| {
        // SAFETY: getrusage writes one `rusage` into the zeroed value we pass and reads
        // nothing else.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut r) } != 0 {
            return 0.0;
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        t(r.ru_utime) + t(r.ru_stime)
    };
    seconds(libc::RUSAGE_SELF) + seconds(libc::RUSAGE_CHILDREN)
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

impl LoadMeter {
    /// Starts measuring; `None` where `/proc/stat` cannot be read.
    pub fn start() -> Option<LoadMeter> {
        let (busy, total) = read_stat()?;
        Some(LoadMeter {
            busy,
            total,
            ours: our_cpu(),
        })
    }

    /// The fraction of the machine's CPU time since `start` (all cores together) that
    /// other programs used, in `[0, 1]`; `None` over too short a time to tell (under 5 ticks
    /// of every core).
    pub fn foreign(&self) -> Option<f64> {
        let (busy, total) = read_stat()?;
        let hz = ticks_per_second();
        let (busy, total) = (
            (busy - self.busy) as f64 / hz,
            (total - self.total) as f64 / hz,
        );
        let cores = crate::systems::default_workers() as f64;
        if total < 5.0 * cores / hz {
            return None;
        }
        Some(foreign_fraction(busy, total, our_cpu() - self.ours))
    }
}

/// Other programs' share of `total` CPU seconds, of which `busy` were busy and `ours` ours.
fn foreign_fraction(busy: f64, total: f64, ours: f64) -> f64 {
    ((busy - ours) / total).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_time_is_not_foreign_and_the_share_is_clamped() {
        // 2 cores for 1 s: 2 s of CPU, 1.5 busy, 1.0 of it ours.
        assert_eq!(foreign_fraction(1.5, 2.0, 1.0), 0.25);
        // Tick rounding can make ours exceed busy.
        assert_eq!(foreign_fraction(1.0, 2.0, 1.2), 0.0);
    }

    #[test]
    fn the_meter_reads_this_machine() {
        let Some(m) = LoadMeter::start() else { return };
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 200 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let f = m.foreign().expect("200 ms is long enough to tell");
        assert!((0.0..=1.0).contains(&f), "{f}");
    }
}
