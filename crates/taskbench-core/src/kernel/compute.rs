//! The compute kernels. `compute_bound` must reach the machine's peak, so on x86-64 with AVX2
//! and FMA (detected at run time) it runs 16 independent 4-wide fused multiply-add chains: enough
//! in flight to cover the FMA latency on both FMA ports. Elsewhere a portable loop does the same
//! arithmetic unfused.

/// Whether the fused AVX2 path is used on this CPU.
pub fn uses_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// 64 doubles, each updated `a = a*a + a` for `iterations` rounds; returns a value derived from
/// all of them so the work cannot be optimised away.
///
/// ```
/// let r = taskbench_core::kernel::compute_bound(3);
/// assert!(r > 0.0);
/// ```
pub fn compute_bound(iterations: i64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if uses_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above), which is all the
        // target-feature function requires.
        return unsafe { compute_bound_fma(iterations) };
    }
    compute_bound_portable(iterations)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn compute_bound_fma(iterations: i64) -> f64 {
    use std::arch::x86_64::*;
    let mut a = [_mm256_set_pd(1.0, 2.0, 3.0, 4.0); 16];
    for _ in 0..iterations {
        for v in a.iter_mut() {
            *v = _mm256_fmadd_pd(*v, *v, *v);
        }
    }
    let mut sum = _mm256_setzero_pd();
    for v in a {
        sum = _mm256_add_pd(sum, v);
    }
    let lo = _mm256_castpd256_pd128(sum);
    let hi = _mm256_extractf128_pd::<1>(sum);
    let pair = _mm_add_pd(lo, hi);
    _mm_cvtsd_f64(_mm_add_pd(pair, _mm_unpackhi_pd(pair, pair)))
}

fn compute_bound_portable(iterations: i64) -> f64 {
    let mut a = [0.0f64; 64];
    for (j, x) in a.iter_mut().enumerate() {
        *x = (4 - (j % 4)) as f64;
    }
    for _ in 0..iterations {
        for x in a.iter_mut() {
            *x = *x * *x + *x;
        }
    }
    a.iter().sum()
}

/// The reference's second compute kernel: `c[i] += a[i] * b[i]` over 32 elements, N times.
pub fn compute_bound2(iterations: i64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if uses_fma() {
        // SAFETY: AVX2 and FMA are present (checked just above).
        return unsafe { compute_bound2_fma(iterations) };
    }
    compute_bound2_portable(iterations)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn compute_bound2_fma(iterations: i64) -> f64 {
    let a = [1.2345f64; 32];
    let b = [1.010101f64; 32];
    let mut c = [0.0f64; 32];
    for _ in 0..iterations {
        for i in 0..32 {
            c[i] = a[i].mul_add(b[i], c[i]);
        }
    }
    c.iter().sum()
}

fn compute_bound2_portable(iterations: i64) -> f64 {
    let a = [1.2345f64; 32];
    let b = [1.010101f64; 32];
    let mut c = [0.0f64; 32];
    for _ in 0..iterations {
        for i in 0..32 {
            c[i] += a[i] * b[i];
        }
    }
    c.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_and_portable_paths_agree_before_overflow() {
        // Values overflow to infinity after a few rounds; compare while they are finite.
        for n in 0..4 {
            let p = compute_bound_portable(n);
            let f = compute_bound(n);
            assert!((p - f).abs() <= 1e-9 * p.abs(), "n={n}: {p} vs {f}");
        }
        let p2 = compute_bound2_portable(10);
        let f2 = compute_bound2(10);
        assert!((p2 - f2).abs() < 1e-9 * p2.abs());
    }
}
