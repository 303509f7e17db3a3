//! One training step against PyTorch (`lsr_train::reference`): the loss terms and every updated
//! weight of the tiny BERT and ModernBERT fixtures within 1e-4 of PyTorch's, with lsr's former
//! options, with naver/splade's and distilling from a teacher's scores (MarginMSE as SPLADE++,
//! KL-Div at temperature 2 beside the contrastive loss); in bf16-mixed, as close to PyTorch's f32 step as PyTorch's
//! own bf16 autocast step comes (within twice).

use burn::prelude::*;
use lsr_backbone::reference::fixtures_dir;
use lsr_compute::Precision;
use lsr_train::reference::{bf16_step_bounds, step_deviation};

fn check(family: &str, variant: Option<&str>) {
    // The step seeds the process's generator, which a test drawing dropout masks must not see.
    let _lock = crate::one_run_at_a_time();
    let device = Device::flex().autodiff();
    let deviation =
        step_deviation(&fixtures_dir(), family, variant, &device, Precision::F32).unwrap();
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
    check("bert", None);
}

#[test]
fn modernbert_step_matches_pytorch() {
    check("modernbert", None);
}

#[test]
fn steps_with_naver_splade_options_match_pytorch() {
    check("bert", Some("naver"));
    check("modernbert", Some("naver"));
}

#[test]
fn steps_distilling_with_margin_mse_and_kl_div_match_pytorch() {
    for family in ["bert", "modernbert"] {
        check(family, Some("margin-mse"));
        check(family, Some("kl-div"));
    }
}

#[test]
fn bf16_mixed_steps_land_as_close_as_pytorch_autocast() {
    let _lock = crate::one_run_at_a_time();
    let (scalars_bound, update_bound) = bf16_step_bounds(&fixtures_dir()).unwrap();
    let device = Device::flex().autodiff();
    for family in ["bert", "modernbert"] {
        let deviation =
            step_deviation(&fixtures_dir(), family, None, &device, Precision::Bf16Mixed).unwrap();
        assert!(
            deviation.max_scalar_rel() <= scalars_bound,
            "{family}: loss terms off by {:e} (bound {scalars_bound:e})",
            deviation.max_scalar_rel()
        );
        assert!(
            deviation.update_rel_l2 <= update_bound,
            "{family}: update off by {:e} (bound {update_bound:e})",
            deviation.update_rel_l2
        );
        // bf16 rounding shows: the step is not f32's.
        assert!(
            deviation.update_rel_l2 > 1e-3,
            "{family}: bf16-mixed gave f32's step"
        );
    }
}
