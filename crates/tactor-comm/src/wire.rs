//! The header every active message carries (after its inline payload).

pub use crate::INLINE_LIMIT;

/// Bytes of the header.
pub const HEADER: usize = 16;
const _: () = assert!(
    crate::SPARE == HEADER,
    "buffer() must leave room for the header"
);

/// What follows the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// The payload, in the same message.
    Inline,
    /// The payload arrives as a separate transfer carrying this tag.
    Rendezvous {
        /// The tag of the payload's transfer.
        tag: i32,
    },
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub port: u16,
    pub len: u32,
    pub body: Body,
}

impl Header {
    /// The 16 header bytes: port (2), kind (1), reserved (1), payload length (4), tag (4),
    /// reserved (4), all little-endian.
    pub fn encode(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0..2].copy_from_slice(&self.port.to_le_bytes());
        h[4..8].copy_from_slice(&self.len.to_le_bytes());
        if let Body::Rendezvous { tag } = self.body {
            h[2] = 1;
            h[8..12].copy_from_slice(&tag.to_le_bytes());
        }
        h
    }

    /// Reads the header from the last [`HEADER`] bytes of `b` (headers trail their inline
    /// payload); `None` if `b` is too short or the kind is unknown (a message that did not
    /// come from this layer).
    pub fn decode(b: &[u8]) -> Option<Header> {
        let h = b.get(b.len().checked_sub(HEADER)?..)?;
        let port = u16::from_le_bytes([h[0], h[1]]);
        let len = u32::from_le_bytes(h[4..8].try_into().ok()?);
        let body = match h[2] {
            0 => Body::Inline,
            1 => Body::Rendezvous {
                tag: i32::from_le_bytes(h[8..12].try_into().ok()?),
            },
            _ => return None,
        };
        Some(Header { port, len, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for h in [
            Header {
                port: 0,
                len: 0,
                body: Body::Inline,
            },
            Header {
                port: u16::MAX,
                len: u32::MAX,
                body: Body::Rendezvous { tag: i32::MAX },
            },
        ] {
            assert_eq!(Header::decode(&h.encode()), Some(h));
        }
        assert_eq!(Header::decode(&[0; 15]), None);
        let mut framed = b"payload".to_vec();
        let h = Header {
            port: 3,
            len: 7,
            body: Body::Inline,
        };
        framed.extend_from_slice(&h.encode());
        assert_eq!(Header::decode(&framed), Some(h));
        let mut bad = [0u8; HEADER];
        bad[2] = 9;
        assert_eq!(Header::decode(&bad), None);
    }
}
