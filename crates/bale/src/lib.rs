//! The Bale mini-apps on Tactor's actors and selectors ([`tactor::actor`]): each app on the
//! selector API, checking its own answer against a serial replay of the same random streams.
//! All seven: histogram (typed and lambda handlers), index-gather, random permutation, the
//! transpose and permutation of sparse matrices, toposort and triangle counting (matrices
//! generated, or read from Matrix Market files), with one PE per worker, in one process or
//! (the selector versions) spanning the ranks of an MPI job.

#![warn(missing_docs)]
pub mod apps;
pub mod baseline;
pub mod matrix;
pub mod memory;
pub mod rng;
