//! The Hugging Face name of every parameter, by module path: what a loader recorded of each
//! tensor (name, transposed or not), kept so that a trained model can be written back under
//! the family's own names (`hf_writer`).

use std::collections::{BTreeMap, HashMap};

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::prelude::*;

use crate::weights::TensorOrigin;

/// Module path (`encoder.Bert.layers.0.attention.query.weight`) → the HF tensor it came from.
/// Keyed by path rather than `ParamId` because loading a burn record restores the ids it was
/// saved with.
#[derive(Clone, Debug, Default)]
pub struct TensorNames {
    by_path: BTreeMap<String, TensorOrigin>,
}

impl TensorNames {
    /// Matches every parameter of `model` with the origin its loader recorded.
    pub fn collect(model: &impl Module, origins: &HashMap<ParamId, TensorOrigin>) -> Self {
        let mut visitor =
            PathVisitor::new(|path: &str, id: ParamId, _: TensorData| (id, path.to_string()));
        visitor.read_values = false;
        model.visit(&mut visitor);
        let by_path = visitor
            .found
            .into_iter()
            .filter_map(|(id, path)| origins.get(&id).map(|origin| (path, origin.clone())))
            .collect();
        Self { by_path }
    }

    pub fn get(&self, path: &str) -> Option<&TensorOrigin> {
        self.by_path.get(path)
    }

    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }
}

/// Every float parameter of `model` in PyTorch layout (Linear weights transposed back), keyed by
/// module path.
pub fn parameter_values(model: &impl Module, names: &TensorNames) -> Vec<(String, TensorData)> {
    let mut visitor =
        PathVisitor::new(|path: &str, _: ParamId, data: TensorData| (path.to_string(), data));
    visitor.transposed = Some(names);
    model.visit(&mut visitor);
    visitor.found
}

/// Walks a module keeping the path of each parameter (`enter_module` names every field).
struct PathVisitor<'a, T, F: FnMut(&str, ParamId, TensorData) -> T> {
    stack: Vec<String>,
    found: Vec<T>,
    make: F,
    read_values: bool,
    /// When set, tensors recorded as transposed are transposed back before reading.
    transposed: Option<&'a TensorNames>,
}

impl<'a, T, F: FnMut(&str, ParamId, TensorData) -> T> PathVisitor<'a, T, F> {
    fn new(make: F) -> Self {
        Self {
            stack: Vec::new(),
            found: Vec::new(),
            make,
            read_values: true,
            transposed: None,
        }
    }
}

impl<T, F: FnMut(&str, ParamId, TensorData) -> T> ModuleVisitor for PathVisitor<'_, T, F> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.stack.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.stack.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.stack.join(".");
        let data = if self.read_values {
            let value = param.val();
            let transposed = self
                .transposed
                .and_then(|names| names.get(&path))
                .is_some_and(|origin| origin.transposed);
            let value = if transposed { value.transpose() } else { value };
            value.into_data()
        } else {
            TensorData::new(Vec::<f32>::new(), [0])
        };
        self.found.push((self.make)(&path, param.id, data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Backbone;
    use crate::reference::fixtures_dir;

    #[test]
    fn every_parameter_of_every_family_has_a_hugging_face_name() {
        for family in crate::family::FAMILIES.iter().map(|f| f.name) {
            let dir = fixtures_dir().join(family);
            let backbone = Backbone::load(dir.to_str().unwrap(), &Device::flex(), 32).unwrap();
            let values = parameter_values(&backbone.model, &backbone.tensor_names);
            let unnamed: Vec<&String> = values
                .iter()
                .map(|(path, _)| path)
                .filter(|path| backbone.tensor_names.get(path).is_none())
                .collect();
            // ModernBERT without a decoder bias keeps a zero bias HF does not have.
            assert!(unnamed.is_empty(), "{family}: {unnamed:?}");
            assert_eq!(values.len(), backbone.tensor_names.len(), "{family}");
        }
    }
}
