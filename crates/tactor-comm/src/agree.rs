//! What the ranks of a job must agree on before it starts, and the verdict once every rank's
//! part is known.
//!
//! A rank that was started with other arguments than the others (another step count, another
//! worker count, another transport setting) would otherwise send what nobody expects, or wait
//! in a collective the others never enter: the job would hang or fail far from the cause. So
//! at join every rank shows its configuration, or the reason it cannot take part (its
//! arguments did not parse), and every rank comes to the same verdict: go, or stop with one
//! line that names the first difference or the failed rank.

/// One rank's part at join: its configuration, or why it cannot take part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Joining {
    /// The items every rank must have alike, in order (for a command line, each flag with its
    /// value: see [`Joining::from_args`]).
    Config(Vec<String>),
    /// This rank failed before the job could start; the payload is its one-line cause.
    Failed(String),
}

impl Joining {
    /// The configuration of a command line: each flag (`-x` or `--x`) together with the
    /// values that follow it, so that a difference names the flag.
    ///
    /// ```
    /// use tactor_comm::agree::Joining;
    ///
    /// let j = Joining::from_args(["-steps", "4", "-width", "2", "--quiet"]);
    /// assert_eq!(j, Joining::Config(vec!["-steps 4".into(), "-width 2".into(), "--quiet".into()]));
    /// ```
    pub fn from_args<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Joining {
        let mut items: Vec<String> = Vec::new();
        for a in args {
            let a = a.as_ref();
            let flag = a.starts_with('-') && a.len() > 1 && a.parse::<f64>().is_err();
            match items.last_mut() {
                Some(last) if !flag && last.starts_with('-') => {
                    last.push(' ');
                    last.push_str(a);
                }
                _ => items.push(a.to_string()),
            }
        }
        Joining::Config(items)
    }

    /// The part with one more item (a choice of the transport or of the program that every
    /// rank must share); a failed part stays as it is.
    pub fn with(mut self, item: impl Into<String>) -> Joining {
        if let Joining::Config(items) = &mut self {
            items.push(item.into());
        }
        self
    }

    /// The bytes one rank sends the others.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, body) = match self {
            Joining::Config(items) => (b'C', items.join("\0")),
            Joining::Failed(cause) => (b'F', cause.clone()),
        };
        let mut b = vec![tag];
        b.extend_from_slice(body.as_bytes());
        b
    }

    /// The part `bytes` (from [`Joining::encode`]) describes; bytes that are not one are a
    /// failed part saying so.
    pub fn decode(bytes: &[u8]) -> Joining {
        let text = String::from_utf8_lossy(bytes.get(1..).unwrap_or_default()).into_owned();
        match bytes.first() {
            Some(b'C') if text.is_empty() => Joining::Config(Vec::new()),
            Some(b'C') => Joining::Config(text.split('\0').map(str::to_string).collect()),
            Some(b'F') => Joining::Failed(text),
            _ => Joining::Failed("sent a configuration this build cannot read".into()),
        }
    }
}

/// Why a job could not start: every rank comes to the same one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Verdict {
    /// A rank failed before the job started.
    #[error("rank {rank}: {cause}")]
    Failed {
        /// The lowest rank that failed.
        rank: usize,
        /// Its cause.
        cause: String,
        /// Whether every rank failed with this same cause (then one line without a rank
        /// says it all).
        everywhere: bool,
    },
    /// Two ranks were started differently.
    #[error("ranks disagree: rank {rank} runs with `{theirs}` where rank 0 runs with `{ours}`")]
    Disagree {
        /// The lowest rank whose configuration differs from rank 0's.
        rank: usize,
        /// Its first item that differs (or "nothing more").
        theirs: String,
        /// Rank 0's item at the same place.
        ours: String,
    },
}

impl Verdict {
    /// Whether rank `me` is the one that prints the verdict (one line for the whole job):
    /// the failed rank for a failure of its own, rank 0 otherwise.
    pub fn speaks(&self, me: usize) -> bool {
        match self {
            Verdict::Failed {
                rank,
                everywhere: false,
                ..
            } => *rank == me,
            _ => me == 0,
        }
    }

    /// The line to print after `error: `.
    ///
    /// ```
    /// use tactor_comm::agree::{verdict, Joining};
    ///
    /// let bad = Joining::Failed("unexpected argument '-x'".into());
    /// let v = verdict(&[bad.clone(), bad]).unwrap_err();
    /// assert_eq!(v.line(), "unexpected argument '-x'");
    /// ```
    pub fn line(&self) -> String {
        match self {
            Verdict::Failed {
                cause,
                everywhere: true,
                ..
            } => cause.clone(),
            v => v.to_string(),
        }
    }
}

/// The job's verdict on every rank's part, in rank order: the same on every rank.
///
/// ```
/// use tactor_comm::agree::{verdict, Joining, Verdict};
///
/// let a = Joining::from_args(["-steps", "4"]);
/// let b = Joining::from_args(["-steps", "5"]);
/// assert_eq!(verdict(&[a.clone(), a.clone()]), Ok(()));
/// let v = verdict(&[a.clone(), a, b]).unwrap_err();
/// assert!(matches!(v, Verdict::Disagree { rank: 2, .. }));
/// assert_eq!(v.line(), "ranks disagree: rank 2 runs with `-steps 5` where rank 0 runs with `-steps 4`");
/// ```
pub fn verdict(parts: &[Joining]) -> Result<(), Verdict> {
    let failed: Vec<(usize, &String)> = parts
        .iter()
        .enumerate()
        .filter_map(|(r, p)| match p {
            Joining::Failed(c) => Some((r, c)),
            Joining::Config(_) => None,
        })
        .collect();
    if let Some(&(rank, cause)) = failed.first() {
        return Err(Verdict::Failed {
            rank,
            cause: cause.clone(),
            everywhere: failed.len() == parts.len() && failed.iter().all(|(_, c)| *c == cause),
        });
    }
    let items = |p: &Joining| match p {
        Joining::Config(i) => i.clone(),
        Joining::Failed(_) => Vec::new(),
    };
    let Some(first) = parts.first().map(items) else {
        return Ok(());
    };
    for (rank, part) in parts.iter().enumerate().skip(1) {
        let theirs = items(part);
        if theirs == first {
            continue;
        }
        let at = (0..)
            .find(|&i| first.get(i) != theirs.get(i))
            .expect("two different lists differ somewhere");
        let say = |v: Option<&String>| v.cloned().unwrap_or_else(|| "nothing more".into());
        return Err(Verdict::Disagree {
            rank,
            theirs: say(theirs.get(at)),
            ours: say(first.get(at)),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_survive_the_wire() {
        for j in [
            Joining::Config(vec![]),
            Joining::Config(vec!["".into(), "a b".into()]),
            Joining::from_args(["-n", "-3", "x"]),
            Joining::Failed("no such file".into()),
        ] {
            assert_eq!(Joining::decode(&j.encode()), j);
        }
        assert!(matches!(Joining::decode(b""), Joining::Failed(_)));
    }

    #[test]
    fn negative_numbers_are_values() {
        assert_eq!(
            Joining::from_args(["-imbalance", "-0.5"]),
            Joining::Config(vec!["-imbalance -0.5".into()])
        );
    }

    #[test]
    fn a_missing_item_is_named() {
        let a = Joining::from_args(["-steps", "4"]).with("channels=1");
        let b = Joining::from_args(["-steps", "4"]);
        let v = verdict(&[a, b]).unwrap_err();
        assert_eq!(
            v.line(),
            "ranks disagree: rank 1 runs with `nothing more` where rank 0 runs with `channels=1`"
        );
        assert!(v.speaks(0) && !v.speaks(1));
    }

    #[test]
    fn one_failed_rank_speaks_for_itself() {
        let ok = Joining::from_args(["a"]);
        let bad = Joining::Failed("no such file".into());
        let v = verdict(&[ok.clone(), bad.clone(), ok]).unwrap_err();
        assert_eq!(v.line(), "rank 1: no such file");
        assert!(v.speaks(1) && !v.speaks(0) && !v.speaks(2));
        let all = verdict(&[bad.clone(), bad]).unwrap_err();
        assert_eq!(all.line(), "no such file");
        assert!(all.speaks(0) && !all.speaks(1));
    }
}
