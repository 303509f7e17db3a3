//! The distillation losses against naver/splade's and sentence-transformers' PyTorch code
//! (`lsr_train::reference::distillation_deviations`, `scripts/fixtures/distillation.py`): every
//! case's value and its gradient with respect to every query and document weight within the
//! training-step bounds (1e-4, relative to the larger of 1 and the anchors' value).

use burn::prelude::*;
use lsr_backbone::reference::fixtures_dir;
use lsr_train::reference::distillation_deviations;

#[test]
fn margin_mse_and_kl_div_equal_the_anchors_in_value_and_gradient() {
    let device = Device::flex().autodiff();
    let deviations = distillation_deviations(&fixtures_dir(), &device).unwrap();
    let cases: Vec<&str> = deviations.iter().map(|d| d.case.as_str()).collect();
    assert_eq!(
        cases,
        [
            "kl-div+contrastive",
            "kl-div-1",
            "kl-div-2",
            "margin-mse-1",
            "margin-mse-3"
        ]
    );
    for deviation in &deviations {
        let (ours, theirs) = deviation.loss;
        assert!(
            (ours - theirs).abs() <= 1e-4 * theirs.abs().max(1.0),
            "{}: loss {ours} vs {theirs}",
            deviation.case
        );
        assert!(
            deviation.max_grad_abs <= 1e-4 * deviation.max_grad.max(1.0),
            "{}: gradient off by {:e} (largest {:e})",
            deviation.case,
            deviation.max_grad_abs,
            deviation.max_grad
        );
        assert!(deviation.max_grad > 0.0, "{}: no gradient", deviation.case);
    }
}
