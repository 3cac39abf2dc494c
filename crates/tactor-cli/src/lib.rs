//! What every Tactor command (`taskbench`, `bale`, `commbench`) does alike, so that a cluster
//! job sees the same behaviour from each:
//! - [`limits`]: the memory a run may use — the smallest of the machine's available memory,
//!   the process's `RLIMIT_AS`/`RLIMIT_DATA` and its cgroup's `memory.max` — checked before
//!   anything large is allocated, with a refusal that names the limit that said no;
//! - [`signals`]: SIGTERM and SIGHUP (what a batch scheduler sends) end a command the way
//!   SIGINT does, with one line and a non-zero exit;
//! - [`output`]: a closed or full stdout is one line and a non-zero exit (a closed pipe stays
//!   quiet, as `cat` does);
//! - [`args`]: argument errors in one line naming the bad value, printed once per job.
//!
//! ```
//! let room = tactor_cli::limits::Room::now();
//! assert!(room.check(1024, "a test").is_ok());
//! ```

#![warn(missing_docs)]

pub mod args;
pub mod limits;
pub mod output;
pub mod plot;
pub mod signals;
