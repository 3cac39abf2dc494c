//! Writing a command's results and messages without losing a failure. `println!` panics when
//! stdout is full (`> /dev/full`) and `let _ = write!(..)` drops the error, so the table is
//! lost and the exit status says success. Here the first failure is kept and [`finish`]
//! turns it into one line and a non-zero exit; a reader that closed the pipe (`| head -1`)
//! only stops the output, quietly, as `cat` does.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::Mutex;

/// The first failure to write stdout or stderr, kept for [`finish`].
static FAILED: Mutex<Option<String>> = Mutex::new(None);

fn remember(stream: &str, e: &std::io::Error) {
    if e.kind() == ErrorKind::BrokenPipe {
        return;
    }
    let mut f = FAILED.lock().unwrap_or_else(|p| p.into_inner());
    f.get_or_insert_with(|| format!("writing {stream}: {e}"));
}

/// Writes `args` to stdout. Use through [`out!`](crate::out).
pub fn print(args: fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        remember("output", &e);
    }
}

/// Writes `args` and a newline to stderr in one write. Use through [`say!`](crate::say).
/// (`eprintln!` writes each piece of its format apart, stderr being unbuffered, and under
/// `mpirun`, which forwards what ranks write as it comes, another process's output can land
/// inside the line.)
pub fn say_line(args: fmt::Arguments<'_>) {
    let mut line = args.to_string();
    line.push('\n');
    if let Err(e) = std::io::stderr().lock().write_all(line.as_bytes()) {
        remember("messages", &e);
    }
}

/// Flushes stdout and gives the first failure to write, as one line (without `error: `).
///
/// ```
/// tactor_cli::out!("{} tasks\n", 4);
/// assert!(tactor_cli::output::finish().is_ok());
/// ```
pub fn finish() -> Result<(), String> {
    if let Err(e) = std::io::stdout().lock().flush() {
        remember("output", &e);
    }
    match FAILED.lock().unwrap_or_else(|p| p.into_inner()).take() {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// `print!` that keeps a write failure for [`finish`](crate::output::finish) instead of
/// panicking on it.
///
/// ```
/// tactor_cli::out!("peak: {:.1} GFLOP/s\n", 12.5);
/// ```
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::print(format_args!($($arg)*)) };
}

/// `eprintln!` that keeps a write failure for [`finish`](crate::output::finish) instead of
/// panicking on it.
///
/// ```
/// tactor_cli::say!("warning: {} runs were noisy", 2);
/// ```
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::output::say_line(format_args!($($arg)*)) };
}
