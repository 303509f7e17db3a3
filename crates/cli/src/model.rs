//! The arguments every encoding command shares (checkpoint, k, rescale mode, device,
//! precision) and the one place they become a `SpladeEncoder`.

use anyhow::{Result, anyhow};
use clap::Args;
use lsr_backbone::{Backbone, BackboneError, RescaleMode, Scale};
use lsr_compute::{Precision, parse_device};
use lsr_splade::SpladeEncoder;

/// The model a command encodes with: a checkpoint, its rescaling and the device.
#[derive(Args)]
pub struct ModelArgs {
    /// Checkpoint directory or Hugging Face id.
    #[arg(long)]
    checkpoint: String,
    /// Divide the MLM-head decoder by k before encoding (the paper's rescaling).
    #[arg(long, default_value_t = Scale::ONE)]
    k: Scale,
    /// With a tied decoder, rescale an untied copy instead of the shared matrix.
    #[arg(long)]
    untie: bool,
    /// Divide by k even a head that lsr has already divided (an export records its k).
    #[arg(long)]
    rescale_again: bool,
    /// flex, wgpu[:N] or cuda[:N]; default: `$LSR_DEVICE`, else the best backend that starts here.
    #[arg(long)]
    device: Option<String>,
    /// f32, bf16-mixed (bf16 matrix products and activations; SPLADE weights in f32), or bf16
    /// (a CPU with AVX512_BF16 or AMX, products through a CPU BLAS from bf16 operands).
    #[arg(long, default_value = "f32")]
    precision: Precision,
}

impl ModelArgs {
    /// Encodes on `device`, whatever `--device` said.
    pub fn on_device(&mut self, device: &str) {
        self.device = Some(device.to_string());
    }

    /// Loads the checkpoint (texts truncated to `max_length` tokens) and rescales its head.
    pub fn encoder(&self, max_length: usize) -> Result<SpladeEncoder> {
        let device = parse_device(self.device.as_deref())?;
        self.precision.usable_on(&device)?;
        let mut backbone = Backbone::load(&self.checkpoint, &device, max_length)?;
        backbone.model = backbone.model.with_precision(self.precision);
        let mode = RescaleMode::untie_if(self.untie);
        if self.rescale_again {
            backbone.model = backbone.model.rescale_mlm_head_again(self.k, mode)?;
            return Ok(SpladeEncoder::new(backbone, Scale::ONE, mode)?);
        }
        SpladeEncoder::new(backbone, self.k, mode).map_err(|error| match error {
            BackboneError::AlreadyRescaled { .. } => anyhow!(
                "{error} (`--k 1`), or pass `--rescale-again` to divide it by {} once more",
                self.k
            ),
            error => error.into(),
        })
    }
}
