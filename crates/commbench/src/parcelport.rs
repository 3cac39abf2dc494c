//! The MPI parcelport style that seed 002 analyses (§3.3): one pre-posted any-source receive
//! for incoming messages, and every send's request kept in a pool that progress tests
//! round-robin, one request per call, under a try-lock.

use crate::chains::Endpoint;
use crate::direct::{bytes, cancel, isend, null, own_comm, MAX_BYTES};
use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use std::os::raw::c_int;
use std::sync::Mutex;

struct Pool {
    reqs: Vec<ffi::MPI_Request>,
    bufs: Vec<Vec<u8>>,
    next: usize,
}

pub struct Parcelport {
    _comm: SimpleCommunicator,
    comm: ffi::MPI_Comm,
    peer: c_int,
    buf: Vec<u8>,
    recv: ffi::MPI_Request,
    pool: Mutex<Pool>,
}

impl Parcelport {
    /// Called on the main thread while no other thread uses MPI.
    pub fn new(rank: usize) -> Parcelport {
        let (dup, comm, peer) = own_comm(rank);
        let mut p = Parcelport {
            _comm: dup,
            comm,
            peer,
            buf: vec![0u8; MAX_BYTES],
            recv: null(),
            pool: Mutex::new(Pool {
                reqs: Vec::new(),
                bufs: Vec::new(),
                next: 0,
            }),
        };
        p.post();
        p
    }

    fn post(&mut self) {
        // SAFETY: `buf` is owned by `self` and not read until this receive completes.
        unsafe {
            ffi::MPI_Irecv(
                self.buf.as_mut_ptr().cast(),
                MAX_BYTES as c_int,
                bytes(),
                ffi::RSMPI_ANY_SOURCE,
                0,
                self.comm,
                &mut self.recv,
            )
        };
    }
}

impl Endpoint for Parcelport {
    fn name(&self) -> &'static str {
        "parcelport"
    }

    fn send(&mut self, payload: &[u8]) {
        let buf = payload.to_vec();
        // `buf` is kept beside its request until the request completed.
        let req = isend(self.comm, self.peer, &buf);
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.reqs.push(req);
        pool.bufs.push(buf);
    }

    fn poll(&mut self, got: &mut dyn FnMut(&[u8])) {
        // The pool: one request tested per call, round-robin, if the lock is free.
        if let Ok(mut pool) = self.pool.try_lock() {
            if !pool.reqs.is_empty() {
                let i = pool.next % pool.reqs.len();
                let mut flag: c_int = 0;
                // SAFETY: a live send request whose buffer is in the pool.
                unsafe { ffi::MPI_Test(&mut pool.reqs[i], &mut flag, ffi::RSMPI_STATUS_IGNORE) };
                if flag != 0 {
                    pool.reqs.swap_remove(i);
                    pool.bufs.swap_remove(i);
                } else {
                    pool.next = i + 1;
                }
            }
        }
        let mut flag: c_int = 0;
        // SAFETY: MPI_Status is a plain C struct of integers, valid when zeroed.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: the one posted receive, on `buf`.
        unsafe { ffi::MPI_Test(&mut self.recv, &mut flag, &mut status) };
        if flag != 0 {
            let mut len: c_int = 0;
            // SAFETY: the status of the completed receive.
            unsafe { ffi::MPI_Get_count(&status, bytes(), &mut len) };
            got(&self.buf[..len.max(0) as usize]);
            self.post();
        }
    }

    fn finish(&mut self) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let n = pool.reqs.len() as c_int;
        // SAFETY: every pooled request is live, with its buffer in the pool.
        unsafe { ffi::MPI_Waitall(n, pool.reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE) };
        pool.reqs.clear();
        pool.bufs.clear();
    }
}

impl Drop for Parcelport {
    fn drop(&mut self) {
        self.finish();
        cancel(&mut self.recv);
    }
}
