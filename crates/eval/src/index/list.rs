//! One term's postings in one block, in the form that scores it fastest: a sorted list of
//! documents, a bitmap of them beside their weights, or a dense row. Every form adds
//! `q × weight` to a document's sum as one f32 product and one f32 sum, so the sums are
//! bit for bit those of the list, whichever form a block has.

use super::simd;

/// How a block is kept besides its list of postings.
#[derive(Clone)]
pub(super) enum Form {
    /// The list alone.
    Postings,
    /// Middle density: a bit per document, added sixteen documents at a time.
    Bits(Bitmap),
    /// One weight per document, 0 where it has none.
    Dense(Box<[f32]>),
}

/// The documents of a block's postings as bits, 64 to a word, with the postings before each
/// word: the weights of word `w` are the list's from `before[w]` on, in document order.
#[derive(Clone)]
pub(super) struct Bitmap {
    pub(super) words: Box<[u64]>,
    pub(super) before: Box<[u32]>,
}

impl Bitmap {
    pub(super) fn new(docs: &[u16], len: usize) -> Self {
        let mut words = vec![0u64; len.div_ceil(64)].into_boxed_slice();
        for &doc in docs {
            words[doc as usize / 64] |= 1 << (doc % 64);
        }
        let mut before = Vec::with_capacity(words.len());
        let mut count = 0;
        for word in &words {
            before.push(count);
            count += word.count_ones();
        }
        Self {
            words,
            before: before.into_boxed_slice(),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 8 + self.before.len() * 4
    }
}

/// A block as the searches read it.
pub(super) enum List<'a> {
    Postings(&'a [u16], &'a [f32]),
    /// The bitmap, and the list it was made from (for CPUs without AVX-512).
    Bits(&'a Bitmap, &'a [u16], &'a [f32]),
    Dense(&'a [f32]),
}

impl List<'_> {
    /// Every posting times `q` into `sums` (indexed by block-local document).
    pub(super) fn add(&self, sums: &mut [f32], q: f32) {
        match *self {
            List::Postings(docs, weights) => add_postings(sums, q, docs, weights),
            List::Bits(bits, docs, weights) => {
                if !simd::add_bits(sums, q, (&bits.words, &bits.before), weights) {
                    add_postings(sums, q, docs, weights)
                }
            }
            List::Dense(row) => add_dense(sums, q, row),
        }
    }

    /// The postings times `q` into the sums of `candidates` (block-local, increasing), from
    /// the cheaper side: each candidate looked up, or every posting added (to a dropped
    /// document's −∞ it adds nothing that matters).
    pub(super) fn add_to_candidates(&self, sums: &mut [f32], q: f32, candidates: &[u16]) {
        if candidates.is_empty() {
            return;
        }
        match *self {
            List::Postings(docs, weights) => {
                // A lookup (a gallop: branches the CPU cannot predict) costs about as much as
                // 64 sequential additions, measured on the retrieval benchmark.
                let postings = docs.len();
                let per_candidate = 64 + 2 * (postings / candidates.len() + 1).ilog2() as usize;
                if candidates.len() * per_candidate >= postings {
                    return self.add(sums, q);
                }
                let mut at = 0;
                for &doc in candidates {
                    at = seek(docs, at, doc);
                    if at == docs.len() {
                        break;
                    }
                    if docs[at] == doc {
                        sums[doc as usize] += q * weights[at];
                    }
                }
            }
            // A lookup costs about what sixteen documents' addition costs, or eight of a row.
            List::Bits(bits, ..) if candidates.len() * 16 >= bits.words.len() * 64 => {
                self.add(sums, q)
            }
            List::Dense(row) if candidates.len() * 8 >= row.len() => self.add(sums, q),
            _ => {
                let mut cursor = 0;
                for &doc in candidates {
                    sums[doc as usize] += q * self.weight(doc, &mut cursor);
                }
            }
        }
    }

    /// The weight of `doc` (0 without a posting). `cursor` serves a list's successive
    /// lookups, which must come in increasing document order.
    pub(super) fn weight(&self, doc: u16, cursor: &mut usize) -> f32 {
        match *self {
            List::Dense(row) => row[doc as usize],
            List::Bits(bits, _, weights) => {
                let (w, bit) = (doc as usize / 64, doc % 64);
                let word = bits.words[w];
                if word >> bit & 1 == 0 {
                    return 0.0;
                }
                let below = (word & ((1u64 << bit) - 1)).count_ones();
                weights[(bits.before[w] + below) as usize]
            }
            List::Postings(docs, weights) => {
                *cursor = seek(docs, *cursor, doc);
                if *cursor < docs.len() && docs[*cursor] == doc {
                    weights[*cursor]
                } else {
                    0.0
                }
            }
        }
    }
}

fn add_postings(sums: &mut [f32], q: f32, docs: &[u16], weights: &[f32]) {
    for (&doc, &weight) in docs.iter().zip(weights) {
        sums[doc as usize] += q * weight;
    }
}

/// Adds `q ×` a dense row to the sums: adding its zeros leaves a sum as it was.
fn add_dense(sums: &mut [f32], q: f32, row: &[f32]) {
    let done = simd::add_dense(sums, q, row);
    add_dense_portable(&mut sums[done..], q, &row[done..]);
}

fn add_dense_portable(sums: &mut [f32], q: f32, row: &[f32]) {
    for (sum, &weight) in sums.iter_mut().zip(row) {
        *sum += q * weight;
    }
}

/// The first position at or after `from` whose document is not below `doc` (galloping, then
/// binary search: cheap both for the next posting and for a far one).
fn seek(docs: &[u16], from: usize, doc: u16) -> usize {
    let mut step = 1;
    let mut low = from;
    let mut high = from;
    while high < docs.len() && docs[high] < doc {
        low = high + 1;
        high = (high + step).min(docs.len());
        step *= 2;
    }
    low + docs[low..high.min(docs.len())].partition_point(|&d| d < doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists of every density, weights whose sums depend on their order: each form adds and
    /// looks up what the list does, bit for bit, on this CPU's path and the portable one.
    #[test]
    fn every_form_adds_what_the_list_adds() {
        let mut next = crate::index::tests::unit(11);
        let len = 1000;
        for density in [0.0, 0.01, 0.2, 0.5, 0.9, 1.0] {
            let docs: Vec<u16> = (0..len as u16).filter(|_| next() < density).collect();
            let weights: Vec<f32> = docs.iter().map(|_| 0.01 + 5.0 * next()).collect();
            let start: Vec<f32> = (0..1024).map(|_| 3.0 * next()).collect();
            let q = 0.3 + next();
            let mut row = vec![0.0f32; len];
            for (&d, &w) in docs.iter().zip(&weights) {
                row[d as usize] = w;
            }
            let bits = Bitmap::new(&docs, len);
            let forms = [
                List::Postings(&docs, &weights),
                List::Bits(&bits, &docs, &weights),
                List::Dense(&row),
            ];
            let mut expected = start.clone();
            add_postings(&mut expected, q, &docs, &weights);
            let candidates: Vec<u16> = (0..len as u16).filter(|_| next() < 0.05).collect();
            for list in &forms {
                let mut sums = start.clone();
                list.add(&mut sums, q);
                assert_eq!(sums, expected, "density {density}");
                let mut sums = start.clone();
                list.add_to_candidates(&mut sums, q, &candidates);
                let mut cursor = 0;
                for &doc in &candidates {
                    let d = doc as usize;
                    assert_eq!(sums[d], expected[d], "density {density}, document {doc}");
                    assert_eq!(list.weight(doc, &mut cursor), row[d]);
                }
            }
            let mut portable = start.clone();
            add_dense_portable(&mut portable, q, &row);
            assert_eq!(portable, expected, "density {density}");
        }
    }
}
