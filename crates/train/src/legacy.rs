//! Checkpoints written before the post-LN blocks (BERT, DistilBERT, ALBERT, RoBERTa) computed
//! q, k and v as one product hold the three projections apart: their model record is joined on
//! read, and the AdamW moments with it, so that such a run resumes where it stopped.

use std::collections::BTreeMap;
use std::path::Path;

use burn::store::ModuleRecord;
use burn::tensor::{DType, TensorData};
use burn_pack::{Reader, Writer};
use lsr_backbone::layers::split_qkv_in_record;

use crate::error::{Result, TrainError};

/// A fused parameter that a record held in parts: its id (the first part's), its parts' ids and
/// the dimension they join along.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub id: u64,
    pub parts: [u64; 3],
    pub dim: usize,
}

/// The model record in `path`, any split q | k | v joined; with the parameters it joined.
pub fn read_model(path: &Path) -> Result<(ModuleRecord, Vec<Joined>)> {
    let error = |e: String| TrainError::checkpoint(path, e);
    let reader = Reader::from_file(path).map_err(|e| error(e.to_string()))?;
    let splits = split_qkv_in_record(reader.tensor_names());
    if splits.is_empty() {
        drop(reader);
        let record = ModuleRecord::load(path).map_err(|e| error(e.to_string()))?;
        return Ok((record, Vec::new()));
    }
    let mut tensors = BTreeMap::new();
    for tensor in reader.into_tensors().map_err(|e| error(e.to_string()))? {
        let (name, dtype, shape, id, bytes) =
            tensor.into_parts().map_err(|e| error(e.to_string()))?;
        let id = id.ok_or_else(|| error(format!("tensor {name}: no parameter id")))?;
        tensors.insert(name, (id, TensorData::from_bytes(bytes, shape, dtype)));
    }
    let mut joined = Vec::new();
    for split in splits {
        let parts = split
            .parts
            .map(|p| tensors.remove(&p).expect("a path the record named"));
        let ids = parts.each_ref().map(|(id, _)| *id);
        let datas = parts.map(|(_, data)| data);
        let data = concat(&datas, split.dim).map_err(|e| error(format!("{}: {e}", split.path)))?;
        tensors.insert(split.path, (ids[0], data));
        joined.push(Joined {
            id: ids[0],
            parts: ids,
            dim: split.dim,
        });
    }
    let packed = (tensors.into_iter())
        .map(|(name, (id, data))| {
            let (bytes, shape, dtype) = data.into_parts();
            burn_pack::Tensor::new(name, dtype, shape, Some(id), bytes)
        })
        .collect();
    let bytes = Writer::new(packed)
        .into_bytes()
        .map_err(|e| error(e.to_string()))?;
    let record = ModuleRecord::from_bytes(bytes).map_err(|e| error(e.to_string()))?;
    Ok((record, joined))
}

/// `parts`, f32 tensors of one shape but along `dim`, concatenated along `dim`.
pub fn concat(parts: &[TensorData], dim: usize) -> std::result::Result<TensorData, String> {
    let shape = parts[0].shape().to_vec();
    if parts.iter().any(|p| p.dtype() != DType::F32) {
        return Err("expected f32 parts".into());
    }
    if dim >= shape.len() || parts.iter().any(|p| !same_but(p.shape(), &shape, dim)) {
        return Err(format!(
            "parts of shapes {:?} do not join along {dim}",
            shapes(parts)
        ));
    }
    let outer: usize = shape[..dim].iter().product();
    let inner: Vec<usize> = parts
        .iter()
        .map(|p| p.shape()[dim..].iter().product())
        .collect();
    let values: Vec<&[f32]> = parts.iter().map(|p| p.as_slice().expect("f32")).collect();
    let mut out = Vec::with_capacity(values.iter().map(|v| v.len()).sum());
    for row in 0..outer {
        for (values, inner) in values.iter().zip(&inner) {
            out.extend_from_slice(&values[row * inner..(row + 1) * inner]);
        }
    }
    let mut joined_shape = shape;
    joined_shape[dim] = parts.iter().map(|p| p.shape()[dim]).sum();
    Ok(TensorData::new(out, joined_shape))
}

fn same_but(shape: &[usize], other: &[usize], dim: usize) -> bool {
    shape.len() == other.len() && (0..shape.len()).all(|d| d == dim || shape[d] == other[d])
}

fn shapes(parts: &[TensorData]) -> Vec<Vec<usize>> {
    parts.iter().map(|p| p.shape().to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_join_row_by_row_along_the_last_dimension_and_end_to_end_along_the_first() {
        let a = TensorData::new(vec![1f32, 2., 3., 4.], [2, 2]);
        let b = TensorData::new(vec![5f32, 6.], [2, 1]);
        let joined = concat(&[a.clone(), b], 1).unwrap();
        assert_eq!(joined.shape().to_vec(), vec![2, 3]);
        assert_eq!(joined.as_slice::<f32>().unwrap(), &[1., 2., 5., 3., 4., 6.]);
        let joined = concat(&[a.clone(), a.clone()], 0).unwrap();
        assert_eq!(
            joined.as_slice::<f32>().unwrap(),
            &[1., 2., 3., 4., 1., 2., 3., 4.]
        );
        let c = TensorData::new(vec![1f32, 2., 3.], [3, 1]);
        assert!(concat(&[a, c], 1).unwrap_err().contains("do not join"));
    }
}
