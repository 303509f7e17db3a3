//! libm's `erff` sixteen values at a time, bit for bit, for the exact GELU on flex. Why: the
//! scalar `erff` (a branch and a division per value) was 6% of an encoding batch there
//! (docs/perf-cpu.md). Values in its two polynomial ranges (2⁻²⁸ ≤ |x| < 1.25: a GELU input
//! within ±1.77, where most lie) are computed in lanes by the same operations in the same
//! order, which Rust never contracts into fused multiply-adds; the rest (the ranges that call
//! `expf`, tiny values, infinities, NaN) go to libm itself.
//!
//! The ranges and coefficients (their bits, as libm's comments give them) are libm 0.2.16's
//! (src/math/erff.rs), from FreeBSD's s_erff.c:
//!
//! Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
//!
//! Developed at SunPro, a Sun Microsystems, Inc. business.
//! Permission to use, copy, modify, and distribute this
//! software is freely granted, provided that this notice
//! is preserved.

/// Values per call of [`erff16`]: one AVX-512 register.
pub const LANES: usize = 16;

const ERX: f32 = f32::from_bits(0x3f58_560b);
// erf on [0, 0.84375]: x + x · P(x²) / Q(x²).
const PP0: f32 = f32::from_bits(0x3e03_75d4);
const PP1: f32 = f32::from_bits(0xbea6_6beb);
const PP2: f32 = f32::from_bits(0xbce9_528f);
const PP3: f32 = f32::from_bits(0xbbbd_1489);
const PP4: f32 = f32::from_bits(0xb7c7_56b1);
const QQ1: f32 = f32::from_bits(0x3ecb_bbce);
const QQ2: f32 = f32::from_bits(0x3d85_2a63);
const QQ3: f32 = f32::from_bits(0x3ba6_8116);
const QQ4: f32 = f32::from_bits(0x390a_ee49);
const QQ5: f32 = f32::from_bits(0xb684_e21a);
// erf on [0.84375, 1.25]: erx + P(|x| − 1) / Q(|x| − 1), through erfc.
const PA0: f32 = f32::from_bits(0xbb1a_cdc6);
const PA1: f32 = f32::from_bits(0x3ed4_6805);
const PA2: f32 = f32::from_bits(0xbebe_9208);
const PA3: f32 = f32::from_bits(0x3ea2_fe54);
const PA4: f32 = f32::from_bits(0xbde3_1cc2);
const PA5: f32 = f32::from_bits(0x3d11_51b3);
const PA6: f32 = f32::from_bits(0xbb0d_f9c0);
const QA1: f32 = f32::from_bits(0x3dd9_f331);
const QA2: f32 = f32::from_bits(0x3f0a_5785);
const QA3: f32 = f32::from_bits(0x3d93_1ae7);
const QA4: f32 = f32::from_bits(0x3e01_3307);
const QA5: f32 = f32::from_bits(0x3c5f_6e13);
const QA6: f32 = f32::from_bits(0x3c44_5aa3);

/// The bit patterns of |x| each polynomial covers: from 2⁻²⁸ to 0.84375, and to 1.25.
const SMALL: std::ops::Range<u32> = 0x3180_0000..0x3f58_0000;
const MIDDLE: std::ops::Range<u32> = 0x3f58_0000..0x3fa0_0000;

/// `libm::erff` of each of sixteen values.
#[inline(always)]
pub fn erff16(x: [f32; LANES]) -> [f32; LANES] {
    let mut out = [0.0; LANES];
    let mut elsewhere = false;
    for i in 0..LANES {
        let bits = x[i].to_bits() & 0x7fff_ffff;
        elsewhere |= !(SMALL.start..MIDDLE.end).contains(&bits);
        // Both, then one chosen: a select the lanes can share, where a branch would not be.
        let (small, middle) = (small(x[i]), middle(x[i]));
        out[i] = if bits < MIDDLE.start { small } else { middle };
    }
    if elsewhere {
        for (out, &x) in out.iter_mut().zip(&x) {
            if !(SMALL.start..MIDDLE.end).contains(&(x.to_bits() & 0x7fff_ffff)) {
                *out = libm::erff(x);
            }
        }
    }
    out
}

/// `erff(x)` for |x| in [`SMALL`].
#[inline(always)]
fn small(x: f32) -> f32 {
    let z = x * x;
    let r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
    let s = 1.0 + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
    let y = r / s;
    x + x * y
}

/// `erff(x)` for |x| in [`MIDDLE`]: one minus libm's `erfc1`, the sign put back.
#[inline(always)]
fn middle(x: f32) -> f32 {
    let s = x.abs() - 1.0;
    let p = PA0 + s * (PA1 + s * (PA2 + s * (PA3 + s * (PA4 + s * (PA5 + s * PA6)))));
    let q = 1.0 + s * (QA1 + s * (QA2 + s * (QA3 + s * (QA4 + s * (QA5 + s * QA6)))));
    let y = 1.0 - (1.0 - ERX - p / q);
    if x.is_sign_negative() { -y } else { y }
}

/// `f` on each sixteen consecutive values of `values` in place (the last ones padded with zeros,
/// which are written nowhere), compiled for AVX-512 where the CPU has it so that sixteen lanes
/// are one register; elsewhere as the target's vectors allow.
pub fn each_sixteen(values: &mut [f32], f: impl Fn(&mut [f32; LANES])) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { each_sixteen_avx512(values, f) };
    }
    each_sixteen_portable(values, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn each_sixteen_avx512(values: &mut [f32], f: impl Fn(&mut [f32; LANES])) {
    each_sixteen_portable(values, f)
}

#[inline(always)]
fn each_sixteen_portable(values: &mut [f32], f: impl Fn(&mut [f32; LANES])) {
    let mut chunks = values.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        f(chunk.try_into().expect("chunks of sixteen"));
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mut padded = [0.0; LANES];
        padded[..rest.len()].copy_from_slice(rest);
        f(&mut padded);
        let len = rest.len();
        rest.copy_from_slice(&padded[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 251st f32 bit pattern from 0 up to past 8 (both signs: all of both polynomial ranges
    /// and their edges, tiny values, the expf ranges), and the specials, against libm bit for
    /// bit; NaNs compared as NaNs.
    #[test]
    fn erff16_is_libms_erff_bit_for_bit() {
        let mut inputs: Vec<f32> = (0..0x4110_0000u32)
            .step_by(251)
            .map(f32::from_bits)
            .collect();
        inputs.extend([SMALL.start, SMALL.end, MIDDLE.end, 0x40c0_0000].map(f32::from_bits));
        inputs.extend([f32::INFINITY, f32::NAN, f32::MIN_POSITIVE, 1e-40, 0.0]);
        let negatives: Vec<f32> = inputs.iter().map(|x| -x).collect();
        inputs.extend(negatives);
        let mut got = inputs.clone();
        each_sixteen(&mut got, |lanes| *lanes = erff16(*lanes));
        for (x, got) in inputs.iter().zip(&got) {
            let expected = libm::erff(*x);
            let same = got.to_bits() == expected.to_bits() || (got.is_nan() && expected.is_nan());
            assert!(same, "erff({x:e}): {got:e} against libm's {expected:e}");
        }
    }

    #[test]
    fn a_ragged_tail_is_computed_and_nothing_past_it_is_written() {
        let mut values = [0.3f32, -0.9, 1.1, 7.0, -2.0];
        each_sixteen(&mut values[..3], |lanes| *lanes = erff16(*lanes));
        assert_eq!(&values[..3], &[0.3f32, -0.9, 1.1].map(libm::erff));
        assert_eq!(&values[3..], &[7.0, -2.0]);
    }
}
