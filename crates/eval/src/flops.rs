//! Sparsity of an encoded collection as the SPLADE papers report it: FLOPs
//! `Σ_j p_q(j)·p_d(j)`, with `p(j)` the fraction of queries (documents) whose vector has term
//! j — the expected number of multiplications per query–document pair — and the mean number of
//! non-zero terms (L0) of queries and documents.

pub use lsr_files::Sparsity;

use crate::index::{InvertedIndex, Sparse};

/// FLOPs and L0 of `queries` against the documents of `index`.
pub fn sparsity<'a>(
    index: &InvertedIndex,
    queries: impl IntoIterator<Item = &'a Sparse>,
) -> Sparsity {
    let vocab = index.vocab();
    let mut query_terms = vec![0usize; vocab];
    let (mut num_queries, mut query_nonzeros) = (0usize, 0usize);
    for query in queries {
        num_queries += 1;
        for &(term, weight) in query {
            if weight != 0.0 && (term as usize) < vocab {
                query_terms[term as usize] += 1;
                query_nonzeros += 1;
            }
        }
    }
    let num_docs = index.num_docs();
    let doc_nonzeros: usize = (0..vocab).map(|t| index.document_frequency(t)).sum();
    let fraction = |count: usize, total: usize| {
        if total == 0 {
            0.0
        } else {
            count as f64 / total as f64
        }
    };
    let flops = (0..vocab)
        .map(|t| {
            fraction(query_terms[t], num_queries) * fraction(index.document_frequency(t), num_docs)
        })
        .sum();
    Sparsity {
        flops,
        mean_query_l0: fraction(query_nonzeros, num_queries),
        mean_doc_l0: fraction(doc_nonzeros, num_docs),
        num_queries,
        num_docs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexBuilder;

    #[test]
    fn flops_is_the_sum_of_term_probability_products() {
        let mut builder = IndexBuilder::new(4);
        builder.add("d1", &[(0, 1.0), (1, 2.0)]).unwrap();
        builder.add("d2", &[(0, 0.5)]).unwrap();
        let index = builder.build();
        let queries: Vec<Vec<(u32, f32)>> = vec![vec![(0, 1.0), (2, 1.0)], vec![(1, 1.0)]];
        let s = sparsity(&index, queries.iter().map(Vec::as_slice));
        // p_q = [1/2, 1/2, 1/2, 0], p_d = [1, 1/2, 0, 0]
        assert!((s.flops - (0.5 * 1.0 + 0.5 * 0.5)).abs() < 1e-12, "{s:?}");
        assert_eq!(s.mean_query_l0, 1.5);
        assert_eq!(s.mean_doc_l0, 1.5);
    }
}
