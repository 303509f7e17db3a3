//! One training example, whichever file it came from.

/// One training example: a query, its positive passage and its hard negatives.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    pub query: String,
    pub positive: String,
    pub negatives: Vec<String>,
    /// The teacher's scores of the positive and each negative, when the data has them.
    pub teacher: Option<Vec<f32>>,
}
