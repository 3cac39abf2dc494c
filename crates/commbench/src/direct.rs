//! What the two baselines written directly on MPI share.

use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::AsRaw;
use std::os::raw::c_int;

/// Payloads of every row fit this.
pub const MAX_BYTES: usize = 16 * 1024;

/// A communicator of a baseline's own (its traffic never matches another's receives), its raw
/// handle, and the peer rank. Called on the main thread while no other thread uses MPI.
pub fn own_comm(rank: usize) -> (SimpleCommunicator, ffi::MPI_Comm, c_int) {
    let dup = SimpleCommunicator::world().duplicate();
    let raw = dup.as_raw();
    (dup, raw, (1 - rank) as c_int)
}

pub fn null() -> ffi::MPI_Request {
    // SAFETY: a constant initialised by the MPI library at load time.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

pub fn bytes() -> ffi::MPI_Datatype {
    // SAFETY: a constant initialised by the MPI library at load time.
    unsafe { ffi::RSMPI_UINT8_T }
}

/// Withdraws a posted receive.
pub fn cancel(req: &mut ffi::MPI_Request) {
    // SAFETY: `req` is a live posted receive; cancelling and waiting completes it, after which
    // its buffer is no longer used.
    unsafe {
        ffi::MPI_Cancel(req);
        ffi::MPI_Wait(req, ffi::RSMPI_STATUS_IGNORE);
    }
}

/// Starts sending `buf` to `peer` with tag 0. The caller keeps `buf` (its heap block) alive
/// and unchanged until the returned request completes.
pub fn isend(comm: ffi::MPI_Comm, peer: c_int, buf: &[u8]) -> ffi::MPI_Request {
    let mut req = null();
    // SAFETY: the caller keeps `buf` alive until the request completes (above); payloads are
    // at most MAX_BYTES, which fits `c_int`.
    unsafe {
        ffi::MPI_Isend(
            buf.as_ptr().cast(),
            buf.len() as c_int,
            bytes(),
            peer,
            0,
            comm,
            &mut req,
        )
    };
    req
}
