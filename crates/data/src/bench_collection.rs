//! A synthetic SPLADE-like collection for the retrieval benchmark, generated identically by
//! `scripts/bench/retrieve.py`: term ids drawn from a Zipf distribution over the vocabulary,
//! weights k/64 for k in 1..=255. Such weights make every query–document score exact in f32
//! (products are multiples of 2⁻¹², sums stay below 2¹¹), so any summation order gives the
//! same scores and two exact engines must return identical top-k lists. The weights are either
//! independent of the term (`Uniform`) or, as SPLADE's are, small for frequent terms and large
//! for rare ones (`Splade`).

/// splitmix64 of `counter`: a stateless stream both languages compute alike.
pub fn splitmix64(counter: u64) -> u64 {
    let mut z = counter.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform draw in [0, 1) from the top 53 bits.
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// P(term = t) ∝ 1 / (t + 1)^exponent.
    pub fn new(vocab: usize, exponent: f64) -> Self {
        let mut cdf = Vec::with_capacity(vocab);
        let mut total = 0.0;
        for t in 0..vocab {
            total += 1.0 / ((t + 1) as f64).powf(exponent);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Self { cdf }
    }

    fn sample(&self, u: f64) -> u32 {
        (self
            .cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)) as u32
    }
}

/// How a term's weight is drawn: k/64 with k uniform in 1..=cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightShape {
    /// cap 255 for every term.
    Uniform,
    /// cap 16 + 24 · ⌊log2(rank + 1)⌋ (at most 255) for the term of Zipf rank `rank`: the most
    /// frequent terms weigh at most 1/4, terms past rank 1023 up to ~4, as SPLADE weighs
    /// function words and expansions low and rare terms high.
    Splade,
}

impl WeightShape {
    fn cap(self, term: u32) -> u64 {
        match self {
            Self::Uniform => 255,
            Self::Splade => (16 + 24 * u64::from((term + 1).ilog2())).min(255),
        }
    }
}

/// Vector `row` of a collection seeded by `seed`: `draws` Zipf terms (duplicates merged, so
/// slightly fewer non-zeros), sorted by term id.
pub fn sparse_vector(
    zipf: &Zipf,
    shape: WeightShape,
    seed: u64,
    row: u64,
    draws: usize,
) -> Vec<(u32, f32)> {
    let base = seed
        .wrapping_mul(0x1000_0000_0000)
        .wrapping_add(row.wrapping_mul(2 * draws as u64));
    let mut terms: Vec<(u32, f32)> = (0..draws as u64)
        .map(|i| {
            let term = zipf.sample(unit(splitmix64(base + 2 * i)));
            let weight = (1 + splitmix64(base + 2 * i + 1) % shape.cap(term)) as f32 / 64.0;
            (term, weight)
        })
        .collect();
    terms.sort_by_key(|&(t, _)| t);
    terms.dedup_by_key(|&mut (t, _)| t);
    terms
}
