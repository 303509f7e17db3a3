//! Training examples cut into tokenised micro-batches (queries, positives, hard negatives), in
//! a seeded order that a resumed run can rejoin at any step.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use burn::prelude::*;
use lsr_backbone::{TextTokenizer, TokenBatch};

use crate::data::order::{Permutation, splitmix64};
use crate::data::source::TripleSource;
use crate::error::Result;

/// One micro-batch, tokenised: B queries and B·(1+n) documents (the positives, then each
/// query's negatives in query order).
#[derive(Clone, Debug)]
pub struct TrainBatch {
    /// Its position in the run's sequence of micro-batches (the data cursor).
    pub index: u64,
    pub queries: TokenBatch,
    pub documents: TokenBatch,
    /// The teacher's scores of each query's positive and negatives, `[B, 1+n]` row by row, when
    /// the data has them.
    pub teacher: Option<Vec<f32>>,
}

impl TrainBatch {
    /// The teacher's scores as a `[B, 1+n]` tensor on `device`.
    pub fn teacher_tensor(&self, device: &Device) -> Option<Tensor<2>> {
        Self::joined_teacher(std::slice::from_ref(self), device)
    }

    /// The teacher's scores of several micro-batches, their queries in order, as one tensor.
    pub fn joined_teacher(batches: &[TrainBatch], device: &Device) -> Option<Tensor<2>> {
        let queries: usize = batches.iter().map(|b| b.queries.batch).sum();
        let scores: Vec<f32> = (batches.iter())
            .map(|b| b.teacher.as_deref())
            .collect::<Option<Vec<_>>>()?
            .concat();
        let width = scores.len() / queries;
        Some(Tensor::from_data(
            TensorData::new(scores, [queries, width]),
            device,
        ))
    }
}

/// How micro-batches are cut from a triple source.
#[derive(Clone)]
pub struct BatchPlan {
    pub micro_batch: usize,
    pub negatives: usize,
    pub seed: u64,
    pub query_tokenizer: TextTokenizer,
    pub document_tokenizer: TextTokenizer,
}

impl BatchPlan {
    /// Micro-batch `index`: examples `index·B .. (index+1)·B` of the endless sequence in which
    /// epoch e is the source in the order of `Permutation::new(len, seed + e)`.
    pub fn batch(
        &self,
        source: &TripleSource,
        index: u64,
        orders: &mut Vec<Permutation>,
    ) -> Result<TrainBatch> {
        let n = source.len() as u64;
        let first = index * self.micro_batch as u64;
        let mut queries = Vec::with_capacity(self.micro_batch);
        let mut positives = Vec::with_capacity(self.micro_batch);
        let mut negatives = Vec::with_capacity(self.micro_batch * self.negatives);
        let mut teacher = Some(Vec::new());
        for global in first..first + self.micro_batch as u64 {
            let epoch = (global / n) as usize;
            while orders.len() <= epoch {
                let seed = self.seed.wrapping_add(orders.len() as u64);
                orders.push(Permutation::new(n as usize, seed));
            }
            let position = orders[epoch].get((global % n) as usize);
            let example = source.example(position, self.negatives, self.draw(global))?;
            queries.push(example.query);
            positives.push(example.positive);
            negatives.extend(example.negatives);
            teacher = teacher.and_then(|mut scores: Vec<f32>| {
                scores.extend(example.teacher?);
                Some(scores)
            });
        }
        let documents: Vec<&str> = positives
            .iter()
            .chain(&negatives)
            .map(String::as_str)
            .collect();
        let queries: Vec<&str> = queries.iter().map(String::as_str).collect();
        Ok(TrainBatch {
            index,
            queries: self.query_tokenizer.encode_batch(&queries)?,
            documents: self.document_tokenizer.encode_batch(&documents)?,
            teacher,
        })
    }

    /// The seed of example `global`'s draws (its positive and negatives among scored
    /// candidates): a function of the run's seed and the example's place alone.
    fn draw(&self, global: u64) -> u64 {
        let mut state = self.seed ^ splitmix64(&mut global.clone());
        splitmix64(&mut state)
    }
}

/// Micro-batches read and tokenised on their own thread, `prefetch` ahead of training.
pub struct Batches {
    receiver: Receiver<Result<TrainBatch>>,
    _producer: JoinHandle<()>,
}

impl Batches {
    /// Starts producing from micro-batch `start` (a resumed run's cursor).
    pub fn spawn(source: Arc<TripleSource>, plan: BatchPlan, start: u64, prefetch: usize) -> Self {
        let (sender, receiver) = sync_channel(prefetch);
        let producer = std::thread::Builder::new()
            .name("lsr-batches".into())
            .spawn(move || produce(&source, &plan, start, &sender))
            .expect("the OS starts a thread");
        Self {
            receiver,
            _producer: producer,
        }
    }

    pub fn next_batch(&self) -> Result<TrainBatch> {
        self.receiver
            .recv()
            .expect("the producer sends until the receiver is dropped or after an error")
    }
}

fn produce(
    source: &TripleSource,
    plan: &BatchPlan,
    start: u64,
    sender: &SyncSender<Result<TrainBatch>>,
) {
    let mut orders = Vec::new();
    for index in start.. {
        let batch = plan.batch(source, index, &mut orders);
        let failed = batch.is_err();
        if sender.send(batch).is_err() || failed {
            return;
        }
    }
}
