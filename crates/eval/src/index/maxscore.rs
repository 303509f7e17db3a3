//! Exact dynamic pruning, term at a time with MaxScore bounds (Moffat and Zobel's "continue"
//! strategy). In each block, once a top k is full, the query's terms are added in full,
//! shortest posting list first, while the bounds (query weight × the term's largest weight in
//! the block) of the terms left are large. Then the terms left (in SPLADE the light, frequent
//! ones, with the longest lists) are only looked up for the documents found so far that can
//! still reach the k-th score, largest bound first, and those that cannot are dropped after
//! each term. The documents left are scored again in query-term order, as the exhaustive
//! search sums, so the scores, the top k and its tie order are the exhaustive search's.

use super::{InvertedIndex, List, SCAN_CHUNK, Scratch as Exhaustive, Sparse, TopK, simd};

/// One query of a batch, searched a block at a time: its terms, bounds and top k so far.
struct Pruned {
    query: Vec<(usize, f32)>,
    bounds: Bounds,
    top: TopK,
}

/// Per-thread memory of the pruned search, reused across queries.
#[derive(Default)]
pub(super) struct Scratch {
    bounds: Vec<f64>,
    /// Query terms in the order they are added: shortest list first, then the lists left by
    /// decreasing bound.
    order: Vec<usize>,
    /// Documents that may still enter (block-local); their sums are in the accumulator.
    candidates: Vec<u16>,
    /// Each term's position in its block postings while documents are scored.
    cursors: Vec<usize>,
}

impl InvertedIndex {
    /// `block_max`, from the laid-out postings.
    pub(super) fn block_maxima(&self) -> Vec<f32> {
        let mut maxima = vec![0.0f32; self.vocab * self.blocks];
        for term in 0..self.vocab {
            for block in 0..self.blocks {
                let (_, weights) = self.block_postings(term, block);
                let best = weights.iter().fold(0.0f32, |m, &w| m.max(w));
                maxima[term * self.blocks + block] = best;
            }
        }
        maxima
    }

    /// The `k` best documents for each of `queries` (positive finite weights, any term ids),
    /// best first, as `search` finds them. Block by block, each query in turn: a block's
    /// postings of the terms the queries share (the frequent ones, the longest lists) are read
    /// from memory for the first and from the cache for the others.
    pub(super) fn search_pruned(
        &self,
        queries: &[&Sparse],
        k: usize,
        exhaustive: &mut Exhaustive,
        scratch: &mut Scratch,
    ) -> Vec<Vec<(u32, f32)>> {
        let mut searches: Vec<Pruned> = queries.iter().map(|q| self.start(q, k)).collect();
        for block in 0..self.blocks {
            for search in &mut searches {
                if search.top.floor() == 0.0 {
                    // Nothing to prune against until k documents are in.
                    self.score_block(&search.query, block, true, &mut search.top, exhaustive);
                } else {
                    let Pruned { query, bounds, top } = search;
                    self.prune_block(query, block, bounds, top, exhaustive, scratch);
                }
            }
        }
        searches.into_iter().map(|s| s.top.into_sorted()).collect()
    }

    fn start(&self, query: &Sparse, k: usize) -> Pruned {
        let query = self.known_terms(query);
        // An f32 sum of n terms is within n·ε of the exact sum: bounds get that slack, so no
        // document that could enter is dropped.
        let slack = 1.0 + 4.0 * (query.len() + 1) as f64 * f64::from(f32::EPSILON);
        Pruned {
            query,
            bounds: Bounds { slack },
            top: TopK::new(k),
        }
    }

    fn prune_block(
        &self,
        query: &[(usize, f32)],
        block: usize,
        bounds: &Bounds,
        top: &mut TopK,
        exhaustive: &mut Exhaustive,
        s: &mut Scratch,
    ) {
        let pass = BlockPass {
            query,
            block,
            bounds,
            floor: top.floor(),
        };
        let left = self.order_lists(&pass, s);
        let (taken, left) = self.add_short_lists(&pass, left, exhaustive, s);
        self.collect_candidates(exhaustive, left, pass.floor, bounds, s);
        self.add_long_lists(&pass, taken, left, exhaustive, s);
        self.offer_in_order(query, block, top, s);
    }

    /// Each list's bound in the block into `s.bounds`, the lists into `s.order` shortest first;
    /// returns the sum of the bounds.
    fn order_lists(&self, pass: &BlockPass, s: &mut Scratch) -> f64 {
        s.bounds.clear();
        s.bounds.extend(pass.query.iter().map(|&(term, q)| {
            f64::from(q) * f64::from(self.block_max[term * self.blocks + pass.block])
        }));
        // Short lists first: they cost little to add and, in SPLADE, carry the large weights,
        // so that the bound left to the long lists soon cannot bring in a new document.
        s.order.clear();
        s.order.extend(0..pass.query.len());
        s.order
            .sort_unstable_by_key(|&i| (self.list_length(pass, i), i));
        s.bounds.iter().sum()
    }

    fn list_length(&self, pass: &BlockPass, i: usize) -> usize {
        self.block_postings(pass.query[i].0, pass.block).0.len()
    }

    /// Every posting into the accumulator for the lists shorter than a quarter of the block
    /// (cheaper than looking candidates up in them), and for the others until their bounds
    /// could at most double a sum that can still enter: stopping as soon as no new document
    /// can enter leaves most documents candidates, slower than scoring every posting
    /// (measured on `lsr bench retrieve`). Returns how many lists were added and the bound left.
    fn add_short_lists(
        &self,
        pass: &BlockPass,
        mut left: f64,
        exhaustive: &mut Exhaustive,
        s: &Scratch,
    ) -> (usize, f64) {
        let long = (1usize << self.block_bits) / 4;
        let mut taken = 0;
        while taken < pass.query.len()
            && (pass.bounds.reach(2.0 * left, pass.floor)
                || self.list_length(pass, s.order[taken]) < long)
        {
            let i = s.order[taken];
            let (term, q) = pass.query[i];
            self.list(term, pass.block)
                .add(&mut exhaustive.block[..], q);
            left = (left - s.bounds[i]).max(0.0);
            taken += 1;
        }
        (taken, left)
    }

    /// The long lists left, largest bound first, into the candidates' sums, dropping the
    /// candidates that can no longer make up the difference (soonest with the largest bounds).
    fn add_long_lists(
        &self,
        pass: &BlockPass,
        taken: usize,
        mut left: f64,
        exhaustive: &mut Exhaustive,
        s: &mut Scratch,
    ) {
        let by_bound = &s.bounds;
        s.order[taken..]
            .sort_unstable_by(|&a, &b| by_bound[b].total_cmp(&by_bound[a]).then(a.cmp(&b)));
        let sums = &mut exhaustive.block[..1 << self.block_bits];
        for &i in &s.order[taken..] {
            if s.candidates.is_empty() {
                break;
            }
            left = (left - s.bounds[i]).max(0.0);
            let (term, q) = pass.query[i];
            (self.list(term, pass.block)).add_to_candidates(sums, q, &s.candidates);
            keep_reaching(
                &mut s.candidates,
                sums,
                pass.bounds.threshold(left, pass.floor),
            );
        }
        sums.fill(0.0);
    }

    /// The accumulated documents that can reach `floor` with the bounds `left`, in document
    /// order; every other document's sum is set to −∞, so that what is added to it later
    /// never makes it one.
    fn collect_candidates(
        &self,
        exhaustive: &mut Exhaustive,
        left: f64,
        floor: f32,
        bounds: &Bounds,
        s: &mut Scratch,
    ) {
        let threshold = bounds.threshold(left, floor);
        // Past the last document nothing is ever added: the whole block is scanned.
        let block = &mut exhaustive.block[..1 << self.block_bits];
        s.candidates.clear();
        let done = simd::collect_reaching(block, threshold, &mut s.candidates);
        collect_reaching(&mut block[done..], done, threshold, &mut s.candidates);
    }

    /// Scores the candidates again, each in query-term order, and offers them; documents come
    /// in increasing order, so each term's cursor only moves forward.
    fn offer_in_order(
        &self,
        query: &[(usize, f32)],
        block: usize,
        top: &mut TopK,
        s: &mut Scratch,
    ) {
        let lists: Vec<List> = (query.iter())
            .map(|&(term, _)| self.list(term, block))
            .collect();
        s.cursors.clear();
        s.cursors.resize(query.len(), 0);
        let start = block << self.block_bits;
        for &doc in &s.candidates {
            let mut score = 0.0f32;
            for ((cursor, list), &(_, q)) in s.cursors.iter_mut().zip(&lists).zip(query) {
                // A dense row's 0 adds nothing, as a missing posting does.
                score += q * list.weight(doc, cursor);
            }
            let global = start + doc as usize;
            top.offer(score, self.id_rank[global], global as u32);
        }
    }
}

/// Whether a bound can reach the k-th score, with the slack of f32 summation.
struct Bounds {
    slack: f64,
}

impl Bounds {
    fn reach(&self, bound: f64, floor: f32) -> bool {
        bound * self.slack >= f64::from(floor)
    }

    /// The smallest sum that can still reach `floor` with the bounds `left` (rounded down).
    fn threshold(&self, left: f64, floor: f32) -> f32 {
        ((f64::from(floor) / self.slack - left) as f32).next_down()
    }
}

/// One query in one block: what each of its passes reads.
struct BlockPass<'q> {
    query: &'q [(usize, f32)],
    block: usize,
    bounds: &'q Bounds,
    /// The score a document must beat to enter the top k.
    floor: f32,
}

/// The positions (from `offset`) of the sums that are positive and reach `threshold` onto
/// `kept`; the others' sums become −∞. Most chunks of 16 fail as a whole on their maximum.
fn collect_reaching(sums: &mut [f32], offset: usize, threshold: f32, kept: &mut Vec<u16>) {
    // Branch-free: which documents pass is as unpredictable as a coin.
    let mut n = kept.len();
    kept.resize(n + sums.len(), 0);
    for (c, chunk) in sums.chunks_mut(SCAN_CHUNK).enumerate() {
        let best = chunk.iter().fold(0.0f32, |m, &x| m.max(x));
        if best > 0.0 && best >= threshold {
            for (i, sum) in chunk.iter_mut().enumerate() {
                let keep = *sum > 0.0 && *sum >= threshold;
                kept[n] = (offset + c * SCAN_CHUNK + i) as u16;
                n += usize::from(keep);
                *sum = if keep { *sum } else { f32::NEG_INFINITY };
            }
        } else {
            chunk.fill(f32::NEG_INFINITY);
        }
    }
    kept.truncate(n);
}

/// Keeps the candidates whose sum reaches `threshold`, in order; the others' sums become −∞.
fn keep_reaching(candidates: &mut Vec<u16>, sums: &mut [f32], threshold: f32) {
    let mut kept = 0;
    for j in 0..candidates.len() {
        let doc = candidates[j];
        let sum = &mut sums[doc as usize];
        let keep = *sum >= threshold;
        candidates[kept] = doc;
        kept += usize::from(keep);
        *sum = if keep { *sum } else { f32::NEG_INFINITY };
    }
    candidates.truncate(kept);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sums below, at and above the threshold, 0 and −∞: this CPU's collection keeps what the
    /// portable one keeps and leaves the same sums.
    #[test]
    fn candidates_are_collected_alike_on_every_path() {
        let mut next = crate::index::tests::lcg(5);
        let values = [0.0, f32::NEG_INFINITY, 1.0, 1.5, 2.0, 1.0f32.next_down()];
        let sums: Vec<f32> = (0..1000)
            .map(|_| values[(next() >> 60) as usize % 6])
            .collect();
        let (mut portable, mut kept_portable) = (sums.clone(), Vec::new());
        collect_reaching(&mut portable, 0, 1.0, &mut kept_portable);
        let (mut fast, mut kept_fast) = (sums.clone(), Vec::new());
        let done = simd::collect_reaching(&mut fast, 1.0, &mut kept_fast);
        collect_reaching(&mut fast[done..], done, 1.0, &mut kept_fast);
        assert_eq!(kept_fast, kept_portable);
        assert_eq!(fast, portable);
        assert!(!kept_fast.is_empty() && kept_fast.len() < sums.len());
    }
}
