//! The order of training examples: a seeded permutation computed per index, so an epoch needs
//! no memory and a resumed run finds its place directly.

/// A seeded pseudo-random permutation of `0..n`, computed per index (a 4-round Feistel network
/// on the smallest even-bit domain ≥ n, walking cycles back into range), so shuffling a
/// 400M-line file needs no memory and position `i` of an epoch can be found directly, which is
/// what makes resuming exact.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: usize, seed: u64) -> Self {
        let bits = (n.max(2) as u64 - 1).ilog2() + 1;
        let half_bits = bits.div_ceil(2);
        let mut state = seed;
        let keys = std::array::from_fn(|_| splitmix64(&mut state));
        Self {
            n: n as u64,
            half_bits,
            keys,
        }
    }

    /// The element at position `index` (< n).
    pub fn get(&self, index: usize) -> usize {
        debug_assert!((index as u64) < self.n);
        let mut x = index as u64;
        loop {
            x = self.feistel(x);
            if x < self.n {
                return x as usize;
            }
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for key in self.keys {
            let mut state = right ^ key;
            let mixed = splitmix64(&mut state) & mask;
            (left, right) = (right, left ^ mixed);
        }
        (left << self.half_bits) | right
    }
}

pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_permutation_that_depends_on_the_seed() {
        for n in [1, 2, 3, 10, 1000, 4097] {
            let p = Permutation::new(n, 7);
            let mut seen: Vec<usize> = (0..n).map(|i| p.get(i)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
        let a: Vec<usize> = (0..100).map(|i| Permutation::new(100, 1).get(i)).collect();
        let b: Vec<usize> = (0..100).map(|i| Permutation::new(100, 2).get(i)).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<_>>());
    }
}
