//! What the matrix tests share: a small synthetic task with miniature backbones, and the head of
//! a matrix file over it.

use std::path::Path;

use lsr_data::miniature::{SynthSpec, vocabulary, write_synthetic};

/// Writes the synthetic task (`synth-a` to test on, `synth-val` to validate on) into
/// `<root>/synth` and a miniature of each `(family, decoder row norm)` into
/// `<root>/models/<family>`.
pub fn task(root: &Path, families: &[(&str, f64)]) {
    let spec = SynthSpec {
        entities: 12,
        train_triples: 40,
        test_sets: vec![("synth-a".into(), 8), ("synth-val".into(), 8)],
        ..SynthSpec::default()
    };
    write_synthetic(&spec, &root.join("synth")).unwrap();
    let words = vocabulary(&spec);
    for (family, norm) in families {
        let out = root.join("models").join(family);
        lsr_backbone::miniature::write_miniature(family, &words, *norm, 3, &out).unwrap();
    }
}

/// A matrix file's name, paths under `root`, flex, the k grid, `[eval]` on `synth-a` with
/// `measures`, and `[data]`: the rest (validation, recipe, backbones) is the test's.
pub fn head(root: &Path, name: &str, k: &str, measures: &str) -> String {
    format!(
        r#"name = "{name}"
results = "{root}/results"
checkpoints = "{root}/checkpoints"
device = "flex"
k = {k}

[eval]
data_root = "{root}/synth"
datasets = ["beir/synth-a"]
measures = {measures}
batch_size = 16
query_max_length = 16
document_max_length = 32
top_k = 10
tradeoff = "beir/synth-a"

[data]
format = "triples"
triples = "{root}/synth/train/triples.tsv"
"#,
        root = root.display()
    )
}

/// A `[recipe]` for the small task: `steps`, the warm-ups and the checkpoint interval as given,
/// batches of 4 and lengths that cut no synthetic text.
pub fn recipe(
    steps: usize,
    warmup: usize,
    lambda_warmup: usize,
    checkpoint_every: usize,
) -> String {
    format!(
        "[recipe]\nsteps = {steps}\nbatch_size = 4\nwarmup_steps = {warmup}\n\
         lambda_warmup_steps = {lambda_warmup}\ncheckpoint_every = {checkpoint_every}\n\
         query_max_length = 16\ndocument_max_length = 32\n"
    )
}

/// A `[[backbone]]` of the miniature of `family` that `task` wrote under `root`.
pub fn backbone(root: &Path, family: &str) -> String {
    format!(
        "[[backbone]]\nname = \"{family}\"\ncheckpoint = \"{}/models/{family}\"\n",
        root.display()
    )
}
