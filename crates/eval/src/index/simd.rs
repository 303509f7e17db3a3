//! The index's AVX-512 kernels, for CPUs that have it (the default build targets SSE2). Each
//! does what the portable loop beside its caller does, bit for bit: one f32 product and one
//! f32 sum per posting, never fused, and the same comparisons. Each says how much it did, so
//! that without AVX-512 the portable loop does it all.

/// Whether this CPU runs the kernels below (checked once, then cached by the standard library).
#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("popcnt")
}

/// `sums[i] += q * row[i]` for the first whole sixteens; returns how many it added.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn add_dense(sums: &mut [f32], q: f32, row: &[f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { x86::add_dense(sums, q, row) };
    }
    0
}

/// A bitmap's postings times `q` into `sums`: its 64-document `words` and the postings
/// `before` each (`list::Bitmap`); false (nothing added) without AVX-512.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn add_bits(
    sums: &mut [f32],
    q: f32,
    (words, before): (&[u64], &[u32]),
    weights: &[f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        let total = before.last().copied().unwrap_or(0) as usize
            + words.last().map_or(0, |w| w.count_ones() as usize);
        assert_eq!(total, weights.len(), "a bitmap counts its list's postings");
        let sums = &mut sums[..words.len() * 64];
        // SAFETY: the CPU has AVX-512F and POPCNT, and the bits count the weights.
        unsafe { x86::add_bits(sums, q, (words, before), weights) };
        return true;
    }
    false
}

/// For the first whole sixteens of `sums`: appends the positions of the sums that are
/// positive and reach `threshold` to `kept`, and sets the others to −∞. Returns how many sums
/// it went through.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn collect_reaching(sums: &mut [f32], threshold: f32, kept: &mut Vec<u16>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { x86::collect_reaching(sums, threshold, kept) };
    }
    0
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) fn add_dense(sums: &mut [f32], q: f32, row: &[f32]) -> usize {
        let whole = sums.len().min(row.len()) / 16 * 16;
        let qv = _mm512_set1_ps(q);
        for at in (0..whole).step_by(16) {
            // SAFETY: `at + 16 <= whole`, within both slices.
            unsafe {
                let weights = _mm512_loadu_ps(row.as_ptr().add(at));
                let sum = sums.as_mut_ptr().add(at);
                let added = _mm512_add_ps(_mm512_loadu_ps(sum), _mm512_mul_ps(qv, weights));
                _mm512_storeu_ps(sum, added);
            }
        }
        whole
    }

    /// Sixteen documents at a time: their weights expanded into the lanes of the documents
    /// that have one, and added to those lanes only.
    ///
    /// # Safety
    /// `sums` has 64 lanes a word; the bits count `weights`.
    #[target_feature(enable = "avx512f,popcnt")]
    pub(super) unsafe fn add_bits(
        sums: &mut [f32],
        q: f32,
        (words, before): (&[u64], &[u32]),
        weights: &[f32],
    ) {
        let qv = _mm512_set1_ps(q);
        let (sums, weights) = (sums.as_mut_ptr(), weights.as_ptr());
        for (w, (&word, &before)) in words.iter().zip(before).enumerate() {
            // SAFETY: each group's expand reads its mask's popcount of weights, from the
            // word's first weight plus the groups' before it, within `weights`; the word's 64
            // lanes lie within `sums`.
            unsafe {
                let (sums, weights) = (sums.add(w * 64), weights.add(before as usize));
                // A batch's lists in a block outgrow the L2 cache, so the weights come from
                // further out: asked for a kibibyte ahead, the benchmark ran 5–10% faster.
                _mm_prefetch::<_MM_HINT_T0>(weights.wrapping_add(256) as *const i8);
                // The groups' first weights apart, so that no group waits on the one before.
                let group = |g: u32| (word & ((1u64 << (16 * g)) - 1)).count_ones() as usize;
                add_group(sums, weights, word as u16, qv);
                add_group(sums.add(16), weights.add(group(1)), (word >> 16) as u16, qv);
                add_group(sums.add(32), weights.add(group(2)), (word >> 32) as u16, qv);
                add_group(sums.add(48), weights.add(group(3)), (word >> 48) as u16, qv);
            }
        }
    }

    /// `q ×` the popcount of `mask` weights into the lanes of `sums` that `mask` sets.
    ///
    /// # Safety
    /// `weights` has that many weights, `sums` 16 lanes.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add_group(sums: *mut f32, weights: *const f32, mask: u16, qv: __m512) {
        // SAFETY: as the caller promises.
        unsafe {
            // A masked load of the group's weights, then their expansion in registers: on an
            // AMD EPYC (Zen 4) the uniform benchmark ran 6–8% faster this way than with
            // the expand's load form (docs/perf-cpu.md).
            let first = ((1u32 << mask.count_ones()) - 1) as u16;
            let packed = _mm512_maskz_loadu_ps(first, weights);
            let added = _mm512_mul_ps(qv, _mm512_maskz_expand_ps(mask, packed));
            let old = _mm512_loadu_ps(sums);
            _mm512_storeu_ps(sums, _mm512_mask_add_ps(old, mask, old, added));
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn collect_reaching(sums: &mut [f32], threshold: f32, kept: &mut Vec<u16>) -> usize {
        let whole = sums.len() / 16 * 16;
        let (zero, floor) = (_mm512_setzero_ps(), _mm512_set1_ps(threshold));
        let dropped = _mm512_set1_ps(f32::NEG_INFINITY);
        for at in (0..whole).step_by(16) {
            // SAFETY: `at + 16 <= whole`, within `sums`.
            unsafe {
                let sum = sums.as_mut_ptr().add(at);
                let v = _mm512_loadu_ps(sum);
                let keep = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, zero)
                    & _mm512_cmp_ps_mask::<_CMP_GE_OQ>(v, floor);
                _mm512_storeu_ps(sum, _mm512_mask_blend_ps(keep, dropped, v));
                let mut keep = keep;
                while keep != 0 {
                    kept.push((at + keep.trailing_zeros() as usize) as u16);
                    keep &= keep - 1;
                }
            }
        }
        whole
    }
}
