//! The floor: the chains written directly on MPI. One pre-posted receive from the peer per
//! chain in flight (up to a window of 256), `MPI_Testsome` over them, `MPI_Isend` per
//! message.

use crate::chains::Endpoint;
use crate::direct::{bytes, cancel, isend, null, own_comm, MAX_BYTES};
use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use std::os::raw::c_int;

/// Receives kept posted.
const WINDOW: usize = 256;

pub struct Raw {
    _comm: SimpleCommunicator,
    comm: ffi::MPI_Comm,
    peer: c_int,
    bufs: Vec<Vec<u8>>,
    recvs: Vec<ffi::MPI_Request>,
    /// Receives posted for the current row: `recvs[..posted]`.
    posted: usize,
    sends: Vec<ffi::MPI_Request>,
    send_bufs: Vec<Vec<u8>>,
    indices: Vec<c_int>,
    statuses: Vec<ffi::MPI_Status>,
}

impl Raw {
    /// Called on the main thread while no other thread uses MPI (the benchmark is
    /// single-threaded).
    pub fn new(rank: usize) -> Raw {
        let (dup, comm, peer) = own_comm(rank);
        let mut r = Raw {
            _comm: dup,
            comm,
            peer,
            bufs: vec![vec![0u8; MAX_BYTES]; WINDOW],
            recvs: vec![null(); WINDOW],
            posted: WINDOW,
            sends: Vec::new(),
            send_bufs: Vec::new(),
            indices: vec![0; WINDOW],
            // SAFETY: MPI_Status is a plain C struct of integers, valid when zeroed.
            statuses: vec![unsafe { std::mem::zeroed() }; WINDOW],
        };
        for i in 0..WINDOW {
            r.post(i);
        }
        r
    }

    fn post(&mut self, i: usize) {
        // SAFETY: `bufs[i]` is owned by `self`, not read until this receive completes, and
        // never reallocated.
        unsafe {
            ffi::MPI_Irecv(
                self.bufs[i].as_mut_ptr().cast(),
                MAX_BYTES as c_int,
                bytes(),
                self.peer,
                0,
                self.comm,
                &mut self.recvs[i],
            )
        };
    }

    /// Drops the sends that finished, without waiting (waiting here could deadlock: the
    /// peer's large sends need this rank's receives reposted).
    fn test_sends(&mut self) {
        let n = self.sends.len();
        let mut done: c_int = 0;
        let mut idx = vec![0 as c_int; n];
        // SAFETY: every request in `sends` is live; `idx` has room for all of them.
        unsafe {
            ffi::MPI_Testsome(
                n as c_int,
                self.sends.as_mut_ptr(),
                &mut done,
                idx.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        let mut finished: Vec<usize> = idx[..done.max(0) as usize]
            .iter()
            .map(|&i| i as usize)
            .collect();
        finished.sort_unstable_by(|a, b| b.cmp(a));
        for i in finished {
            self.sends.swap_remove(i);
            self.send_bufs.swap_remove(i);
        }
    }

    fn complete_sends(&mut self) {
        // SAFETY: every request in `sends` is live; their buffers are in `send_bufs`.
        unsafe {
            ffi::MPI_Waitall(
                self.sends.len() as c_int,
                self.sends.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        self.sends.clear();
        self.send_bufs.clear();
    }
}

impl Endpoint for Raw {
    fn name(&self) -> &'static str {
        "raw"
    }

    fn send(&mut self, payload: &[u8]) {
        let buf = payload.to_vec();
        // `buf` is kept beside its request until the request completed.
        let req = isend(self.comm, self.peer, &buf);
        self.sends.push(req);
        self.send_bufs.push(buf);
        if self.sends.len() >= WINDOW {
            self.test_sends();
        }
    }

    fn poll(&mut self, got: &mut dyn FnMut(&[u8])) {
        let mut n: c_int = 0;
        // SAFETY: `recvs[..posted]` are live receives; `indices` and `statuses` have room
        // for all of them.
        unsafe {
            ffi::MPI_Testsome(
                self.posted as c_int,
                self.recvs.as_mut_ptr(),
                &mut n,
                self.indices.as_mut_ptr(),
                self.statuses.as_mut_ptr(),
            )
        };
        for k in 0..n.max(0) as usize {
            let i = self.indices[k] as usize;
            let mut len: c_int = 0;
            // SAFETY: the status of a completed receive.
            unsafe { ffi::MPI_Get_count(&self.statuses[k], bytes(), &mut len) };
            got(&self.bufs[i][..len.max(0) as usize]);
            self.post(i);
        }
    }

    fn finish(&mut self) {
        self.complete_sends();
    }

    fn start(&mut self, row: &crate::chains::Row) {
        // As many receives as chains can be in flight: testing more costs every poll.
        self.cancel();
        self.posted = (row.chains as usize).clamp(1, WINDOW);
        for i in 0..self.posted {
            self.post(i);
        }
    }
}

impl Raw {
    fn cancel(&mut self) {
        self.recvs[..self.posted].iter_mut().for_each(cancel);
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.complete_sends();
        self.cancel();
    }
}
