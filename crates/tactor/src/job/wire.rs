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
}

impl<T: bytemuck::Pod + Send + Sync, const N: usize> Wire for [T; N] {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(bytemuck::cast_slice(self));
    }

    fn decode(&mut self, bytes: &[u8]) {
        bytemuck::cast_slice_mut::<T, u8>(self).copy_from_slice(bytes);
    }
}

/// No data: what an event that crosses ranks carries ([`Spmd::launch`](super::Spmd::launch)).
impl Wire for () {
    fn encode(&self, _: &mut Vec<u8>) {}

    fn decode(&mut self, bytes: &[u8]) {
        assert!(bytes.is_empty(), "{} bytes for no data", bytes.len());
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
        }
    )*};
}
wire_plain!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);
