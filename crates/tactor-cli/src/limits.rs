//! The memory a process may still use, and the check every command makes before it allocates
//! a size it was given. A batch scheduler bounds a job by an address-space limit
//! (`RLIMIT_AS`, `ulimit -v`) or a cgroup (`memory.max`) rather than by the machine's free
//! memory; an allocation past either ends the process with SIGABRT or the OOM killer and no
//! word of why. So the room is the smallest of all of them, and a refusal names the one that
//! said no.

use std::fmt;

/// Which bound gave the room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `MemAvailable` of `/proc/meminfo`.
    Machine,
    /// `RLIMIT_AS` less the address space already mapped.
    AddressSpace,
    /// `RLIMIT_DATA` less the data segment already in use.
    Data,
    /// The cgroup's `memory.max` (v2) or `memory.limit_in_bytes` (v1) less its usage.
    Cgroup,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Machine => "the machine's available memory (MemAvailable)",
            Limit::AddressSpace => "the address-space limit (RLIMIT_AS, ulimit -v)",
            Limit::Data => "the data-segment limit (RLIMIT_DATA, ulimit -d)",
            Limit::Cgroup => "the cgroup's memory limit (memory.max)",
        })
    }
}

/// The room this process has: the smallest bound, or none where nothing could be read.
///
/// ```
/// use tactor_cli::limits::{Limit, Room};
/// let room = Room { bytes: Some(1 << 30), limit: Some(Limit::AddressSpace) };
/// assert!(room.check(1 << 20, "a table").is_ok());
/// let e = room.check(2 << 30, "a table").unwrap_err();
/// assert_eq!(e, "a table would need about 2.0 GiB of memory, but the address-space limit (RLIMIT_AS, ulimit -v) leaves 1.0 GiB");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    /// Bytes that may still be allocated.
    pub bytes: Option<u64>,
    /// Which bound that is.
    pub limit: Option<Limit>,
}

impl Room {
    /// The room now: every bound this process runs under, the smallest kept.
    pub fn now() -> Room {
        // Miri isolates the program from the file system and the system calls.
        if cfg!(miri) {
            return Room {
                bytes: None,
                limit: None,
            };
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let mapped = |field: &str| kib_field(&status, field).unwrap_or(0);
        let bounds = [
            (Limit::Machine, machine()),
            (
                Limit::AddressSpace,
                rlimit(libc::RLIMIT_AS).map(|l| l.saturating_sub(mapped("VmSize:"))),
            ),
            (
                Limit::Data,
                rlimit(libc::RLIMIT_DATA).map(|l| l.saturating_sub(mapped("VmData:"))),
            ),
            (Limit::Cgroup, cgroup()),
        ];
        let smallest = bounds
            .into_iter()
            .filter_map(|(l, b)| b.map(|b| (b, l)))
            .min_by_key(|&(b, _)| b);
        Room {
            bytes: smallest.map(|(b, _)| b),
            limit: smallest.map(|(_, l)| l),
        }
    }

    /// `Ok` if `needed` bytes fit, else one line naming `what`, the size and the bound.
    pub fn check(&self, needed: u128, what: &str) -> Result<(), String> {
        // Without a reading, refuse only what no 64-bit machine can address.
        let room = self.bytes.map_or(u128::from(u64::MAX), u128::from);
        if needed <= room {
            return Ok(());
        }
        let said = match (self.bytes, self.limit) {
            (Some(b), Some(l)) => format!("{l} leaves {}", human(b.into())),
            _ => "no 64-bit machine has that much".into(),
        };
        Err(format!(
            "{what} would need about {} of memory, but {said}",
            human(needed)
        ))
    }
}

/// [`Room::now`]'s check: `Ok` if `needed` bytes fit in what this process may still use.
///
/// ```
/// assert!(tactor_cli::limits::check(4096, "a buffer").is_ok());
/// let e = tactor_cli::limits::check(u128::MAX, "a buffer").unwrap_err();
/// assert!(e.starts_with("a buffer would need about "), "{e}");
/// ```
pub fn check(needed: u128, what: &str) -> Result<(), String> {
    Room::now().check(needed, what)
}

/// `a × b` for sizes, saturating: an absurd size gives an absurd estimate and a refusal,
/// never a wrapped one.
///
/// ```
/// assert_eq!(tactor_cli::limits::mul(u128::MAX, 2u32), u128::MAX);
/// assert_eq!(tactor_cli::limits::mul(3u32, 4usize), 12);
/// ```
pub fn mul(a: impl TryInto<u128>, b: impl TryInto<u128>) -> u128 {
    let (a, b) = (a.try_into().unwrap_or(0), b.try_into().unwrap_or(0));
    a.saturating_mul(b)
}

/// `bytes` for people: `1.5 GiB`.
///
/// ```
/// assert_eq!(tactor_cli::limits::human(1536 * 1024 * 1024), "1.5 GiB");
/// assert_eq!(tactor_cli::limits::human(100), "100 B");
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

/// `field` of a `/proc` status text, in bytes (the file gives kB).
fn kib_field(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

fn machine() -> Option<u64> {
    kib_field(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable:",
    )
}

/// The soft limit of `resource`, or `None` when unlimited.
fn rlimit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a pointer to a live local.
    let rc = unsafe { libc::getrlimit(resource, &mut l) };
    (rc == 0 && l.rlim_cur != libc::RLIM_INFINITY).then_some(l.rlim_cur)
}

/// What the process's cgroup and every cgroup above it still allow, the smallest.
fn cgroup() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut room: Option<u64> = None;
    let mut keep = |r: Option<u64>| {
        if let Some(r) = r {
            room = Some(room.map_or(r, |x| x.min(r)));
        }
    };
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = match (parts.next(), parts.next(), parts.next()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => continue,
        };
        let (root, max, used) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        // The cgroup and its ancestors: a parent's limit binds its children too.
        let mut dir = std::path::PathBuf::from(format!("{root}{}", path.trim_end()));
        loop {
            keep(headroom(&dir.join(max), &dir.join(used)));
            if dir.as_os_str().len() <= root.len() || !dir.pop() {
                break;
            }
        }
    }
    room
}

/// `max − used` of one cgroup, `None` for "max" (no limit) or files that are not there.
fn headroom(max: &std::path::Path, used: &std::path::Path) -> Option<u64> {
    let max = std::fs::read_to_string(max)
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    let used = std::fs::read_to_string(used)
        .ok()
        .and_then(|u| u.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Some(max.saturating_sub(used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_bound_is_named() {
        let room = Room::now();
        if let Some(b) = room.bytes {
            assert!(b > 0);
            assert!(room.limit.is_some());
            let e = room.check(u128::from(b) + 1, "x").unwrap_err();
            assert!(e.contains(&room.limit.unwrap().to_string()), "{e}");
        }
    }

    #[test]
    fn status_fields_in_bytes() {
        assert_eq!(kib_field("VmSize:\t  2048 kB\n", "VmSize:"), Some(2 << 20));
        assert_eq!(kib_field("VmData: x kB\n", "VmData:"), None);
    }

    #[test]
    fn no_reading_refuses_only_the_impossible() {
        let room = Room {
            bytes: None,
            limit: None,
        };
        assert!(room.check(u128::from(u64::MAX), "x").is_ok());
        let e = room.check(u128::from(u64::MAX) + 1, "x").unwrap_err();
        assert!(e.ends_with("no 64-bit machine has that much"), "{e}");
    }
}
