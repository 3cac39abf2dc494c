//! Applications written on Tactor as a user would write them: the same code in one process
//! and on the ranks of a job, each checking its answer.

#![warn(missing_docs)]
pub mod blocks;
pub mod cg;
pub mod fragments;
pub mod heat;
pub mod launch;
pub mod lcs;
pub mod stencil;
pub mod study;
