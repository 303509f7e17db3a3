//! Reading a checkpoint's tensors by their Hugging Face names (safetensors, sharded or not,
//! `pytorch_model.bin`, or seeded random values), checked for shape and promoted to f32.
//! Writing them back is `hf_names`.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use burn::module::{Param, ParamId};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::prelude::*;
use memmap2::Mmap;
use rand::SeedableRng;
use rand_distr::Distribution;
use safetensors::{Dtype, SafeTensors};

use crate::error::{BackboneError, Result};
use lsr_compute::norm::LayerNorm;

/// Named tensors of a checkpoint, read on demand and placed on a device as f32.
///
/// The architecture files ask for tensors by their Hugging Face names (`weights.pp("bert")
/// .linear("encoder.layer.0.attention.self.query", ..)`), so the names sit next to the fields they
/// fill. Three sources: safetensors files (one or sharded, memory-mapped), a PyTorch
/// `pytorch_model.bin`, or seeded random values for synthetic models of a given shape.
#[derive(Clone)]
pub struct Weights {
    store: Arc<Store>,
    prefix: String,
    device: Device,
    origins: Arc<Mutex<HashMap<ParamId, TensorOrigin>>>,
}

/// The Hugging Face tensors a parameter was read from, so that a trained model can be written
/// back under the family's own names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorOrigin {
    /// One name, or several when the parameter is their concatenation along PyTorch's first
    /// dimension, in equal parts (BERT's query, key and value as one projection).
    pub names: Vec<String>,
    /// Stored transposed in burn (a `Linear` weight is `[in, out]`, PyTorch's `[out, in]`).
    pub transposed: bool,
}

impl TensorOrigin {
    /// The HF tensors of `data`, the parameter's value in PyTorch layout: itself under its name,
    /// or its equal parts along the first dimension under theirs.
    pub fn split(&self, data: TensorData) -> Vec<(String, TensorData)> {
        if let [name] = self.names.as_slice() {
            return vec![(name.clone(), data)];
        }
        let mut shape = data.shape().to_vec();
        shape[0] /= self.names.len();
        let values = data
            .convert::<f32>()
            .try_into_vec::<f32>()
            .expect("f32 after convert");
        let part = values.len() / self.names.len();
        (self.names.iter().zip(values.chunks(part)))
            .map(|(name, values)| {
                (
                    name.clone(),
                    TensorData::new(values.to_vec(), shape.clone()),
                )
            })
            .collect()
    }
}

enum Store {
    Files(HashMap<String, StoredTensor>),
    Random { seed: u64, std: f32 },
}

struct StoredTensor {
    file: Arc<PathBuf>,
    shape: Vec<usize>,
    bytes: TensorBytes,
}

enum TensorBytes {
    Safetensors {
        map: Arc<Mmap>,
        range: std::ops::Range<usize>,
        dtype: Dtype,
    },
    Pytorch(pytorch_reader::Tensor),
}

/// What a random store fills a tensor with. Files ignore it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    Normal,
    Ones,
    Zeros,
}

impl Weights {
    /// Opens `model.safetensors`, a sharded `model.safetensors.index.json`, or
    /// `pytorch_model.bin`, whichever the path names.
    pub fn open(path: &Path, device: &Device) -> Result<Self> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let tensors = if name.ends_with(".index.json") {
            read_sharded_index(path)?
        } else if name.ends_with(".safetensors") {
            read_safetensors(path)?
        } else {
            read_pytorch(path)?
        };
        Ok(Self::from_store(Store::Files(tensors), device))
    }

    /// Random values for every tensor asked for: normal with standard deviation `std` (seeded
    /// by the tensor's name), or ones/zeros where the caller says so (LayerNorm scales and
    /// shifts). Used for synthetic models of a real shape (benchmarks, miniatures).
    pub fn random(seed: u64, std: f32, device: &Device) -> Self {
        Self::from_store(Store::Random { seed, std }, device)
    }

    fn from_store(store: Store, device: &Device) -> Self {
        Self {
            store: Arc::new(store),
            prefix: String::new(),
            device: device.clone(),
            origins: Arc::default(),
        }
    }

    /// The same weights, with `prefix.` put before every name asked for.
    pub fn pp(&self, prefix: &str) -> Self {
        Self {
            store: self.store.clone(),
            prefix: self.full_name(prefix),
            device: self.device.clone(),
            origins: self.origins.clone(),
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    fn full_name(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    /// Whether the tensor exists (a random store has every tensor).
    pub fn contains(&self, name: &str) -> bool {
        match &*self.store {
            Store::Files(tensors) => tensors.contains_key(&self.full_name(name)),
            Store::Random { .. } => true,
        }
    }

    /// Whether the tensor exists in a file (a random store has no optional tensors).
    pub fn contains_stored(&self, name: &str) -> bool {
        matches!(&*self.store, Store::Files(t) if t.contains_key(&self.full_name(name)))
    }

    /// The name and shape of every tensor in the files, as their headers declare them (none
    /// for a random store): what a reader of untrusted checkpoints can check them against.
    pub fn stored(&self) -> Vec<(String, Vec<usize>)> {
        match &*self.store {
            Store::Files(tensors) => tensors
                .iter()
                .map(|(name, t)| (name.clone(), t.shape.clone()))
                .collect(),
            Store::Random { .. } => Vec::new(),
        }
    }

    /// The files the tensors are read from, each once, in order (none for a random store).
    pub fn files(&self) -> Vec<PathBuf> {
        let Store::Files(tensors) = &*self.store else {
            return Vec::new();
        };
        let files: std::collections::BTreeSet<PathBuf> =
            tensors.values().map(|t| t.file.as_ref().clone()).collect();
        files.into_iter().collect()
    }

    /// The file that holds the tensor, or the first file of the checkpoint, for messages.
    pub fn describe_source(&self, name: &str) -> PathBuf {
        match &*self.store {
            Store::Files(tensors) => tensors
                .get(&self.full_name(name))
                .or_else(|| tensors.values().next())
                .map(|t| t.file.as_ref().clone())
                .unwrap_or_default(),
            Store::Random { .. } => PathBuf::from("<random weights>"),
        }
    }

    /// Reads a tensor of exactly `shape`, converting F16/BF16/F64 to f32.
    pub fn tensor<const D: usize>(&self, name: &str, shape: [usize; D]) -> Result<Tensor<D>> {
        self.tensor_init(name, shape, Init::Normal)
    }

    pub fn tensor_init<const D: usize>(
        &self,
        name: &str,
        shape: [usize; D],
        init: Init,
    ) -> Result<Tensor<D>> {
        let full = self.full_name(name);
        let values = match &*self.store {
            Store::Files(tensors) => {
                let stored = tensors
                    .get(&full)
                    .ok_or_else(|| BackboneError::MissingTensor {
                        path: self.describe_source(name),
                        name: full.clone(),
                    })?;
                if stored.shape != shape {
                    return Err(BackboneError::Shape {
                        path: stored.file.as_ref().clone(),
                        name: full,
                        found: stored.shape.clone(),
                        expected: shape.to_vec(),
                    });
                }
                stored.read_f32(&full)?
            }
            Store::Random { seed, std } => random_values(*seed, *std, &full, &shape, init),
        };
        Ok(Tensor::from_data(
            TensorData::new(values, shape),
            &self.device,
        ))
    }

    /// A parameter holding `value`, remembered as read from `name` (see [`Self::origins`]).
    pub fn param<const D: usize>(
        &self,
        name: &str,
        value: Tensor<D>,
        transposed: bool,
    ) -> Param<Tensor<D>> {
        self.param_of(&[name], value, transposed)
    }

    /// A parameter holding `value`, the concatenation of the tensors `names` (see
    /// [`TensorOrigin`]).
    fn param_of<const D: usize>(
        &self,
        names: &[&str],
        value: Tensor<D>,
        transposed: bool,
    ) -> Param<Tensor<D>> {
        let param = Param::from_tensor(value);
        let origin = TensorOrigin {
            names: names.iter().map(|name| self.full_name(name)).collect(),
            transposed,
        };
        self.origins
            .lock()
            .expect("no thread panics while holding the origins")
            .insert(param.id, origin);
        param
    }

    /// Every parameter made by [`Self::param`] (through any prefixed copy), by id.
    pub fn origins(&self) -> HashMap<ParamId, TensorOrigin> {
        self.origins
            .lock()
            .expect("no thread panics while holding the origins")
            .clone()
    }

    /// A PyTorch `nn.Linear` (`{prefix}.weight` as `[out, in]`, optional `{prefix}.bias`) as a
    /// burn `Linear` (weight stored `[in, out]`).
    pub fn linear(&self, prefix: &str, d_in: usize, d_out: usize, bias: bool) -> Result<Linear> {
        let w = self.pp(prefix);
        let mut linear = LinearConfig::new(d_in, d_out)
            .with_bias(false)
            .init(&self.device);
        linear.weight = w.param(
            "weight",
            w.tensor("weight", [d_out, d_in])?.transpose(),
            true,
        );
        if bias {
            let value = w.tensor_init("bias", [d_out], Init::Zeros)?;
            linear.bias = Some(w.param("bias", value, false));
        }
        Ok(linear)
    }

    /// The PyTorch `nn.Linear`s `prefixes`, each `d_in → d_out`, as one burn `Linear` with
    /// their outputs side by side (`[d_in, n · d_out]`): one product where a layer had several
    /// of the same input. Their names are kept for writing them back apart (`TensorOrigin`).
    pub fn fused_linear(
        &self,
        prefixes: &[&str],
        d_in: usize,
        d_out: usize,
        bias: bool,
    ) -> Result<Linear> {
        let names = |field: &str| -> Vec<String> {
            prefixes.iter().map(|p| format!("{p}.{field}")).collect()
        };
        let (weight_names, bias_names) = (names("weight"), names("bias"));
        let mut linear = LinearConfig::new(d_in, d_out * prefixes.len())
            .with_bias(false)
            .init(&self.device);
        let weights = (weight_names.iter())
            .map(|name| self.tensor(name, [d_out, d_in]))
            .collect::<Result<Vec<_>>>()?;
        let weight = Tensor::cat(weights, 0).transpose();
        linear.weight = self.param_of(&as_strs(&weight_names), weight, true);
        if bias {
            let biases = (bias_names.iter())
                .map(|name| self.tensor_init(name, [d_out], Init::Zeros))
                .collect::<Result<Vec<_>>>()?;
            let value = Tensor::cat(biases, 0);
            linear.bias = Some(self.param_of(&as_strs(&bias_names), value, false));
        }
        Ok(linear)
    }

    /// A LayerNorm stored as `weight`/`bias` or under the TF-era names `gamma`/`beta` (as the
    /// real `bert-base-uncased` file has them).
    pub fn layer_norm(&self, prefix: &str, dim: usize, eps: f64, bias: bool) -> Result<LayerNorm> {
        let w = self.pp(prefix);
        let pick = |modern: &'static str, legacy: &'static str| {
            if !w.contains(modern) && w.contains(legacy) {
                legacy
            } else {
                modern
            }
        };
        let scale = pick("weight", "gamma");
        let beta = if bias {
            let shift = pick("bias", "beta");
            Some(w.param(shift, w.tensor_init(shift, [dim], Init::Zeros)?, false))
        } else {
            None
        };
        Ok(LayerNorm {
            gamma: w.param(scale, w.tensor_init(scale, [dim], Init::Ones)?, false),
            beta,
            epsilon: eps,
        })
    }

    pub fn embedding(&self, name: &str, rows: usize, dim: usize) -> Result<Embedding> {
        let mut embedding = EmbeddingConfig::new(rows, dim).init(&self.device);
        embedding.weight = self.param(name, self.tensor(name, [rows, dim])?, false);
        Ok(embedding)
    }
}

fn as_strs(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).collect()
}

fn random_values(seed: u64, std: f32, name: &str, shape: &[usize], init: Init) -> Vec<f32> {
    let n = shape.iter().product();
    match init {
        Init::Ones => vec![1.0; n],
        Init::Zeros => vec![0.0; n],
        Init::Normal => {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (seed, name).hash(&mut hasher);
            let mut rng = rand::rngs::StdRng::seed_from_u64(hasher.finish());
            let normal = rand_distr::Normal::new(0.0f32, std).expect("finite std");
            (0..n).map(|_| normal.sample(&mut rng)).collect()
        }
    }
}

impl StoredTensor {
    fn read_f32(&self, name: &str) -> Result<Vec<f32>> {
        let dtype_error = |found: String| BackboneError::Dtype {
            path: self.file.as_ref().clone(),
            name: name.to_string(),
            found,
        };
        match &self.bytes {
            TensorBytes::Safetensors { map, range, dtype } => {
                let bytes = &map[range.clone()];
                match dtype {
                    Dtype::F32 => Ok(decode(bytes, f32::from_le_bytes)),
                    Dtype::F16 => Ok(decode(bytes, |b| half::f16::from_le_bytes(b).to_f32())),
                    Dtype::BF16 => Ok(decode(bytes, |b| half::bf16::from_le_bytes(b).to_f32())),
                    Dtype::F64 => Ok(decode(bytes, |b| f64::from_le_bytes(b) as f32)),
                    other => Err(dtype_error(format!("{other:?}"))),
                }
            }
            TensorBytes::Pytorch(tensor) => {
                use pytorch_reader::DType as P;
                let dtype = tensor.dtype();
                if !matches!(dtype, P::F32 | P::F16 | P::BF16 | P::F64) {
                    return Err(dtype_error(format!("{dtype:?}")));
                }
                let bytes = tensor.read().map_err(|e| BackboneError::Corrupt {
                    path: self.file.as_ref().clone(),
                    message: e.to_string(),
                })?;
                Ok(match dtype {
                    P::F32 => decode(&bytes, f32::from_ne_bytes),
                    P::F16 => decode(&bytes, |b| half::f16::from_ne_bytes(b).to_f32()),
                    P::BF16 => decode(&bytes, |b| half::bf16::from_ne_bytes(b).to_f32()),
                    _ => decode(&bytes, |b| f64::from_ne_bytes(b) as f32),
                })
            }
        }
    }
}

fn decode<const N: usize>(bytes: &[u8], convert: impl Fn([u8; N]) -> f32) -> Vec<f32> {
    bytes
        .chunks_exact(N)
        .map(|chunk| convert(chunk.try_into().expect("exact chunk")))
        .collect()
}

fn read_safetensors(path: &Path) -> Result<HashMap<String, StoredTensor>> {
    let file = File::open(path).map_err(|e| BackboneError::io(path, e))?;
    // SAFETY: checkpoints are read-only inputs; a file changed under us while mapped is the
    // same hazard every safetensors reader (including the Python one) accepts.
    let map = Arc::new(unsafe { Mmap::map(&file) }.map_err(|e| BackboneError::io(path, e))?);
    let corrupt = |message: String| BackboneError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    // `deserialize` checks that the header is valid and that the data section matches it,
    // which catches truncated files.
    SafeTensors::deserialize(&map).map_err(|e| corrupt(e.to_string()))?;
    let (header_len, metadata) =
        SafeTensors::read_metadata(&map).map_err(|e| corrupt(e.to_string()))?;
    let data_start = 8 + header_len;
    let file_name = Arc::new(path.to_path_buf());
    Ok(metadata
        .tensors()
        .into_iter()
        .map(|(name, info)| {
            let (start, end) = info.data_offsets;
            let stored = StoredTensor {
                file: file_name.clone(),
                shape: info.shape.clone(),
                bytes: TensorBytes::Safetensors {
                    map: map.clone(),
                    range: data_start + start..data_start + end,
                    dtype: info.dtype,
                },
            };
            (name, stored)
        })
        .collect())
}

fn read_sharded_index(path: &Path) -> Result<HashMap<String, StoredTensor>> {
    #[derive(serde::Deserialize)]
    struct Index {
        weight_map: HashMap<String, String>,
    }
    let text = std::fs::read_to_string(path).map_err(|e| BackboneError::io(path, e))?;
    let index: Index = serde_json::from_str(&text)
        .map_err(|e| BackboneError::config(path, format!("invalid shard index: {e}")))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut shards: Vec<&String> = index.weight_map.values().collect();
    shards.sort();
    shards.dedup();
    let mut tensors = HashMap::new();
    for shard in shards {
        let mut shard_tensors = read_safetensors(&dir.join(shard))?;
        for (name, file) in &index.weight_map {
            if file == shard {
                let stored =
                    shard_tensors
                        .remove(name)
                        .ok_or_else(|| BackboneError::MissingTensor {
                            path: dir.join(shard),
                            name: format!("{name} (listed in {})", path.display()),
                        })?;
                tensors.insert(name.clone(), stored);
            }
        }
    }
    Ok(tensors)
}

fn read_pytorch(path: &Path) -> Result<HashMap<String, StoredTensor>> {
    let reader = pytorch_reader::PytorchReader::new(path).map_err(|e| BackboneError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let file = Arc::new(path.to_path_buf());
    Ok(reader
        .into_tensors()
        .into_iter()
        .map(|(name, tensor)| {
            let stored = StoredTensor {
                file: file.clone(),
                shape: tensor.shape().to_vec(),
                bytes: TensorBytes::Pytorch(tensor),
            };
            (name, stored)
        })
        .collect())
}
