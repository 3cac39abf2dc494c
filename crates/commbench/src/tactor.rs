//! The chains on Tactor's communication layer.

use crate::chains::Endpoint;
use tactor_comm::{mpi::MpiTransport, Completion, Transport};

const PORT: u16 = 7;

pub struct Layer<'n> {
    net: &'n MpiTransport,
    peer: usize,
}

impl<'n> Layer<'n> {
    pub fn new(net: &'n MpiTransport) -> Layer<'n> {
        Layer {
            net,
            peer: 1 - net.rank(),
        }
    }
}

impl Endpoint for Layer<'_> {
    fn name(&self) -> &'static str {
        "tactor"
    }

    fn send(&mut self, payload: &[u8]) {
        let mut b = tactor_comm::buffer(payload.len());
        b.extend_from_slice(payload);
        self.net
            .send(0, self.peer, PORT, b, None)
            .expect("the peer and channel exist");
    }

    fn poll(&mut self, got: &mut dyn FnMut(&[u8])) {
        self.net.progress(0);
        while let Some(c) = self.net.completions(0).pop() {
            if let Completion::Received(m) = c {
                got(&m.data);
            }
        }
    }

    fn finish(&mut self) {
        while self.net.in_flight(0) > 0 {
            self.net.progress(0);
        }
    }
}
