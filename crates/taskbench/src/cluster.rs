//! Running on several ranks: the job's transport (`tactor-comm`), the ports systems use on it,
//! and how a failure on one rank reaches every other rank.
//!
//! A rank that fails prints one line naming itself and the cause, tells every other rank on
//! [`PORT_FAIL`], waits (briefly) for those messages to leave, and exits with status 1; every
//! other rank sees the message in its next wait, stops, and exits with status 1 without
//! printing. A rank that panics or is killed ends the job through the launcher (`MPI_Abort`,
//! or `mpirun` noticing the lost process).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};
use tactor_comm::{Completion, Message, Reduce, Stopped, Transport};

/// A rank failed; the payload is its one-line cause (UTF-8).
pub const PORT_FAIL: u16 = 0;
/// `bsp`'s neighbour exchange.
pub const PORT_BSP: u16 = 1;
/// The cross-rank edges of `tasks` and `compiled` (`systems::remote`).
pub const PORT_TACTOR: u16 = 2;

/// A fault to inject, for testing how a job ends: `TASKBENCH_FAULT=RANK:corrupt` makes rank
/// RANK send one wrong output in the timed pass (the receiving rank's validation must catch
/// it), `TASKBENCH_FAULT=RANK:panic` makes it panic there, and `TASKBENCH_FAULT=RANK:slow`
/// makes it hold one message back for [`SLOW`] (the others must wait for it, not fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Flip a byte of one output sent to another rank.
    Corrupt,
    /// Panic in a worker.
    Panic,
    /// Pause before one send.
    Slow,
}

/// How long a `slow` rank holds its message back: far longer than a receiver polls before it
/// waits on an event instead.
pub const SLOW: std::time::Duration = std::time::Duration::from_millis(50);

/// The fault `TASKBENCH_FAULT` asks this rank to inject, if any.
pub fn injected_fault(rank: usize) -> Option<Fault> {
    let v = std::env::var("TASKBENCH_FAULT").ok()?;
    let (r, kind) = v.split_once(':')?;
    if r.trim().parse::<usize>().ok()? != rank {
        return None;
    }
    match kind.trim() {
        "corrupt" => Some(Fault::Corrupt),
        "panic" => Some(Fault::Panic),
        "slow" => Some(Fault::Slow),
        _ => None,
    }
}

/// Channels: one per worker up to this many (seed 002 finds a few devices enough).
const MAX_CHANNELS: usize = 4;

/// This process's place in a multi-rank job.
pub struct Cluster {
    net: Box<dyn Transport>,
    /// 0 while no rank failed, else the failed rank + 1.
    failed: AtomicUsize,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cluster(rank {} of {})", self.rank(), self.ranks())
    }
}

/// For the panic hook. Weak: dropping the last `Arc` shuts the transport down (and finalises
/// MPI) when the run ends.
static CURRENT: OnceLock<Weak<Cluster>> = OnceLock::new();

/// The rank the launcher gave this process, or `None` on its own (read from the environment,
/// so that it is known before MPI starts).
pub fn launcher_rank() -> Option<usize> {
    several_ranks().map(|(_, r)| r)
}

/// (ranks, this rank) when a launcher started this process as one of several ranks.
fn several_ranks() -> Option<(usize, usize)> {
    tactor_comm::launcher::job().filter(|&(size, _)| size > 1)
}

/// Ranks of this job on this machine, as the launcher announces them (1 on its own).
pub fn local_ranks() -> usize {
    launcher_count(&["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"])
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// This process's place among the ranks of its job on this machine (0 on its own).
pub fn local_rank() -> usize {
    launcher_count(&["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"]).unwrap_or(0)
}

/// The first of these launcher variables (Open MPI's, then MPICH's) that holds a count.
fn launcher_count(vars: &[&str]) -> Option<usize> {
    vars.iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse::<usize>().ok())
}

impl Cluster {
    /// Joins the job this process was launched into, with a channel per worker (at most
    /// four). `Ok(None)` when the process runs on its own or as the only rank.
    ///
    /// # Safety
    ///
    /// With `one_thread`, the caller promises that the calling thread is and stays the only
    /// one of the process (MPI then runs at `MPI_THREAD_SINGLE`, without its locks).
    pub unsafe fn join(workers: usize, one_thread: bool) -> Result<Option<Arc<Cluster>>, String> {
        let Some((size, _)) = several_ranks() else {
            return Ok(None);
        };
        let channels = workers.clamp(1, MAX_CHANNELS);
        let net = if one_thread {
            // SAFETY: passed on from this function's contract.
            unsafe { tactor_comm::connect_one_thread(channels, size, "taskbench") }?
        } else {
            start(channels, size)?
        };
        let cluster = Arc::new(Cluster {
            net,
            failed: AtomicUsize::new(0),
        });
        let _ = CURRENT.set(Arc::downgrade(&cluster));
        install_panic_hook();
        Ok(Some(cluster))
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.net.rank()
    }

    /// Ranks in the job.
    pub fn ranks(&self) -> usize {
        self.net.ranks()
    }

    /// The transport's channels.
    pub fn channels(&self) -> usize {
        self.net.channels()
    }

    /// Sends `data` to `port` of rank `dest`. A send the layer refuses ends the job: it can
    /// only be a bug here.
    pub fn send(&self, channel: usize, dest: usize, port: u16, data: Vec<u8>) {
        if let Err(e) = self.net.send(channel, dest, port, data, None) {
            self.die(&format!("send to rank {dest} failed: {e}"));
        }
    }

    /// Sends the `len` bytes of `parts`, back to back, to `port` of rank `dest` (copied
    /// straight to where the message travels from where the transport can). A send the layer
    /// refuses ends the job, as for [`Cluster::send`].
    pub fn send_parts(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
    ) {
        if let Err(e) = self.net.send_parts(channel, dest, port, len, parts, None) {
            self.die(&format!("send to rank {dest} failed: {e}"));
        }
    }

    /// Progresses every channel and hands each message that arrived to `deliver`. `false`
    /// once some rank failed.
    pub fn poll(&self, deliver: &mut dyn FnMut(Message)) -> bool {
        for ch in 0..self.net.channels() {
            // One progress call, then everything it completed (not a progress call per
            // message, each of which costs MPI calls).
            self.net.progress(ch);
            while let Some(c) = self.net.completions(ch).pop() {
                match c {
                    Completion::Received(m) if m.port == PORT_FAIL => {
                        let _ = self.failed.compare_exchange(
                            0,
                            m.source + 1,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                    }
                    Completion::Received(m) => deliver(m),
                    Completion::Sent { .. } => {}
                }
            }
        }
        self.failed.load(Ordering::Acquire) == 0
    }

    /// Offers the oldest inline message from `source` on each channel to `want`, in place
    /// (see [`tactor_comm::Transport::take_inline`]): whether `want` took one.
    pub fn take_inline(&self, source: usize, want: &mut dyn FnMut(u16, &[u8]) -> bool) -> bool {
        (0..self.net.channels()).any(|ch| self.net.take_inline(ch, source, want) == Some(true))
    }

    /// The rank that failed first, if one did.
    pub fn failed_rank(&self) -> Option<usize> {
        self.failed.load(Ordering::Acquire).checked_sub(1)
    }

    /// A barrier over ranks, delivering messages to `deliver` while it waits.
    pub fn barrier(&self, deliver: &mut dyn FnMut(Message)) -> Result<(), Stopped> {
        self.net.barrier(&mut || self.poll(deliver))
    }

    /// Combines `value` over ranks.
    pub fn all_reduce(&self, op: Reduce, value: u64) -> Result<u64, Stopped> {
        self.net
            .all_reduce(op, value, &mut || self.poll(&mut |_| {}))
    }

    /// Tells every other rank that this one failed with `cause`, and waits up to a second for
    /// the messages to leave.
    pub fn tell_failure(&self, cause: &str) {
        let me = self.rank();
        let _ = self
            .failed
            .compare_exchange(0, me + 1, Ordering::AcqRel, Ordering::Acquire);
        for dest in (0..self.ranks()).filter(|&r| r != me) {
            let _ = self
                .net
                .send(0, dest, PORT_FAIL, cause.as_bytes().to_vec(), None);
        }
        let start = Instant::now();
        while self.net.in_flight(0) > 0 && start.elapsed() < Duration::from_secs(1) {
            self.net.progress(0);
            std::thread::yield_now();
        }
    }

    /// Prints `cause` for this rank and ends the whole job at once.
    fn die(&self, cause: &str) -> ! {
        say(&format!("error: rank {}: {cause}", self.rank()));
        self.net.abort(1)
    }
}

/// Writes `line` and a newline to stderr in one write. `eprintln!` writes each piece of its
/// format apart (stderr is unbuffered), and under `mpirun`, which forwards what ranks write
/// as it comes, another process's output could land inside the line (seen: "error: rank 1"
/// cut by mpirun's banner, failing a test that looks for the whole line).
pub fn say(line: &str) {
    tactor_cli::say!("{line}");
}

/// A panic on any thread of a rank ends the job: the other ranks could otherwise wait forever
/// for what the panicking thread would have sent.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        match CURRENT.get().and_then(Weak::upgrade) {
            Some(c) => c.die(&format!("panicked: {what}{at}")),
            None => say(&format!("error: panicked: {what}{at}")),
        }
    }));
}

fn start(channels: usize, size: usize) -> Result<Box<dyn Transport>, String> {
    tactor_comm::connect(channels, size, "taskbench")
}
