//! What a matrix fixes of the inputs it names, as `lsr matrix status` reports it: each
//! backbone's hub commit (a name without one loads whatever its branch is that day), and how
//! the files of each evaluated and validation data set are checked when fetched (md5, and the
//! commit of hub repositories). Read from the file alone, nothing on disk; and whether two
//! matrices meant to be compared train the same checkpoints.

use lsr_backbone::Pinning;
use lsr_data::registry::{Pins, pins};

use crate::spec::Matrix;

/// A backbone of the matrix and what its checkpoint name fixes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackbonePin {
    pub backbone: String,
    pub checkpoint: String,
    pub pinning: Pinning,
}

/// A data set the matrix evaluates or validates on, and how its downloads are pinned (`Err`:
/// why lsr does not download it, e.g. a set copied by hand).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataPin {
    pub dataset: String,
    pub pins: std::result::Result<Pins, String>,
}

impl Matrix {
    /// Each backbone once, in the file's order.
    pub fn backbone_pins(&self) -> Vec<BackbonePin> {
        let mut found: Vec<BackbonePin> = Vec::new();
        for cell in &self.cells {
            if found.iter().all(|pin| pin.backbone != cell.backbone) {
                let checkpoint = cell.config.model.checkpoint.clone();
                found.push(BackbonePin {
                    backbone: cell.backbone.clone(),
                    pinning: Pinning::of(&checkpoint),
                    checkpoint,
                });
            }
        }
        found
    }

    /// How this matrix's backbones differ from `other`'s, a line each: a backbone only one of
    /// them trains, or trained from another checkpoint (id or commit). Empty: the same.
    pub fn backbone_differences(&self, other: &Matrix) -> Vec<String> {
        let (here, there) = (self.backbone_pins(), other.backbone_pins());
        let find = |pins: &[BackbonePin], name: &str| {
            (pins.iter().find(|pin| pin.backbone == name)).map(|pin| pin.checkpoint.clone())
        };
        let mut differences = Vec::new();
        for pin in &here {
            match find(&there, &pin.backbone) {
                None => differences.push(format!("backbone `{}` only here", pin.backbone)),
                Some(checkpoint) if checkpoint != pin.checkpoint => differences.push(format!(
                    "backbone `{}` is `{}` here, `{checkpoint}` there",
                    pin.backbone, pin.checkpoint
                )),
                Some(_) => {}
            }
        }
        for pin in there
            .iter()
            .filter(|pin| find(&here, &pin.backbone).is_none())
        {
            differences.push(format!("backbone `{}` only there", pin.backbone));
        }
        differences
    }

    /// The evaluated data sets, in the file's order, then the validation set if there is one.
    pub fn data_pins(&self) -> Vec<DataPin> {
        let validation = self.cells[0].config.validation.as_ref();
        let names = self
            .eval
            .datasets
            .iter()
            .chain(validation.map(|v| &v.dataset));
        names
            .map(|name| DataPin {
                dataset: name.clone(),
                pins: pins(name).map_err(|e| e.to_string()),
            })
            .collect()
    }
}

impl std::fmt::Display for BackbonePin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.pinning {
            Pinning::Commit { commit, .. } => format!("pinned at commit {commit}"),
            Pinning::Unpinned { revision, .. } => {
                format!("not pinned: loads the hub's `{revision}` of the day")
            }
            Pinning::Local => "a local directory".into(),
        };
        write!(
            f,
            "backbone {}\t{}\t{state}",
            self.backbone, self.checkpoint
        )
    }
}

impl std::fmt::Display for DataPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pins {
            Ok(pins) => write!(f, "data {}\t{pins}", self.dataset),
            Err(why) => write!(f, "data {}\tnot pinned: {why}", self.dataset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table1_pins_its_backbones_and_data() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/table1.toml");
        let matrix = Matrix::load(std::path::Path::new(path)).unwrap();
        let backbones = matrix.backbone_pins();
        assert_eq!(backbones.len(), 7);
        for pin in &backbones {
            assert!(
                lsr_backbone::hub_id(&pin.checkpoint).is_some_and(|id| id.contains('/')),
                "{pin}: a canonical hub id"
            );
        }
        let unpinned: Vec<&str> = backbones
            .iter()
            .filter(|pin| !matches!(pin.pinning, Pinning::Commit { .. }))
            .map(|pin| pin.backbone.as_str())
            .collect();
        // No published source records a commit of Alibaba-NLP/gte-en-mlm-base (docs/backbones.md).
        assert_eq!(unpinned, ["gte"]);
        for data in matrix.data_pins() {
            assert!(data.pins.as_ref().is_ok_and(Pins::all_pinned), "{data}");
        }
    }
}
