//! The Bale mini-apps on Tactor's actors and selectors ([`tactor::actor`]): each app on the
//! selector API, checking its own answer against a serial replay of the same random streams.
//! So far: histogram (typed and lambda handlers) and index-gather, in one process with one PE
//! per worker.

pub mod apps;
pub mod baseline;
pub mod rng;
