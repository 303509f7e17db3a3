//! Whole training runs on the tiny fixture models and `data/fixtures/train`, with the dropout
//! of the fixtures' configs (0.1 for BERT) unless a test says otherwise.

use std::path::{Path, PathBuf};

use crate::one_run_at_a_time;
use lsr_backbone::Scale;
use lsr_backbone::reference::fixtures_dir;
use lsr_compute::Precision;
use lsr_files::damage::Damage;
use lsr_files::{RunStatus, StatusFile, TrainCsv, tensorboard};
use lsr_train::{
    Batching, DataConfig, Distillation, ModelSpec, Outcome, Recipe, TrainConfig, ValidationConfig,
    ValidationScores, Validator, train, train_validated,
};

fn config(output: &Path, family: &str, steps: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec {
            checkpoint: fixtures_dir().join(family).display().to_string(),
            k: Scale::ONE,
            untie: false,
        },
        recipe: Recipe {
            steps,
            batch_size: 4,
            warmup_steps: steps.min(4),
            lr: 1e-3,
            lambda_q: 1e-3,
            lambda_d: 1e-3,
            lambda_warmup_steps: 10,
            checkpoint_every: 5,
            keep_checkpoints: 10,
            query_max_length: 16,
            document_max_length: 32,
            ..Recipe::default()
        },
        data: DataConfig::Triples {
            triples: fixtures_dir().join("train/triples.tsv"),
        },
        output: output.to_path_buf(),
        checkpoints: None,
        device: Some("flex".into()),
        validation: None,
    }
}

fn column(path: &Path, name: &str) -> Vec<f64> {
    TrainCsv::read(path).unwrap().require(name).unwrap()
}

fn finished_model(outcome: Outcome) -> PathBuf {
    match outcome {
        Outcome::Finished { model, .. } => model,
        other => panic!("expected a finished run, got {other:?}"),
    }
}

#[test]
fn the_ranking_loss_falls() {
    let _lock = one_run_at_a_time();
    for family in ["bert", "modernbert"] {
        let dir = tempfile::tempdir().unwrap();
        // Dropout's noise over 40 steps of a tiny model hides the trend this test measures.
        let mut config = config(dir.path(), family, 40);
        config.recipe.dropout = false;
        let outcome = train(&config, false).unwrap();
        finished_model(outcome);
        let ranking = column(&dir.path().join("train.csv"), "ranking_loss");
        assert_eq!(ranking.len(), 40);
        let first: f64 = ranking[..10].iter().sum::<f64>() / 10.0;
        let last: f64 = ranking[30..].iter().sum::<f64>() / 10.0;
        assert!(
            last < 0.5 * first,
            "{family}: ranking loss {first} → {last}"
        );
    }
}

#[test]
fn bf16_mixed_learns_and_keeps_f32_weights() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "modernbert", 40);
    config.recipe.precision = Precision::Bf16Mixed;
    let model = finished_model(train(&config, false).unwrap());
    let ranking = column(&dir.path().join("train.csv"), "ranking_loss");
    let first: f64 = ranking[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = ranking[30..].iter().sum::<f64>() / 10.0;
    assert!(
        last < 0.5 * first,
        "bf16-mixed: ranking loss {first} → {last}"
    );
    let bytes = std::fs::read(model.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    for (name, view) in file.tensors() {
        assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
    }
}

#[test]
fn id_triples_and_jsonl_with_two_negatives_train() {
    let _lock = one_run_at_a_time();
    let data = fixtures_dir().join("train");
    let dir = tempfile::tempdir().unwrap();
    let mut ids = config(&dir.path().join("ids"), "bert", 3);
    ids.data = DataConfig::IdTriples {
        triples: data.join("qidpidtriples.tsv"),
        queries: data.join("queries.tsv"),
        collection: data.join("collection.tsv"),
    };
    finished_model(train(&ids, false).unwrap());
    let mut jsonl = config(&dir.path().join("jsonl"), "bert", 3);
    jsonl.data = DataConfig::Jsonl {
        triples: data.join("triples.jsonl"),
    };
    jsonl.recipe.negatives = 2;
    jsonl.recipe.accumulation = 2;
    let jsonl = jsonl.validated("test").unwrap();
    finished_model(train(&jsonl, false).unwrap());
    assert_eq!(
        column(&dir.path().join("jsonl/train.csv"), "step"),
        vec![1.0, 2.0, 3.0]
    );
}

#[test]
fn a_hugely_scaled_up_head_collapses_and_the_collapse_is_recorded() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut cell = config(dir.path(), "bert", 20);
    // ×1e39 puts the logits past f32's range: the scores are infinite and the loss NaN.
    cell.model.k = Scale::new(1e-39).unwrap();
    let outcome = train(&cell, false).unwrap();
    let (step, reason, model) = collapsed(outcome);
    assert_eq!(step, 1);
    assert!(reason.contains("non-finite loss"), "{reason}");
    assert_eq!(model, None, "non-finite weights are not exported");
    let status = StatusFile::read(dir.path()).unwrap().unwrap();
    assert_eq!(status.status, RunStatus::Collapsed);
    assert_eq!(status.step, 1);
    assert_eq!(status.reason.as_deref(), Some(reason.as_str()));
    assert_eq!(column(&dir.path().join("train.csv"), "step"), vec![1.0]);
    assert!(dir.path().join("config.toml").exists());
    // Asking again returns the recorded result instead of training.
    assert_eq!(
        train(&cell, true).unwrap(),
        Outcome::Collapsed {
            step,
            reason,
            model
        }
    );
}

#[test]
fn a_run_whose_documents_die_collapses_with_its_model_exported() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut cell = config(dir.path(), "bert", 40);
    // A FLOPS weight that dwarfs the ranking loss, at once: every term is pushed below zero.
    cell.recipe.lambda_q = 1e3;
    cell.recipe.lambda_d = 1e3;
    cell.recipe.lambda_warmup_steps = 0;
    cell.recipe.warmup_steps = 0;
    cell.recipe.lr = 0.05;
    cell.recipe.collapse_patience = 2;
    cell.recipe.log_every = 1000;
    let outcome = train(&cell, false).unwrap();
    let (step, reason, model) = collapsed(outcome);
    assert!(reason.contains("all document vectors zero"), "{reason}");
    // The collapse is logged off `log_every`: with what every step computes (the losses and
    // L0s), and NaN for what only a logged step does.
    let log = dir.path().join("train.csv");
    assert_eq!(column(&log, "step"), [step as f64]);
    assert_eq!(column(&log, "l0_d"), [0.0]);
    assert!(column(&log, "loss")[0].is_finite());
    assert!(column(&log, "flops")[0].is_nan() && column(&log, "max_activation")[0].is_nan());
    let model = model.expect("finite weights are exported");
    let status = StatusFile::read(dir.path()).unwrap().unwrap();
    assert_eq!(status.model.as_ref(), Some(&model));
    let device = burn::prelude::Device::flex();
    lsr_backbone::Backbone::load(model.to_str().unwrap(), &device, 32).unwrap();
}

#[test]
fn resuming_after_a_kill_reaches_the_same_weights_without_lost_or_repeated_steps() {
    resumes_exactly(Precision::F32, false);
}

#[test]
fn resuming_stays_exact_in_bf16_mixed() {
    resumes_exactly(Precision::Bf16Mixed, false);
}

/// Negatives drawn from a teacher's scores, distillation and gradient caching resume as exactly.
#[test]
fn a_distilled_cached_run_resumes_exactly() {
    resumes_exactly(Precision::F32, true);
}

/// The tiny training data with its teacher (`scripts/fixtures/distillation.py`), two negatives
/// drawn per query, KL-Div beside the contrastive loss, 2 cached micro-batches.
fn distilled(mut config: TrainConfig) -> TrainConfig {
    let data = fixtures_dir().join("train");
    config.data = DataConfig::PickleScores {
        scores: data.join("scores.pkl.gz"),
        qrels: data.join("qrels.tsv"),
        queries: data.join("queries.tsv"),
        collection: data.join("collection.tsv"),
    };
    config.recipe.negatives = 2;
    config.recipe.accumulation = 2;
    config.recipe.batching = Batching::Cached;
    config.recipe.distillation = Distillation::KlDiv {
        weight: 1.0,
        temperature: 1.0,
    };
    config.validated("test").unwrap()
}

/// The teacher as Python floats, as NumPy's int64 ids and float32 scores, and with its first
/// query written as 100 and '100' (`scripts/fixtures/numpy_pickles.py`): one table, so one
/// step-1 loss, distillation's included.
#[test]
fn numpy_scores_and_ids_written_two_ways_train_as_python_floats_do() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let first_step = |scores: &str| {
        let output = dir.path().join(scores);
        let mut config = distilled(config(&output, "bert", 1));
        let DataConfig::PickleScores { scores: path, .. } = &mut config.data else {
            unreachable!()
        };
        *path = fixtures_dir().join("train").join(scores);
        finished_model(train(&config, false).unwrap());
        let log = output.join("train.csv");
        let first = |name: &str| column(&log, name)[0];
        [first("loss"), first("ranking_loss"), first("grad_norm")]
    };
    let python = first_step("scores.pkl.gz");
    assert!(
        python.iter().all(|v| v.is_finite() && *v > 0.0),
        "{python:?}"
    );
    assert_eq!(first_step("scores-numpy.pkl.gz"), python);
    assert_eq!(first_step("scores-respelled.pkl.gz"), python);
}

fn resumes_exactly(precision: Precision, distil: bool) {
    let _lock = one_run_at_a_time();
    let config = |output: &Path, family: &str, steps: usize| {
        let mut config = config(output, family, steps);
        config.recipe.precision = precision;
        match distil {
            true => distilled(config),
            false => config,
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let reference = finished_model(train(&config(&whole, "bert", 17), false).unwrap());

    // The state a SIGKILL at step 13 leaves: checkpoints 5 and 10, the log through step 13 (one
    // row cut mid-write; TensorBoard's through step 17, its last record cut short), status
    // "running", and a half-written checkpoint directory.
    let killed = dir.path().join("killed");
    std::fs::create_dir_all(killed.join("checkpoints")).unwrap();
    for step in ["step-00000005", "step-00000010"] {
        copy_dir(
            &whole.join("checkpoints").join(step),
            &killed.join("checkpoints").join(step),
        );
    }
    std::fs::create_dir_all(killed.join("checkpoints/step-00000015.partial")).unwrap();
    let log = std::fs::read_to_string(whole.join("train.csv")).unwrap();
    let mut lines: Vec<&str> = log.lines().take(14).collect();
    lines.push("14,0.0009");
    std::fs::write(killed.join("train.csv"), lines.join("\n")).unwrap();
    let events = tensorboard::event_files(&whole).unwrap().remove(0);
    let bytes = std::fs::read(&events).unwrap();
    let killed_events = killed.join(events.file_name().unwrap());
    std::fs::write(&killed_events, &bytes[..bytes.len() - 2]).unwrap();
    let status = std::fs::read_to_string(whole.join("status.json")).unwrap();
    std::fs::write(
        killed.join("status.json"),
        status.replace("finished", "running"),
    )
    .unwrap();

    let refused = train(&config(&killed, "bert", 17), false).unwrap_err();
    assert!(refused.to_string().contains("--resume"), "{refused}");
    let resumed = finished_model(train(&config(&killed, "bert", 17), true).unwrap());

    let (a, b) = (read(&reference), read(&resumed));
    assert!(
        a == b,
        "resumed weights differ from the uninterrupted run's"
    );
    let steps = column(&killed.join("train.csv"), "step");
    assert_eq!(steps, (1..=17).map(f64::from).collect::<Vec<_>>());
    let losses = (
        column(&whole.join("train.csv"), "loss"),
        column(&killed.join("train.csv"), "loss"),
    );
    assert_eq!(losses.0, losses.1);
    // TensorBoard: each step once, the resumed ones as the uninterrupted run logged them, and
    // the restart marked where it happened.
    let (whole_run, resumed_run) = (
        tensorboard::read_run(&whole).unwrap(),
        tensorboard::read_run(&killed).unwrap(),
    );
    assert_eq!(
        resumed_run.scalars["train/loss"],
        whole_run.scalars["train/loss"]
    );
    assert_eq!(resumed_run.starts, [11]);
    assert_eq!(resumed_run.texts["settings"], whole_run.texts["settings"]);
}

/// A checkpoint written before the optimiser's flat buffer and before q, k and v were one
/// product (burn's per-parameter record, q, k and v apart: `scripts/fixtures/
/// per_parameter_checkpoint.sh`) resumes: the step after it gives the weights that run exported,
/// but for the rounding of the one product against three: 3e-8 at most on an AMD EPYC, and 1.9e-5
/// in the key's bias, whose gradient is rounding alone (a shift of every key by one vector moves
/// a row's scores together, which softmax ignores) and which AdamW scales up to a step of its
/// own. The bound, a twentieth of the learning rate, is far below what a lost or misplaced
/// moment does to a step: AdamW moves each weight by about lr.
#[test]
fn a_checkpoint_of_the_per_parameter_optimiser_resumes() {
    let _lock = one_run_at_a_time();
    let fixture = fixtures_dir().join("checkpoint-per-parameter");
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "bert", 6);
    // The script's, which keeps burn's default; it changes no step.
    config.recipe.keep_checkpoints = 2;
    let written = std::fs::read_to_string(fixture.join("step-00000005/config.toml")).unwrap();
    let recipe =
        |toml: &str| toml[toml.find("[recipe]").unwrap()..toml.find("[data]").unwrap()].to_string();
    assert_eq!(
        recipe(&written),
        recipe(&config.to_toml()),
        "the fixture's recipe"
    );
    copy_dir(
        &fixture.join("step-00000005"),
        &dir.path().join("checkpoints/step-00000005"),
    );
    let resumed = finished_model(train(&config, true).unwrap());
    assert_eq!(column(&dir.path().join("train.csv"), "step"), [6.0]);
    let tensors = |bytes: &[u8]| {
        let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
        let mut all: Vec<(String, Vec<f32>)> = (file.tensors().into_iter())
            .map(|(name, view)| {
                let values = view.data().chunks_exact(4);
                (
                    name,
                    values
                        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                        .collect(),
                )
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    };
    let expected = tensors(&std::fs::read(fixture.join("step-00000006.safetensors")).unwrap());
    let found = tensors(&read(&resumed));
    assert_eq!(expected.len(), found.len());
    let bound = config.recipe.lr as f32 / 20.0;
    for ((name, want), (_, got)) in expected.iter().zip(&found) {
        let off = want
            .iter()
            .zip(got)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(off <= bound, "{name}: {off} off, more than {bound}");
    }
}

/// The state a kill at step 13 leaves (as in `resumes_exactly`), with the newest checkpoint,
/// step 10, damaged in one of its records (cut short, or a byte flipped): the resume passes over
/// it (removing it) for step 5 and ends with the uninterrupted run's weights and log.
#[test]
fn a_damaged_checkpoint_costs_its_steps_and_the_resume_ends_as_an_uninterrupted_run() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let reference = finished_model(train(&config(&whole, "bert", 17), false).unwrap());
    for (record, damage) in [
        ("model.bpk", Damage::CutShort),
        ("optimizer.bpk", Damage::Flipped),
        ("state.json", Damage::Flipped),
    ] {
        let what = format!("{record} {damage}");
        let killed = dir.path().join(&what);
        for step in ["step-00000005", "step-00000010"] {
            let checkpoints = killed.join("checkpoints");
            copy_dir(
                &whole.join("checkpoints").join(step),
                &checkpoints.join(step),
            );
        }
        let log = std::fs::read_to_string(whole.join("train.csv")).unwrap();
        let lines: Vec<&str> = log.lines().take(14).collect();
        std::fs::write(killed.join("train.csv"), lines.join("\n")).unwrap();
        let status = std::fs::read_to_string(whole.join("status.json")).unwrap();
        let status = status.replace("finished", "running");
        std::fs::write(killed.join("status.json"), status).unwrap();
        let damaged = killed.join("checkpoints/step-00000010");
        damage.apply(&damaged.join(record)).unwrap();

        let flex = burn::prelude::Device::flex();
        let refused = lsr_train::checkpoint::export(&damaged, &dir.path().join("x"), &flex);
        let refused = refused.unwrap_err().to_string();
        assert!(
            refused.contains("damaged since it was written") && refused.contains(record),
            "{refused}"
        );
        let resumed = finished_model(train(&config(&killed, "bert", 17), true).unwrap());
        assert!(read(&reference) == read(&resumed), "{what}: weights differ");
        // Written again when step 10 was trained again (records are not compared: their bytes
        // hold ids burn draws per load).
        assert_eq!(
            lsr_files::digest::check(&damaged).unwrap(),
            lsr_files::digest::Checked::Intact,
            "{what}: step 10 is not checkpointed again"
        );
        let steps = column(&killed.join("train.csv"), "step");
        assert_eq!(steps, (1..=17).map(f64::from).collect::<Vec<_>>(), "{what}");
        let losses = column(&killed.join("train.csv"), "loss");
        assert_eq!(column(&whole.join("train.csv"), "loss"), losses, "{what}");
    }
}

fn read(model_dir: &Path) -> Vec<u8> {
    std::fs::read(model_dir.join("model.safetensors")).unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn bad_data_fails_before_anything_is_written() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let mut cell = config(&output, "bert", 3);
    cell.data = DataConfig::Triples {
        triples: dir.path().join("missing.tsv"),
    };
    let error = train(&cell, false).unwrap_err().to_string();
    assert!(error.contains("missing.tsv"), "{error}");
    assert!(!output.exists());

    let empty = dir.path().join("empty.tsv");
    std::fs::write(&empty, "").unwrap();
    cell.data = DataConfig::Triples { triples: empty };
    let error = train(&cell, false).unwrap_err().to_string();
    assert!(
        error.contains("empty.tsv") && error.contains("empty"),
        "{error}"
    );

    // A malformed line is found when its batch is read: the run stops as failed, naming it.
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "q\tp\tn\nq\tp\tn\nq only\nq\tp\tn\n").unwrap();
    cell.data = DataConfig::Triples { triples: bad };
    let error = train(&cell, false).unwrap_err().to_string();
    assert!(error.contains("bad.tsv:3"), "{error}");
    let status = StatusFile::read(&output).unwrap().unwrap();
    assert_eq!(status.status, RunStatus::Failed);
    assert!(status.reason.unwrap().contains("bad.tsv:3"));
}

#[test]
fn a_bad_teacher_file_fails_before_anything_is_written() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let cell = distilled(config(&output, "bert", 3));
    let DataConfig::PickleScores { qrels, .. } = &cell.data else {
        unreachable!()
    };
    let qrels = qrels.clone();
    let with_scores = |name: &str, scores: &[(u64, &[(u64, f64)])]| {
        let table = scores
            .iter()
            .map(|(q, candidates)| (*q, candidates.iter().copied().collect()))
            .collect();
        let path = dir.path().join(name);
        lsr_data::teacher::write_pickle(&path, &table).unwrap();
        let mut cell = cell.clone();
        let DataConfig::PickleScores { scores, .. } = &mut cell.data else {
            unreachable!()
        };
        *scores = path;
        cell
    };
    // Passage 999 is not in the collection; query 100's positive is passage 0.
    let unknown = with_scores("unknown.pkl.gz", &[(100, &[(0, 5.0), (999, 1.0)])]);
    let error = train(&unknown, false).unwrap_err().to_string();
    assert!(
        error.contains("unknown.pkl.gz") && error.contains("query 100, passage 999 is not in"),
        "{error}"
    );
    assert!(!output.exists());
    let nan = with_scores("nan.pkl.gz", &[(100, &[(0, 5.0), (3, f64::NAN)])]);
    let error = train(&nan, false).unwrap_err().to_string();
    assert!(error.contains("query 100, passage 3: score NaN"), "{error}");
    // Only scored queries without a negative: skipped (as naver/splade's HF trainer), leaving none.
    let bare = with_scores("bare.pkl.gz", &[(100, &[(0, 5.0)])]);
    let error = train(&bare, false).unwrap_err().to_string();
    assert!(error.contains("no query left to train on"), "{error}");
    assert!(!output.exists());
    assert!(qrels.exists());

    let mut triples = cell.clone();
    let bad = dir.path().join("distil.tsv");
    std::fs::write(&bad, "q\tp\tn\t3.5\t1\nq\tp\tn\tNaN\t1\n").unwrap();
    triples.data = DataConfig::DistilTriples { triples: bad };
    triples.recipe.negatives = 1;
    let error = train(&triples, false).unwrap_err().to_string();
    assert!(error.contains("distil.tsv:2: score `NaN`"), "{error}");
    assert!(!output.exists());
}

#[test]
fn a_head_without_a_vocabulary_bias_exports_as_trained() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("modernbert-no-bias");
    copy_dir(&fixtures_dir().join("modernbert"), &fixture);
    let config_path = fixture.join("config.json");
    let text = std::fs::read_to_string(&config_path).unwrap();
    let unbiased = text.replace("\"decoder_bias\": true", "\"decoder_bias\": false");
    assert_ne!(text, unbiased, "the fixture sets decoder_bias");
    std::fs::write(&config_path, unbiased).unwrap();

    let mut config = config(&dir.path().join("run"), "modernbert", 6);
    config.model.checkpoint = fixture.display().to_string();
    config.model.k = Scale::new(4.0).unwrap();
    let exported = finished_model(train(&config, false).unwrap());

    let device = burn::prelude::Device::flex();
    let (_, model) = config.model.load_rescaled(&device, 32, false).unwrap();
    let last = config.checkpoint_dir().join("step-00000006");
    let trained = lsr_train::checkpoint::restore_model(&last, model).unwrap();
    let exported = lsr_backbone::Backbone::load(exported.to_str().unwrap(), &device, 32).unwrap();
    assert_eq!(
        exported.model.rescaled.as_ref().map(|r| r.k.get()),
        Some(4.0)
    );
    let batch = exported
        .tokenizer
        .encode_batch(&["sparse retrieval", "the capital of france is paris"])
        .unwrap();
    let logits = |model: &lsr_backbone::MaskedLm| -> Vec<f32> {
        let (ids, mask) = batch.to_tensors(&device);
        model.forward(ids, mask).into_data().try_into_vec().unwrap()
    };
    assert!(
        logits(&trained) == logits(&exported.model),
        "the export is not the trained model"
    );
}

#[test]
fn vectors_near_the_whole_vocabulary_are_a_recorded_warning() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut cell = config(dir.path(), "bert", 5);
    // Any non-empty vector counts as dense here.
    cell.recipe.dense_fraction = 1e-9;
    cell.recipe.dense_patience = 3;
    finished_model(train(&cell, false).unwrap());
    let dense = column(&dir.path().join("train.csv"), "dense_steps");
    assert_eq!(dense, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    let status = StatusFile::read(dir.path()).unwrap().unwrap();
    let warning = status.warning.expect("a warning");
    assert!(warning.contains("through step 3"), "{warning}");
}

/// Scores passes from a list, in turn.
struct Scripted(Vec<f64>);

impl Validator for Scripted {
    fn validate(&mut self, _: lsr_backbone::MaskedLm) -> Result<ValidationScores, String> {
        Ok(ValidationScores {
            ndcg_at_10: self.0.remove(0),
            l0_q: 5.0,
            l0_d: 20.0,
            flops: 1.0,
        })
    }
}

/// Validation passes whose documents have these numbers of terms in turn.
struct Dying(Vec<f64>);

impl Validator for Dying {
    fn validate(&mut self, _: lsr_backbone::MaskedLm) -> Result<ValidationScores, String> {
        Ok(ValidationScores {
            ndcg_at_10: 0.1,
            l0_q: 5.0,
            l0_d: self.0.remove(0),
            flops: 1.0,
        })
    }
}

fn validation_every(dir: &Path, every: usize, collapse_passes: usize) -> ValidationConfig {
    ValidationConfig {
        dataset: "beir/synth-b".into(),
        data_root: dir.join("data"),
        every,
        query_max_length: 16,
        document_max_length: 32,
        batch_size: 8,
        keep_best: false,
        collapse_passes,
    }
}

/// Validation documents without a term in `collapse_passes` consecutive passes collapse the
/// run at the first of them, though its training batches keep their terms; the status says
/// which rule fired.
#[test]
fn dead_validation_vectors_collapse_the_run_at_the_first_dead_pass() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut cell = config(dir.path(), "bert", 8);
    cell.validation = Some(validation_every(dir.path(), 2, 2));
    let mut validator = Dying(vec![20.0, 0.0, 0.0, 20.0]);
    let outcome = train_validated(&cell, false, Some(&mut validator)).unwrap();
    let (step, reason, _) = collapsed(outcome);
    assert_eq!(step, 4, "{reason}");
    assert!(reason.contains("2 consecutive passes"), "{reason}");
    let status = StatusFile::read(dir.path()).unwrap().unwrap();
    assert_eq!(status.status, RunStatus::Collapsed);
    assert_eq!(
        status.collapse_rule,
        Some(lsr_files::CollapseRule::Validation)
    );
    assert_eq!(status.step, 4);
    assert_eq!(
        validator.0,
        [20.0],
        "the run went on after the second dead pass"
    );
}

#[test]
fn validation_passes_are_logged_and_the_best_one_is_kept() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut cell = config(dir.path(), "bert", 6);
    cell.recipe.log_every = 100;
    cell.validation = Some(ValidationConfig {
        keep_best: true,
        ..validation_every(dir.path(), 2, 3)
    });
    let refused = train(&cell, false).unwrap_err().to_string();
    assert!(refused.contains("needs a validator"), "{refused}");

    let mut validator = Scripted(vec![0.3, 0.5, 0.5]);
    finished_model(train_validated(&cell, false, Some(&mut validator)).unwrap());
    let log = dir.path().join("train.csv");
    // Logged: the validated steps (and the last), though `log_every` is larger.
    assert_eq!(column(&log, "step"), vec![2.0, 4.0, 6.0]);
    assert_eq!(column(&log, "val_ndcg@10"), vec![0.3, 0.5, 0.5]);
    // Foreseen as logged, so with every metric.
    for name in [
        "flops",
        "positive_score",
        "negative_score",
        "max_activation",
    ] {
        assert!(column(&log, name).iter().all(|v| v.is_finite()), "{name}");
    }
    let status = StatusFile::read(dir.path()).unwrap().unwrap();
    let best = status.best_validation.expect("a best pass");
    // The first of two equal scores.
    assert_eq!((best.step, best.ndcg_at_10), (4, 0.5));
    let kept = best.model.expect("keep_best keeps the model");
    assert_eq!(kept, dir.path().join("checkpoints/best"));
    assert!(kept.join("model.safetensors").exists());
}

#[test]
fn a_second_writer_on_a_running_output_is_refused_naming_the_first() {
    let _lock = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let held = lsr_files::OutputLock::acquire(dir.path(), lsr_files::lock::TRAIN_LOCK).unwrap();
    let message = train(&config(dir.path(), "bert", 3), true)
        .unwrap_err()
        .to_string();
    let pid = std::process::id().to_string();
    assert!(
        message.contains("another process") && message.contains(&pid),
        "{message}"
    );
    assert!(
        !dir.path().join("train.csv").exists(),
        "the second writer wrote"
    );
    drop(held);
    finished_model(train(&config(dir.path(), "bert", 3), true).unwrap());
}

/// The step, reason and exported model of a collapsed run; any other outcome fails the test.
fn collapsed(outcome: Outcome) -> (usize, String, Option<std::path::PathBuf>) {
    let Outcome::Collapsed {
        step,
        reason,
        model,
    } = outcome
    else {
        panic!("expected a collapse, got {outcome:?}");
    };
    (step, reason, model)
}
