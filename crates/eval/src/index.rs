//! Exact retrieval over SPLADE vectors: an inverted index of impact postings, scored
//! term-at-a-time into a dense accumulator, top k by a bounded heap, in parallel over queries.
//! Ties are broken as trec_eval breaks them (document id descending), so the top k is the
//! top k of the full ranking that trec_eval would evaluate. This exhaustive scoring is the
//! reference; `maxscore` skips what cannot reach the top k and returns the same list.

mod list;
mod maxscore;
mod simd;

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;

use lsr_data::Run;

use list::{Bitmap, Form, List};

/// A sparse vector: (term id, weight) pairs with weight > 0.
pub type Sparse = [(u32, f32)];

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("document `{0}` is indexed twice")]
    DuplicateDocument(String),
    #[error("document `{doc}`: term id {term} is outside the vocabulary of {vocab}")]
    TermOutOfRange {
        doc: String,
        term: u32,
        vocab: usize,
    },
    #[error("document `{doc}`: weight {weight} of term {term} is not finite and positive")]
    BadWeight { doc: String, term: u32, weight: f32 },
}

/// Postings are grouped by term, then by block of `2^block_bits` documents; a posting stores
/// its document relative to the block (u16), which cuts the memory traffic of scoring, the
/// bound on its speed, by a quarter.
pub struct InvertedIndex {
    doc_ids: Vec<String>,
    /// Rank of each document's id in byte order: equal scores rank the larger id first.
    id_rank: Vec<u32>,
    /// Documents in byte order of their ids (the inverse of `id_rank`), for lookups by id.
    by_id: Vec<u32>,
    vocab: usize,
    block_bits: u32,
    blocks: usize,
    /// Each term's postings, as the builder laid them out.
    terms: Vec<TermPostings>,
    /// The largest weight of term t in block b is `block_max[t · blocks + b]` (0 without
    /// postings): the bounds of `maxscore`.
    block_max: Vec<f32>,
}

/// Collects documents, then lays their postings out contiguously by term. While it collects,
/// each term's postings are already in the index's form (block-local u16 documents, f32
/// weights) and grow by a quarter at a time, so that building peaks near the final index's
/// size rather than at twice it.
pub struct IndexBuilder {
    vocab: usize,
    doc_ids: Vec<String>,
    /// A hash of each id → its document, to refuse a duplicate without a second copy of the
    /// ids; ids whose hash another id already has go to `colliding`.
    seen: HashMap<u64, u32>,
    colliding: HashMap<String, u32>,
    terms: Vec<TermPostings>,
    block_bits: u32,
}

/// One term's postings in document order: block-local documents, weights, and where each
/// block starts.
#[derive(Clone, Default)]
struct TermPostings {
    docs: Vec<u16>,
    weights: Vec<f32>,
    /// `starts[b]`: the first posting of block b (blocks after the last start where it ends).
    starts: Vec<u32>,
    /// `forms[b]`: how block b is also kept, by the share of its documents the postings fill
    /// (empty for a term whose blocks are all plain lists). See [`list`].
    forms: Vec<Form>,
}

impl TermPostings {
    fn push(&mut self, block: usize, doc: u16, weight: f32) {
        while self.starts.len() <= block {
            self.starts.push(self.docs.len() as u32);
        }
        grow_by_a_quarter(&mut self.docs);
        grow_by_a_quarter(&mut self.weights);
        self.docs.push(doc);
        self.weights.push(weight);
    }

    /// Block `block`'s postings.
    fn block(&self, block: usize) -> (&[u16], &[f32]) {
        let at = |b: usize| self.starts.get(b).map_or(self.docs.len(), |&s| s as usize);
        let range = at(block)..at(block + 1);
        (&self.docs[range.clone()], &self.weights[range])
    }

    /// Each block's form, by the share of its `lengths[b]` documents that it has postings for:
    /// above [`DENSE_SHARE`] a dense row, above [`BITS_SHARE`] a bitmap.
    fn choose_forms(&mut self, lengths: impl Iterator<Item = usize>) {
        let forms: Vec<Form> = (lengths.enumerate())
            .map(|(b, len)| {
                let (docs, weights) = self.block(b);
                let share = docs.len() as f64 / len as f64;
                if share > DENSE_SHARE {
                    let mut row = vec![0.0f32; len].into_boxed_slice();
                    for (&doc, &weight) in docs.iter().zip(weights) {
                        row[doc as usize] = weight;
                    }
                    Form::Dense(row)
                } else if share > BITS_SHARE {
                    Form::Bits(Bitmap::new(docs, len))
                } else {
                    Form::Postings
                }
            })
            .collect();
        if forms.iter().any(|f| !matches!(f, Form::Postings)) {
            self.forms = forms;
        }
    }

    /// Block `block` as the searches read it.
    fn list(&self, block: usize) -> List<'_> {
        let (docs, weights) = self.block(block);
        match self.forms.get(block) {
            Some(Form::Dense(row)) => List::Dense(row),
            Some(Form::Bits(bits)) => List::Bits(bits, docs, weights),
            _ => List::Postings(docs, weights),
        }
    }

    /// Bytes of the postings and of the blocks' other forms.
    fn bytes(&self) -> usize {
        let forms: usize = (self.forms.iter())
            .map(|form| match form {
                Form::Postings => 0,
                Form::Bits(bits) => bits.bytes(),
                Form::Dense(row) => row.len() * 4,
            })
            .sum();
        self.docs.len() * 2 + self.weights.len() * 4 + self.starts.len() * 4 + forms
    }
}

/// Room for one more element, growing by a quarter rather than doubling: less slack left over
/// in the many lists the builder holds at once.
fn grow_by_a_quarter<T>(list: &mut Vec<T>) {
    if list.len() == list.capacity() {
        list.reserve_exact((list.capacity() / 4).max(4));
    }
}

impl IndexBuilder {
    pub fn new(vocab: usize) -> Self {
        Self {
            vocab,
            doc_ids: Vec::new(),
            seen: HashMap::new(),
            colliding: HashMap::new(),
            terms: vec![TermPostings::default(); vocab],
            block_bits: 16,
        }
    }

    /// Adds a document; a refused document leaves the builder as it was.
    pub fn add(&mut self, id: &str, vector: &Sparse) -> Result<(), IndexError> {
        for &(term, weight) in vector {
            if term as usize >= self.vocab {
                return Err(IndexError::TermOutOfRange {
                    doc: id.to_string(),
                    term,
                    vocab: self.vocab,
                });
            }
            if !(weight.is_finite() && weight > 0.0) {
                return Err(IndexError::BadWeight {
                    doc: id.to_string(),
                    term,
                    weight,
                });
            }
        }
        let number = self.doc_ids.len() as u32;
        self.remember(id, number)?;
        let block = (number >> self.block_bits) as usize;
        let local = (number & ((1u32 << self.block_bits) - 1)) as u16;
        for &(term, weight) in vector {
            self.terms[term as usize].push(block, local, weight);
        }
        self.doc_ids.push(id.to_string());
        Ok(())
    }

    /// Records `id` as document `number`, refusing an id already added.
    fn remember(&mut self, id: &str, number: u32) -> Result<(), IndexError> {
        use std::hash::BuildHasher;
        let hash = self.seen.hasher().hash_one(id);
        let duplicate = match self.seen.get(&hash) {
            None => {
                self.seen.insert(hash, number);
                false
            }
            Some(&other) if self.doc_ids[other as usize] == id => true,
            Some(_) => self.colliding.insert(id.to_string(), number).is_some(),
        };
        match duplicate {
            true => Err(IndexError::DuplicateDocument(id.to_string())),
            false => Ok(()),
        }
    }

    pub fn build(self) -> InvertedIndex {
        let n = self.doc_ids.len();
        let blocks = n.div_ceil(1 << self.block_bits);
        // The lists stay where they were built, trimmed one at a time: never a second copy.
        let mut terms = self.terms;
        let block = 1usize << self.block_bits;
        for term in &mut terms {
            term.docs.shrink_to_fit();
            term.weights.shrink_to_fit();
            term.starts.shrink_to_fit();
            term.choose_forms((0..blocks).map(|b| block.min(n - b * block)));
        }
        let mut by_id: Vec<u32> = (0..self.doc_ids.len() as u32).collect();
        by_id.sort_unstable_by(|&a, &b| {
            self.doc_ids[a as usize]
                .as_bytes()
                .cmp(self.doc_ids[b as usize].as_bytes())
        });
        let mut id_rank = vec![0u32; self.doc_ids.len()];
        for (rank, &doc) in by_id.iter().enumerate() {
            id_rank[doc as usize] = rank as u32;
        }
        let mut index = InvertedIndex {
            doc_ids: self.doc_ids,
            id_rank,
            by_id,
            vocab: self.vocab,
            block_bits: self.block_bits,
            blocks,
            terms,
            block_max: Vec::new(),
        };
        index.block_max = index.block_maxima();
        index
    }
}

#[derive(Clone, Copy)]
enum Search {
    Exhaustive,
    Pruned,
}

/// Largest block: block-local document numbers are u16.
const MAX_BLOCK: usize = 1 << 16;

/// Scores scanned together when collecting a block's candidates.
const SCAN_CHUNK: usize = 16;

/// The share of a block's documents above which a term's postings there are also kept dense:
/// 4 bytes a document against 6 a posting, so never more memory than the postings.
const DENSE_SHARE: f64 = 2.0 / 3.0;

/// The share of a block's documents above which a term's postings there are also kept as a
/// bitmap: added sixteen documents at a time, it beats the list's one posting at a time from
/// about here on.
const BITS_SHARE: f64 = 1.0 / 8.0;

/// Queries a thread searches together, block by block (`maxscore`), so that the long posting
/// lists they share come from the cache: on `lsr bench retrieve`'s uniform shape, 411
/// queries/s in batches of 8, 534 of 64, 531 of 128 (docs/perf-cpu.md).
const QUERY_BATCH: usize = 64;

/// Per-thread scoring memory, reused across queries.
struct Scratch {
    /// Scores of the whole collection, for queries that touch few documents.
    scores: Vec<f32>,
    touched: Vec<u32>,
    /// Scores of one block. Its length is that of the u16 range, so indexing it with a
    /// block-local document number needs no bounds check in the hot loop.
    block: Box<[f32; MAX_BLOCK]>,
}

/// A candidate in the top-k heap: higher score first, then higher id rank.
#[derive(PartialEq)]
struct Candidate {
    score: f32,
    id_rank: u32,
    doc: u32,
}

impl Eq for Candidate {}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.id_rank.cmp(&other.id_rank))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The best `k` candidates seen so far, worst on top of the heap.
struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Candidate>>,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    fn offer(&mut self, score: f32, id_rank: u32, doc: u32) {
        if self.heap.len() == self.k {
            // Cheap rejection before building a candidate: most documents score below the
            // current k-th.
            match self.heap.peek() {
                Some(worst) if score < worst.0.score => return,
                None => return,
                _ => {}
            }
        }
        let candidate = Candidate {
            score,
            id_rank,
            doc,
        };
        if self.heap.len() < self.k {
            self.heap.push(Reverse(candidate));
        } else if self.heap.peek().is_some_and(|worst| candidate > worst.0) {
            self.heap.pop();
            self.heap.push(Reverse(candidate));
        }
    }

    /// The score a candidate must reach to be considered: the k-th best so far once there
    /// are k (a tie may still enter, by id rank), otherwise 0.
    fn floor(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.k => worst.0.score,
            _ => 0.0,
        }
    }

    fn into_sorted(self) -> Vec<(u32, f32)> {
        let mut best: Vec<Candidate> = self.heap.into_iter().map(|r| r.0).collect();
        best.sort_unstable_by(|a, b| b.cmp(a));
        best.into_iter().map(|c| (c.doc, c.score)).collect()
    }
}

impl InvertedIndex {
    pub fn num_docs(&self) -> usize {
        self.doc_ids.len()
    }

    pub fn vocab(&self) -> usize {
        self.vocab
    }

    pub fn doc_id(&self, doc: u32) -> &str {
        &self.doc_ids[doc as usize]
    }

    /// Whether a document with this id is indexed.
    pub fn contains(&self, id: &str) -> bool {
        self.by_id
            .binary_search_by(|&doc| self.doc_ids[doc as usize].as_bytes().cmp(id.as_bytes()))
            .is_ok()
    }

    /// Number of documents whose vector has term t (its posting-list length).
    pub fn document_frequency(&self, term: usize) -> usize {
        self.terms[term].docs.len()
    }

    /// Bytes held by the postings and the id tables (not counting string heap overhead).
    pub fn memory_bytes(&self) -> usize {
        let postings: usize = self.terms.iter().map(TermPostings::bytes).sum();
        postings
            + self.block_max.len() * 4
            + self.id_rank.len() * 8
            + self.doc_ids.iter().map(|d| d.len() + 24).sum::<usize>()
    }

    fn scratch(&self) -> Scratch {
        Scratch {
            scores: vec![0.0; self.num_docs()],
            touched: Vec::new(),
            block: vec![0.0; MAX_BLOCK]
                .into_boxed_slice()
                .try_into()
                .expect("MAX_BLOCK elements"),
        }
    }

    /// The query's terms inside the vocabulary, as indices (others match no posting).
    fn known_terms(&self, query: &Sparse) -> Vec<(usize, f32)> {
        query
            .iter()
            .filter(|&&(t, _)| (t as usize) < self.vocab)
            .map(|&(t, w)| (t as usize, w))
            .collect()
    }

    /// The `k` best documents for `query` as (document number, score), best first.
    fn search_with(&self, query: &Sparse, k: usize, scratch: &mut Scratch) -> Vec<(u32, f32)> {
        let query = self.known_terms(query);
        let postings: usize = query.iter().map(|&(t, _)| self.document_frequency(t)).sum();
        // Queries of frequent terms touch most documents: then a branch-free accumulation and
        // one scan of all scores beats keeping a list of touched documents.
        let dense = postings > self.num_docs() / 8;
        let mut top = TopK::new(k);
        for block in 0..self.blocks {
            self.score_block(&query, block, dense, &mut top, scratch);
        }
        for &doc in &scratch.touched {
            let score = std::mem::take(&mut scratch.scores[doc as usize]);
            top.offer(score, self.id_rank[doc as usize], doc);
        }
        scratch.touched.clear();
        top.into_sorted()
    }

    /// Scores every posting of `query` in `block`: `dense`, into the block's accumulator and
    /// offered to `top` at once; otherwise into the collection's, offered by the caller.
    fn score_block(
        &self,
        query: &[(usize, f32)],
        block: usize,
        dense: bool,
        top: &mut TopK,
        scratch: &mut Scratch,
    ) {
        let start = block << self.block_bits;
        let len = (1usize << self.block_bits).min(self.num_docs() - start);
        // Every document is summed in query-term order, whichever path scores it.
        for &(term, query_weight) in query {
            if dense {
                self.list(term, block)
                    .add(&mut scratch.block[..], query_weight);
            } else {
                let (docs, weights) = self.block_postings(term, block);
                for (&doc, &weight) in docs.iter().zip(weights) {
                    let doc = start + doc as usize;
                    let slot = &mut scratch.scores[doc];
                    if *slot == 0.0 {
                        scratch.touched.push(doc as u32);
                    }
                    *slot += query_weight * weight;
                }
            }
        }
        if dense {
            // Most chunks hold no score that can enter the top k: their maximum (a
            // vectorised reduction) rules them out, and they are only cleared.
            let mut floor = top.floor();
            for (c, chunk) in scratch.block[..len].chunks_mut(SCAN_CHUNK).enumerate() {
                let best = chunk.iter().fold(0.0f32, |m, &s| m.max(s));
                if best > 0.0 && best >= floor {
                    for (i, score) in chunk.iter_mut().enumerate() {
                        let score = std::mem::take(score);
                        if score > 0.0 && score >= floor {
                            let doc = start + c * SCAN_CHUNK + i;
                            top.offer(score, self.id_rank[doc], doc as u32);
                            floor = top.floor();
                        }
                    }
                } else {
                    chunk.fill(0.0);
                }
            }
        }
    }

    fn block_postings(&self, term: usize, block: usize) -> (&[u16], &[f32]) {
        self.terms[term].block(block)
    }

    fn list(&self, term: usize, block: usize) -> List<'_> {
        self.terms[term].list(block)
    }

    /// Hits as (document id, score).
    fn named(&self, hits: Vec<(u32, f32)>) -> Vec<(String, f64)> {
        (hits.into_iter())
            .map(|(doc, score)| (self.doc_id(doc).to_string(), score as f64))
            .collect()
    }

    /// Top `k` for one query, scoring every posting of its terms (the reference).
    pub fn search(&self, query: &Sparse, k: usize) -> Vec<(u32, f32)> {
        self.search_with(query, k, &mut self.scratch())
    }

    /// Top `k` for every query, in parallel, as a run, skipping documents that cannot enter
    /// it (`maxscore`; the same list as `retrieve_exhaustive`). Queries with non-positive or
    /// non-finite weights keep only their positive finite terms.
    pub fn retrieve(&self, queries: &[(String, Vec<(u32, f32)>)], k: usize) -> Run {
        self.retrieve_by(queries, k, Search::Pruned)
    }

    /// As `retrieve`, scoring every posting: the reference the pruned search is checked
    /// against.
    pub fn retrieve_exhaustive(&self, queries: &[(String, Vec<(u32, f32)>)], k: usize) -> Run {
        self.retrieve_by(queries, k, Search::Exhaustive)
    }

    fn retrieve_by(&self, queries: &[(String, Vec<(u32, f32)>)], k: usize, how: Search) -> Run {
        // As many queries a batch as keeps every thread busy, up to QUERY_BATCH.
        let batch = (queries.len().div_ceil(rayon::current_num_threads())).clamp(1, QUERY_BATCH);
        let results: Vec<(String, Vec<(String, f64)>)> = queries
            .par_chunks(batch)
            .map_init(
                || (self.scratch(), maxscore::Scratch::default()),
                |(scratch, pruning), batch| {
                    let terms: Vec<Vec<(u32, f32)>> = batch
                        .iter()
                        .map(|(_, vector)| {
                            let terms = vector.iter().copied();
                            terms.filter(|(_, w)| w.is_finite() && *w > 0.0).collect()
                        })
                        .collect();
                    let hits = match how {
                        Search::Exhaustive => (terms.iter())
                            .map(|query| self.search_with(query, k, scratch))
                            .collect(),
                        Search::Pruned => {
                            let queries: Vec<&Sparse> = terms.iter().map(Vec::as_slice).collect();
                            self.search_pruned(&queries, k, scratch, pruning)
                        }
                    };
                    (batch.iter().zip(hits))
                        .map(|((id, _), hits)| (id.clone(), self.named(hits)))
                        .collect::<Vec<_>>()
                },
            )
            .flatten_iter()
            .collect();
        Run {
            queries: results.into_iter().collect(),
            tag: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl InvertedIndex {
        /// Whether some block is kept as a dense row and some as a bitmap.
        fn has_every_form(&self) -> bool {
            let forms = || self.terms.iter().flat_map(|t| &t.forms);
            forms().any(|f| matches!(f, Form::Dense(_)))
                && forms().any(|f| matches!(f, Form::Bits(_)))
        }
    }

    /// A deterministic pseudo-random stream (Knuth's MMIX generator) for the index's tests.
    pub(super) fn lcg(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state
        }
    }

    /// Uniform in [0, 1), from the stream's top 24 bits.
    pub(super) fn unit(seed: u64) -> impl FnMut() -> f32 {
        let mut next = lcg(seed);
        move || (next() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// A deterministic pseudo-random sparse collection with quantised weights, so that many
    /// scores tie.
    fn collection(n: usize, vocab: u32, nnz: usize, seed: u64) -> Vec<Vec<(u32, f32)>> {
        let mut state = lcg(seed);
        let mut next = move || (state() >> 33) as u32;
        (0..n)
            .map(|_| {
                let mut terms: Vec<u32> = (0..nnz).map(|_| next() % vocab).collect();
                terms.sort_unstable();
                terms.dedup();
                terms
                    .into_iter()
                    .map(|t| (t, 0.5 * (1 + next() % 4) as f32))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn top_k_equals_brute_force_in_trec_eval_order() {
        // A small vocabulary makes queries touch most documents (the dense scoring path), a
        // large one few (the touched-list path).
        for vocab in [50, 2000] {
            check_against_brute_force(vocab);
        }
    }

    fn check_against_brute_force(vocab: u32) {
        let docs = collection(500, vocab, 6, 1);
        let queries = collection(40, vocab, 4, 2);
        let mut builder = IndexBuilder::new(vocab as usize);
        // Blocks smaller than the collection, so that scoring crosses block borders.
        builder.block_bits = 6;
        // Ids whose byte order differs from insertion order: "d10" < "d9".
        let ids: Vec<String> = (0..docs.len()).map(|i| format!("d{i}")).collect();
        for (id, doc) in ids.iter().zip(&docs) {
            builder.add(id, doc).unwrap();
        }
        let index = builder.build();
        for query in &queries {
            let mut all: Vec<(f32, &str)> = docs
                .iter()
                .zip(&ids)
                .filter_map(|(doc, id)| {
                    // Summed in query-term order, as term-at-a-time scoring sums.
                    let mut score = 0.0f32;
                    let mut hit = false;
                    for &(t, qw) in query {
                        if let Some(&(_, dw)) = doc.iter().find(|(dt, _)| *dt == t) {
                            score += qw * dw;
                            hit = true;
                        }
                    }
                    hit.then_some((score, id.as_str()))
                })
                .collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(a.1)));
            let expected: Vec<(&str, f32)> = all.iter().take(10).map(|(s, id)| (*id, *s)).collect();
            let got: Vec<(&str, f32)> = index
                .search(query, 10)
                .into_iter()
                .map(|(doc, score)| (index.doc_id(doc), score))
                .collect();
            assert_eq!(got, expected);
            let (mut exhaustive, mut scratch) = (index.scratch(), Default::default());
            let pruned = index.search_pruned(&[query], 10, &mut exhaustive, &mut scratch);
            assert_eq!(pruned, [index.search(query, 10)]);
        }
    }

    /// Weights of any f32 value (sums depend on their order) on a skewed vocabulary, frequent
    /// terms light as in SPLADE: the pruned search of a batch of queries returns each the
    /// exhaustive one's list, scores bit for bit, at every depth and block size.
    #[test]
    fn pruned_search_equals_the_exhaustive_search() {
        let mut next = unit(7);
        let mut vector = |terms: usize, vocab: f32| {
            let mut v: Vec<(u32, f32)> = (0..terms)
                .map(|_| {
                    let term = (vocab * next() * next() * next()) as u32;
                    (
                        term,
                        0.01 + 3.0 * next() * (term as f32 + 1.0).ln() / vocab.ln(),
                    )
                })
                .collect();
            v.sort_by_key(|p| p.0);
            v.dedup_by_key(|p| p.0);
            v
        };
        let docs: Vec<Vec<(u32, f32)>> = (0..3000).map(|_| vector(40, 300.0)).collect();
        let mut queries: Vec<Vec<(u32, f32)>> = (0..60).map(|_| vector(12, 300.0)).collect();
        queries.insert(30, Vec::new());
        for bits in [6, 10, 16] {
            let mut builder = IndexBuilder::new(300);
            builder.block_bits = bits;
            for (i, doc) in docs.iter().enumerate() {
                builder.add(&format!("d{i}"), doc).unwrap();
            }
            let index = builder.build();
            assert!(
                index.has_every_form(),
                "block bits {bits}: the dense rows and bitmaps are tested"
            );
            let (mut exhaustive, mut scratch) = (index.scratch(), Default::default());
            // One batch of every query, an empty one among them: each gets its own list.
            let batch: Vec<&Sparse> = queries.iter().map(Vec::as_slice).collect();
            for k in [1, 10, 100, 5000] {
                let pruned = index.search_pruned(&batch, k, &mut exhaustive, &mut scratch);
                let alone: Vec<_> = queries.iter().map(|q| index.search(q, k)).collect();
                assert_eq!(pruned, alone, "block bits {bits}, k {k}");
            }
        }
    }

    /// The retrieval benchmark's collections, small: every query of both weight shapes gets
    /// the exhaustive list from the pruned search, over many blocks.
    #[test]
    fn pruned_search_equals_the_exhaustive_search_on_the_benchmark_shapes() {
        use lsr_data::bench_collection::{WeightShape, Zipf, sparse_vector};
        let zipf = Zipf::new(3000, 1.0);
        for shape in [WeightShape::Uniform, WeightShape::Splade] {
            let mut builder = IndexBuilder::new(3000);
            builder.block_bits = 10;
            for d in 0..20_000 {
                builder
                    .add(&d.to_string(), &sparse_vector(&zipf, shape, 1, d, 60))
                    .unwrap();
            }
            let index = builder.build();
            assert!(index.has_every_form());
            let queries: Vec<(String, Vec<(u32, f32)>)> = (0..100)
                .map(|q| (q.to_string(), sparse_vector(&zipf, shape, 2, q, 20)))
                .collect();
            for k in [10, 1000] {
                let pruned = index.retrieve(&queries, k);
                assert_eq!(
                    pruned.queries,
                    index.retrieve_exhaustive(&queries, k).queries
                );
            }
        }
    }

    #[test]
    fn bad_documents_are_refused_with_their_id() {
        let mut builder = IndexBuilder::new(10);
        builder.add("a", &[(1, 1.0)]).unwrap();
        assert!(
            matches!(builder.add("a", &[(2, 1.0)]), Err(IndexError::DuplicateDocument(d)) if d == "a")
        );
        assert!(matches!(
            builder.add("b", &[(10, 1.0)]),
            Err(IndexError::TermOutOfRange { .. })
        ));
        assert!(matches!(
            builder.add("c", &[(3, f32::NAN)]),
            Err(IndexError::BadWeight { .. })
        ));
        builder.add("b", &[(2, 1.0)]).unwrap();
        let index = builder.build();
        assert!(index.contains("a") && index.contains("b") && !index.contains("c"));
    }

    /// Two ids with one hash: the second is still told apart from the first, and refused when
    /// added again.
    #[test]
    fn ids_whose_hashes_collide_are_still_exact() {
        use std::hash::BuildHasher;
        let mut builder = IndexBuilder::new(4);
        builder.add("a", &[(1, 1.0)]).unwrap();
        let hash_of_b = builder.seen.hasher().hash_one("b");
        builder.seen.insert(hash_of_b, 0);
        builder.add("b", &[(2, 1.0)]).unwrap();
        assert!(matches!(
            builder.add("b", &[(3, 1.0)]),
            Err(IndexError::DuplicateDocument(d)) if d == "b"
        ));
        assert!(builder.add("a", &[(3, 1.0)]).is_err());
        let index = builder.build();
        assert_eq!(index.num_docs(), 2);
        assert_eq!(index.search(&[(2, 1.0)], 1), [(1, 1.0)]);
    }

    #[test]
    fn parallel_retrieval_gives_a_run_per_query() {
        let docs = collection(100, 20, 5, 3);
        let mut builder = IndexBuilder::new(20);
        for (i, doc) in docs.iter().enumerate() {
            builder.add(&format!("doc{i}"), doc).unwrap();
        }
        let index = builder.build();
        let queries: Vec<(String, Vec<(u32, f32)>)> = collection(8, 20, 3, 4)
            .into_iter()
            .enumerate()
            .map(|(i, q)| (format!("q{i}"), q))
            .collect();
        let run = index.retrieve(&queries, 5);
        assert_eq!(run.queries.len(), 8);
        for (id, vector) in &queries {
            let single: Vec<(String, f64)> = index
                .search(vector, 5)
                .into_iter()
                .map(|(d, s)| (index.doc_id(d).to_string(), s as f64))
                .collect();
            assert_eq!(run.queries[id], single);
        }
    }
}
