//! What crosses ranks as bytes.

/// Data that can cross ranks: written to bytes by the rank that holds it, and read back into
/// another rank's replica in place (a replica keeps its allocation from one copy to the next).
///
/// ```
/// use tactor::job::Wire;
///
/// let mut out = Vec::new();
/// vec![1.5f64, 2.5].encode(&mut out);
/// let mut replica = vec![0.0f64; 2];
/// replica.decode(&out);
/// assert_eq!(replica, [1.5, 2.5]);
/// ```
pub trait Wire: Send + Sync + 'static {
    /// Appends this value's bytes to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Sets this value to the one `bytes` (from [`Wire::encode`]) holds. Panics on bytes that
    /// cannot be one (the copy task then fails, poisoning what depends on it).
    fn decode(&mut self, bytes: &[u8]);

    /// This value's bytes as it holds them, when they are exactly what [`Wire::encode`]
    /// appends: a sender then copies them straight to the network, with no buffer between.
    /// `None` (the default) has them encoded first.
    ///
    /// ```
    /// use tactor::job::Wire;
    ///
    /// let v = vec![1u16, 2];
    /// let mut out = Vec::new();
    /// v.encode(&mut out);
    /// assert_eq!(v.as_bytes(), Some(&out[..]));
    /// ```
    fn as_bytes(&self) -> Option<&[u8]> {
        None
    }
}

impl<T: bytemuck::Pod + Send + Sync> Wire for Vec<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(bytemuck::cast_slice(self));
    }

    fn decode(&mut self, bytes: &[u8]) {
        let size = std::mem::size_of::<T>().max(1);
        assert_eq!(
            bytes.len() % size,
            0,
            "{} bytes are not whole values",
            bytes.len()
        );
        self.resize(bytes.len() / size, T::zeroed());
        bytemuck::cast_slice_mut::<T, u8>(self).copy_from_slice(bytes);
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        Some(bytemuck::cast_slice(self))
    }
}

impl<T: bytemuck::Pod + Send + Sync, const N: usize> Wire for [T; N] {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(bytemuck::cast_slice(self));
    }

    fn decode(&mut self, bytes: &[u8]) {
        bytemuck::cast_slice_mut::<T, u8>(self).copy_from_slice(bytes);
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        Some(bytemuck::cast_slice(self))
    }
}

/// No data: what an event that crosses ranks carries ([`Spmd::launch`](super::Spmd::launch)).
impl Wire for () {
    fn encode(&self, _: &mut Vec<u8>) {}

    fn decode(&mut self, bytes: &[u8]) {
        assert!(bytes.is_empty(), "{} bytes for no data", bytes.len());
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        Some(&[])
    }
}

macro_rules! wire_plain {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }

            fn decode(&mut self, bytes: &[u8]) {
                *self = <$t>::from_le_bytes(bytes.try_into().expect("one value's bytes"));
            }

            fn as_bytes(&self) -> Option<&[u8]> {
                // As held is as encoded only where the machine is little-endian.
                cfg!(target_endian = "little").then(|| bytemuck::bytes_of(self))
            }
        }
    )*};
}
wire_plain!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

#[cfg(test)]
mod tests {
    use super::Wire;

    /// Where a value offers its bytes as held, they are exactly what it encodes to.
    fn same_as_encoded<T: Wire>(v: T) {
        let mut out = Vec::new();
        v.encode(&mut out);
        assert_eq!(v.as_bytes(), Some(&out[..]));
    }

    #[test]
    fn bytes_as_held_are_the_encoded_bytes() {
        same_as_encoded(vec![1.5f64, -2.0]);
        same_as_encoded(Vec::<u8>::new());
        same_as_encoded([3u32, 4, 5]);
        same_as_encoded(());
        same_as_encoded(0x0102_0304_0506_0708u64);
        same_as_encoded(-7i16);
        same_as_encoded(1.25f32);
        same_as_encoded(9u8);
    }
}
