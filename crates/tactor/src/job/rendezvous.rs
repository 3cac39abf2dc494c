//! Where a copy that crossed ranks meets the task that waits for it: whichever of the two
//! comes first waits in the table for the other. What `Spmd` and `implicit::Replicated`
//! receive through.

use rustc_hash::FxBuildHasher;
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, PoisonError};

/// What takes a copy when it arrives: its bytes (in the network's buffer, or borrowed where
/// the sender wrote them: a receiver that decodes them needs no buffer of its own), or why it
/// never will.
pub(crate) trait Open: Send {
    fn open(self, got: Result<Cow<'_, [u8]>, &str>);
}

/// An opener that is a closure, reading the bytes where they are.
pub(crate) type Opener = Box<dyn FnOnce(Result<&[u8], &str>) + Send>;

impl Open for Opener {
    fn open(self, got: Result<Cow<'_, [u8]>, &str>) {
        match got {
            Ok(bytes) => self(Ok(&bytes)),
            Err(why) => self(Err(why)),
        }
    }
}

/// Copies that arrived before anyone asked, and openers waiting for theirs, by key. The
/// openers are of one type `O`: a receiver whose opener is a shared slot waits with no
/// allocation of its own.
pub(crate) struct Rendezvous<K, O = Opener, S = FxBuildHasher> {
    table: Mutex<Table<K, O, S>>,
}

struct Table<K, O, S> {
    /// Keyed by small integers a job makes itself (no one chooses them to collide): a fast
    /// hash, not a keyed one.
    waiting: HashMap<K, O, S>,
    early: HashMap<K, Vec<u8>, S>,
    /// Set once a rank failed: what is still expected then never comes.
    failed: Option<String>,
}

impl<K: Hash + Eq, O, S: BuildHasher + Default> Default for Rendezvous<K, O, S> {
    fn default() -> Self {
        Rendezvous {
            table: Mutex::new(Table {
                waiting: HashMap::default(),
                early: HashMap::default(),
                failed: None,
            }),
        }
    }
}

impl<K: Hash + Eq, O: Open, S: BuildHasher + Default> Rendezvous<K, O, S> {
    fn table(&self) -> std::sync::MutexGuard<'_, Table<K, O, S>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The copy of `key` arrived: its opener runs now (outside the lock) if it waits, or the
    /// bytes wait for it (in a buffer of their own).
    pub(crate) fn arrive(&self, key: K, data: Cow<'_, [u8]>) {
        let mut t = self.table();
        match t.waiting.remove(&key) {
            Some(open) => {
                drop(t);
                open.open(Ok(data));
            }
            None => {
                t.early.insert(key, data.into_owned());
            }
        }
    }

    /// `open` takes the copy of `key`: now if it arrived (or a rank failed), else when it
    /// does. Each key is expected once.
    pub(crate) fn expect(&self, key: K, open: O) {
        let mut t = self.table();
        if let Some(data) = t.early.remove(&key) {
            drop(t);
            return open.open(Ok(Cow::Owned(data)));
        }
        if let Some(why) = t.failed.clone() {
            drop(t);
            return open.open(Err(&why));
        }
        t.waiting.insert(key, open);
    }

    /// A rank failed: every opener still waiting, and every one that comes later without its
    /// copy, is told `why`.
    pub(crate) fn poison(&self, why: &str) {
        let waiting = {
            let mut t = self.table();
            t.failed = Some(why.to_string());
            std::mem::take(&mut t.waiting)
        };
        for open in waiting.into_values() {
            open.open(Err(why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::ordered::Sequential;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// What each key's opener was given, if it ran.
    type Got = Arc<Mutex<Vec<Option<Result<Vec<u8>, String>>>>>;

    /// An opener that records what it was given in `got[key]`, and fails if it runs twice.
    fn recorder(got: &Got, key: usize) -> Opener {
        let got = got.clone();
        Box::new(move |r| {
            let mut g = got.lock().unwrap();
            assert!(g[key].is_none(), "key {key} opened twice");
            g[key] = Some(r.map(<[u8]>::to_vec).map_err(str::to_string));
        })
    }

    #[test]
    fn each_copy_meets_its_opener_whichever_comes_first() {
        let r = Rendezvous::<usize>::default();
        let got = Arc::new(Mutex::new(vec![None; 2]));
        r.arrive(0usize, Cow::Owned(vec![7]));
        r.expect(0, recorder(&got, 0));
        r.expect(1, recorder(&got, 1));
        assert!(got.lock().unwrap()[1].is_none());
        r.arrive(1, Cow::Borrowed(&[8, 9]));
        assert_eq!(
            *got.lock().unwrap(),
            [Some(Ok(vec![7])), Some(Ok(vec![8, 9]))]
        );
    }

    /// Keys 0..n arrive from one thread and are expected on another, in the orders `arrive`
    /// and `expect` give (the `k`-th key of each side): every opener runs once with its own
    /// bytes, and nothing is left in the table. Odd keys arrive read in place (their bytes
    /// gone once `arrive` returns, so one that waits must have been copied), even ones in a
    /// buffer.
    fn race<S: BuildHasher + Default + Send + Sync>(
        n: u64,
        arrive: fn(u64, u64) -> u64,
        expect: fn(u64, u64) -> u64,
    ) {
        let r = Arc::new(Rendezvous::<u64, Opener, S>::default());
        let got = Arc::new(Mutex::new(vec![None; n as usize]));
        std::thread::scope(|s| {
            let (ra, rb, g) = (r.clone(), r.clone(), got.clone());
            s.spawn(move || {
                (0..n).map(|k| arrive(k, n)).for_each(|k| {
                    let mut bytes = k.to_le_bytes();
                    match k % 2 {
                        0 => ra.arrive(k, Cow::Owned(bytes.to_vec())),
                        _ => ra.arrive(k, Cow::Borrowed(&bytes)),
                    }
                    std::hint::black_box(&mut bytes).fill(0xff);
                })
            });
            s.spawn(move || {
                (0..n)
                    .map(|k| expect(k, n))
                    .for_each(|k| rb.expect(k, recorder(&g, k as usize)))
            });
        });
        let got = got.lock().unwrap();
        for (k, g) in got.iter().enumerate() {
            assert_eq!(g, &Some(Ok((k as u64).to_le_bytes().to_vec())), "key {k}");
        }
        let t = r.table();
        assert!(t.waiting.is_empty() && t.early.is_empty());
    }

    /// Arrivals and expectations of the same keys race from two threads, in opposite orders.
    #[test]
    fn racing_arrivals_and_expectations_lose_nothing() {
        let n = if cfg!(miri) { 50 } else { 20_000 };
        race::<FxBuildHasher>(n, |k, _| k, |k, n| n - 1 - k);
    }

    /// Values numbered in order, expected in one scrambled order and arriving in another,
    /// under the hash that keeps neighbouring numbers together.
    #[test]
    fn numbered_keys_meet_their_openers_under_the_sequential_hash() {
        // 7 and 13 are coprime to n: each side takes every key once.
        let n = if cfg!(miri) { 40 } else { 20_000 };
        race::<Sequential>(n, |k, n| k * 7 % n, |k, n| k * 13 % n);
    }

    /// A failure tells every waiting opener and every later one whose copy had not come; a
    /// copy that came first is still delivered.
    #[test]
    fn a_failure_reaches_every_opener_still_waiting_and_later_ones() {
        let r = Rendezvous::<usize>::default();
        let got = Arc::new(Mutex::new(vec![None; 3]));
        let calls = Arc::new(AtomicUsize::new(0));
        r.expect(0usize, recorder(&got, 0));
        r.arrive(2, Cow::Borrowed(&[1]));
        r.poison("rank 1 failed");
        r.expect(1, recorder(&got, 1));
        r.expect(2, recorder(&got, 2));
        let c = calls.clone();
        r.expect(
            3,
            Box::new(move |_| {
                c.fetch_add(1, Ordering::SeqCst);
            }),
        );
        let failed = Some(Err("rank 1 failed".to_string()));
        assert_eq!(
            *got.lock().unwrap(),
            [failed.clone(), failed, Some(Ok(vec![1]))]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
