//! One training step against PyTorch (`lsr_train::reference`): the loss terms and every updated
//! weight of the tiny BERT and ModernBERT fixtures within 1e-4 of PyTorch's.

use burn::prelude::*;
use lsr_backbone::Precision;
use lsr_backbone::reference::fixtures_dir;
use lsr_train::reference::step_deviation;

fn check(family: &str) {
    let device = Device::flex().autodiff();
    let deviation = step_deviation(&fixtures_dir(), family, &device, Precision::F32).unwrap();
    for (name, ours, theirs) in &deviation.scalars {
        assert!(
            (ours - theirs).abs() <= 1e-4 * theirs.abs().max(1.0),
            "{family} {name}: {ours} vs PyTorch {theirs}"
        );
    }
    assert!(
        deviation.max_param_abs <= 1e-4,
        "{family} {}: max |Δ| {:e} after one step",
        deviation.worst_param,
        deviation.max_param_abs
    );
    assert_eq!(
        deviation.params_compared, deviation.params_named,
        "{family}: parameters compared"
    );
}

#[test]
fn bert_step_matches_pytorch() {
    check("bert");
}

#[test]
fn modernbert_step_matches_pytorch() {
    check("modernbert");
}
