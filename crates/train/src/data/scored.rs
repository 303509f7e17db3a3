//! Training examples from a teacher's scored candidates per query (naver/splade's pickle with
//! the qrels, sentence-transformers' parquet of margins, read by `lsr_data::teacher`): one
//! example per query, its positive and n negatives drawn from the scored candidates by a seed
//! of the example's place in the run, so that a resumed run draws what an uninterrupted one
//! would have. Every id is resolved through the text stores when the source is opened.

use std::path::Path;

use lsr_data::teacher::{ScoredQuery, TeacherScores};

use crate::data::example::Example;
use crate::data::order::splitmix64;
use crate::data::store::TextStore;
use crate::error::{Result, TrainError};

/// Scored candidates with the texts of their queries and passages.
pub struct ScoredSource {
    teacher: TeacherScores,
    queries: TextStore,
    collection: TextStore,
}

impl ScoredSource {
    /// naver/splade's pickle of cross-encoder scores, its positives from `qrels`.
    pub fn pickle(scores: &Path, qrels: &Path, queries: &Path, collection: &Path) -> Result<Self> {
        let qrels = lsr_data::Qrels::read(qrels)?;
        let teacher = lsr_data::teacher::read_pickle(scores, &qrels)?;
        Self::with_texts(scores, teacher, queries, collection)
    }

    /// sentence-transformers' parquet of margins.
    pub fn parquet_margins(scores: &Path, queries: &Path, collection: &Path) -> Result<Self> {
        let teacher = lsr_data::teacher::read_parquet_margins(scores)?;
        Self::with_texts(scores, teacher, queries, collection)
    }

    /// The scores read from `scores` with the text stores, checked: every query and passage
    /// they name has a text, and a query is left to train on; logs what the reader skipped or
    /// joined.
    fn with_texts(
        scores: &Path,
        teacher: TeacherScores,
        queries: &Path,
        collection: &Path,
    ) -> Result<Self> {
        let source = Self {
            queries: TextStore::open(queries)?,
            collection: TextStore::open(collection)?,
            teacher,
        };
        source.check_ids(scores)?;
        log_read(scores, &source.teacher);
        if source.teacher.queries.is_empty() {
            let message = "no query left to train on (see the skipped counts above)";
            return Err(TrainError::data(scores, None, message));
        }
        Ok(source)
    }

    /// Every query and passage the scores name is in its text store.
    fn check_ids(&self, scores: &Path) -> Result<()> {
        let missing = |what: String, store: &TextStore| {
            let message = format!("{what} is not in {}", store.path().display());
            TrainError::data(scores, None, message)
        };
        for query in &self.teacher.queries {
            if !self.queries.contains(query.id) {
                return Err(missing(format!("query {}", query.id), &self.queries));
            }
            let range = query.positives.start..query.negatives.end;
            if let Some(pid) =
                (self.teacher.documents[range].iter()).find(|&&pid| !self.collection.contains(pid))
            {
                let what = format!("query {}, passage {pid}", query.id);
                return Err(missing(what, &self.collection));
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.teacher.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Query `index` with one of its positives and `negatives` of its scored negatives, drawn
    /// from `draw`: without replacement when it has that many, with replacement otherwise (as
    /// naver/splade's HF trainer), and the teacher's score of each.
    pub fn example(&self, index: usize, negatives: usize, draw: u64) -> Result<Example> {
        let query = &self.teacher.queries[index];
        let mut state = draw;
        let positives: Vec<(u64, f32)> = self.teacher.positives(query).collect();
        let positive = positives[below(&mut state, positives.len())];
        let candidates: Vec<(u64, f32)> = self.teacher.negatives(query).collect();
        let chosen = sample(&mut state, candidates.len(), negatives);
        let passage = |pid: u64| self.text(&self.collection, query, pid);
        let mut teacher = vec![positive.1];
        let mut texts = Vec::with_capacity(negatives);
        for i in chosen {
            let (pid, score) = candidates[i];
            texts.push(passage(pid)?);
            teacher.push(score);
        }
        Ok(Example {
            query: self.text(&self.queries, query, query.id)?,
            positive: passage(positive.0)?,
            negatives: texts,
            teacher: Some(teacher),
        })
    }

    fn text(&self, store: &TextStore, query: &ScoredQuery, id: u64) -> Result<String> {
        let text = store.get(id)?.ok_or_else(|| {
            let message = format!("query {}: id {id} vanished from the store", query.id);
            TrainError::data(store.path(), None, message)
        })?;
        Ok(text.to_string())
    }
}

/// What the reader left out or joined, each with what naver/splade's two readers do there.
fn log_read(scores: &Path, teacher: &TeacherScores) {
    let (file, skipped, respelled) = (scores.display(), teacher.skipped, teacher.respelled);
    if skipped.unjudged > 0 {
        tracing::warn!(
            "{file}: skipped {} scored queries without judgements in the qrels, as both of \
             naver/splade's readers do",
            skipped.unjudged
        );
    }
    if skipped.without_negatives > 0 {
        tracing::warn!(
            "{file}: skipped {} queries whose every scored passage is a positive, as \
             naver/splade's HF trainer does; its SPLADE++ reader (MsMarcoHardNegatives) would stop \
             there with a ValueError",
            skipped.without_negatives
        );
    }
    if respelled.queries + respelled.passages > 0 {
        tracing::warn!(
            "{file}: {} query keys and {} passage keys repeat an id written another way (5 and \
             '5'); each id is read once",
            respelled.queries,
            respelled.passages
        );
    }
}

/// A draw in `0..n` from `state`.
fn below(state: &mut u64, n: usize) -> usize {
    (splitmix64(state) % n as u64) as usize
}

/// `k` indices of `0..n`: distinct (a partial Fisher–Yates shuffle) when `n ≥ k`, with
/// replacement otherwise.
fn sample(state: &mut u64, n: usize, k: usize) -> Vec<usize> {
    if n < k {
        return (0..k).map(|_| below(state, n)).collect();
    }
    let mut indices: Vec<usize> = (0..n).collect();
    for i in 0..k {
        let j = i + below(state, n - i);
        indices.swap(i, j);
    }
    indices.truncate(k);
    indices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_distinct_indices_when_there_are_enough_and_depend_on_the_draw() {
        for seed in 0..50u64 {
            let mut state = seed;
            let mut drawn = sample(&mut state, 7, 4);
            assert!(drawn.iter().all(|&i| i < 7));
            drawn.sort_unstable();
            drawn.dedup();
            assert_eq!(drawn.len(), 4, "seed {seed}");
        }
        let mut state = 3;
        let few = sample(&mut state, 2, 5);
        assert_eq!(few.len(), 5);
        assert!(few.iter().all(|&i| i < 2));
        let draws: std::collections::HashSet<Vec<usize>> = (0..20u64)
            .map(|seed| sample(&mut seed.clone(), 30, 3))
            .collect();
        assert!(draws.len() > 15, "{draws:?}");
    }
}
