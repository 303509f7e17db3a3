//! The matrix file's tests: the committed matrices load, and each kind of mistake is an error
//! naming its line or field.

use super::*;

pub const MATRIX: &str = r#"name = "test"
results = "results/test"
checkpoints = "checkpoints/test"
k = [1, 4, 16]

[eval]
data_root = "data"
datasets = ["beir/scifact"]
batch_size = 8
query_max_length = 32
document_max_length = 64
top_k = 100
tradeoff = "beir/scifact"

[data]
format = "triples"
triples = "triples.tsv"

[recipe]
steps = 100
batch_size = 4
warmup_steps = 10

[[backbone]]
name = "bert"
checkpoint = "bert-base-uncased"

[[backbone]]
name = "modernbert"
checkpoint = "answerdotai/ModernBERT-base"
k = [8, 16]

[backbone.recipe]
lr = 1e-4
"#;

fn load(text: &str) -> Result<Matrix> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    Matrix::load(file.path())
}

#[test]
fn expands_cells_in_order_with_overrides() {
    let matrix = load(MATRIX).unwrap();
    let ids: Vec<&str> = matrix.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "bert-k1",
            "bert-k4",
            "bert-k16",
            "modernbert-k8",
            "modernbert-k16"
        ]
    );
    let bert = matrix.cell("bert-k4").unwrap();
    assert_eq!(bert.config.recipe.lr, Recipe::default().lr);
    assert_eq!(bert.config.recipe.steps, 100);
    assert_eq!(bert.config.output, PathBuf::from("results/test/bert-k4"));
    assert_eq!(
        bert.config.checkpoints,
        Some(PathBuf::from("checkpoints/test/bert-k4"))
    );
    let modern = matrix.cell("modernbert-k16").unwrap();
    assert_eq!(
        (
            modern.k(),
            modern.config.recipe.lr,
            modern.config.recipe.steps
        ),
        (16.0, 1e-4, 100)
    );
    assert!(matches!(
        matrix.cell("bert-k2"),
        Err(MatrixError::UnknownCell(_))
    ));
    assert_eq!(cell_id("roberta", 0.5), "roberta-k0.5");
    assert_eq!(cell_id("bert", 1e-39), "bert-k1e-39");
}

#[test]
fn validation_errors_name_the_line_or_the_field() {
    for (from, to, expected) in [
        (
            "k = [1, 4, 16]",
            "k = [1, -4, 16]",
            ":4: k must be finite and > 0, got -4",
        ),
        (
            "k = [8, 16]",
            "k = [8, 0]",
            ":31: k must be finite and > 0, got 0",
        ),
        (
            "top_k = 100",
            "top_k = 100\ntop = 3",
            ":13: unknown field `top`",
        ),
        // A recipe field's errors are at its value's line, in [recipe] or a backbone's.
        (
            "lr = 1e-4",
            "lr = -1e-4",
            ":34: backbone `modernbert`: recipe.lr: must be finite and > 0",
        ),
        (
            "lr = 1e-4",
            "learning_rate = 1e-4",
            ":34: backbone `modernbert`: recipe.learning_rate: unknown field `learning_rate`",
        ),
        (
            "warmup_steps = 10",
            "warmup_steps = \"ten\"",
            ":22: recipe.warmup_steps: invalid type: string \"ten\"",
        ),
        (
            "steps = 100\n",
            "steps = 100\nseed = 1.5\n",
            ":21: recipe.seed: invalid type: floating point `1.5`",
        ),
        // A key the distillation loss does not take; a value out of range within its table.
        (
            "warmup_steps = 10",
            "warmup_steps = 10\ndistillation = { loss = \"margin-mse\", temperature = 2.0 }",
            ":23: recipe.distillation: unknown field `temperature`, expected `weight`",
        ),
        (
            "warmup_steps = 10",
            "warmup_steps = 10\ndistillation = { loss = \"kl-div\", temperature = 0 }",
            ":23: recipe.distillation.temperature: must be finite and > 0, got 0",
        ),
        (
            "name = \"modernbert\"",
            "name = \"bert\"",
            ":29: backbone `bert` appears twice",
        ),
        (
            "batch_size = 4",
            "batch_size = 0",
            ":21: recipe.batch_size: must be at least 1, got 0",
        ),
        (
            "datasets = [\"beir/scifact\"]",
            "datasets = [\"beir/scifact\", \"robust04\"]",
            "eval.datasets: unknown data set `robust04`",
        ),
        (
            "query_max_length = 32",
            "query_max_length = 0",
            "eval.query_max_length: must be at least 1, got 0",
        ),
        (
            "tradeoff = \"beir/scifact\"",
            "tradeoff = \"beir/scifact\"\n[eval.lengths.\"beir/fiqa\"]\nquery_max_length = 9",
            "eval.lengths.\"beir/fiqa\": `beir/fiqa` is not among eval.datasets",
        ),
        (
            "tradeoff = \"beir/scifact\"",
            "tradeoff = \"beir/scifact\"\n[eval.lengths.\"beir/scifact\"]\nquery_length = 9",
            ":15: unknown field `query_length`",
        ),
        (
            "tradeoff = \"beir/scifact\"",
            "tradeoff = \"beir/scifact\"\n[eval.lengths.\"beir/scifact\"]\nquery_max_length = 0",
            "eval.lengths.\"beir/scifact\".query_max_length: must be at least 1, got 0",
        ),
        (
            "top_k = 100",
            "top_k = 100\nmeasures = [\"ndcg@10\", \"ndcg@1O\"]",
            "eval.measures: unknown measure `ndcg@1O`",
        ),
        (
            "top_k = 100",
            "top_k = 100\nmeasures = [\"recall@100\"]",
            "eval.measures: the report shows ndcg@10 for `beir/scifact`",
        ),
        (
            "tradeoff = \"beir/scifact\"",
            "tradeoff = \"beir/fiqa\"",
            "eval.tradeoff `beir/fiqa` is not evaluated",
        ),
    ] {
        let message = load(&MATRIX.replace(from, to)).unwrap_err().to_string();
        assert!(message.contains(expected), "{to}: {message}");
    }
    for (backbone, k, dataset, measure, expected) in [
        (
            "bert",
            2,
            "beir/scifact",
            "ndcg@10",
            "[[paper]] bert k = 2 on `beir/scifact`: k = 2 is not in bert's grid",
        ),
        (
            "bert",
            4,
            "beir/fiqa",
            "ndcg@10",
            "Table 1 has a column for each of eval.datasets only",
        ),
        (
            "bert",
            4,
            "beir/scifact",
            "mrr@10",
            "measure `mrr@10`, but Table 1 shows ndcg@10 there",
        ),
        (
            "roberta",
            4,
            "beir/scifact",
            "ndcg@10",
            "[[paper]] names unknown backbone `roberta`",
        ),
    ] {
        let paper = format!(
            "lr = 1e-4\n[[paper]]\nbackbone = \"{backbone}\"\nk = {k}\ndataset = \"{dataset}\"\n\
             measure = \"{measure}\"\nvalue = 0.5"
        );
        let message = load(&MATRIX.replace("lr = 1e-4", &paper))
            .unwrap_err()
            .to_string();
        assert!(message.contains(expected), "{paper}: {message}");
    }
    let no_backbones = MATRIX.split("[[backbone]]").next().unwrap().to_string();
    let message = load(&no_backbones).unwrap_err().to_string();
    assert!(message.contains("backbone"), "{message}");
}

#[test]
fn evaluation_lengths_default_to_naver_splade_and_a_data_set_may_have_its_own() {
    let text = MATRIX
        .replace(
            "datasets = [\"beir/scifact\"]",
            "datasets = [\"beir/scifact\", \"nanobeir-13\"]",
        )
        .replace("query_max_length = 32\ndocument_max_length = 64\n", "")
        .replace(
            "tradeoff = \"beir/scifact\"\n",
            "tradeoff = \"beir/scifact\"\n\n[eval.lengths.\"nanobeir/arguana\"]\n\
             query_max_length = 512\n\n[eval.lengths.\"beir/scifact\"]\n\
             document_max_length = 300\n",
        );
    let matrix = load(&text).unwrap();
    let measures = [Measure::parse("ndcg@10").unwrap()];
    let lengths = |dataset: &str| {
        let settings = matrix.eval.settings(dataset, &measures);
        (settings.query_max_length, settings.document_max_length)
    };
    assert_eq!(lengths("nanobeir/NanoArguAna"), (512, 256));
    assert_eq!(lengths("beir/scifact"), (256, 300));
    assert_eq!(lengths("nanobeir/NanoNQ"), (256, 256));
    assert!(matrix.eval.settings("beir/scifact", &measures).complete);
    assert_eq!(matrix.eval.longest(), 512);

    let overlapping = MATRIX
        .replace("datasets = [\"beir/scifact\"]", "datasets = [\"beir-13\"]")
        .replace(
            "tradeoff = \"beir/scifact\"\n",
            "tradeoff = \"beir-13\"\n[eval.lengths.\"beir-13\"]\nquery_max_length = 128\n\
             [eval.lengths.\"beir/arguana\"]\nquery_max_length = 512\n",
        );
    let message = load(&overlapping).unwrap_err().to_string();
    assert!(
        message.contains(
            "eval.lengths.\"beir/arguana\": `beir/arguana` already has its lengths from \
             eval.lengths.\"beir-13\""
        ),
        "{message}"
    );
}

#[test]
fn the_committed_matrices_load_with_their_evaluation_lengths() {
    let experiments = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let measures = [Measure::parse("ndcg@10").unwrap()];
    let table1 = Matrix::load(&experiments.join("table1.toml")).unwrap();
    let arguana = table1.eval.settings("beir/arguana", &measures);
    assert_eq!(
        (arguana.query_max_length, arguana.document_max_length),
        (256, 256)
    );
    assert!(arguana.complete);
    for miniature in ["mini.toml", "mini-distil.toml"] {
        let mini = Matrix::load(&experiments.join(miniature)).unwrap();
        let synth = mini.eval.settings("beir/synth-a", &measures);
        assert_eq!(
            (synth.query_max_length, synth.document_max_length),
            (16, 32)
        );
    }
    // The SPLADE++ matrix: Table 1's grid and evaluation, the recipe's loss and batching.
    let distil = Matrix::load(&experiments.join("table1-distil.toml")).unwrap();
    assert_eq!(distil.cells.len(), table1.cells.len());
    assert_eq!(distil.eval.datasets, table1.eval.datasets);
    let recipe = &distil.cells[0].config.recipe;
    // Table 1's very checkpoints, and a pre-flight that holds them so.
    assert_eq!(distil.backbone_pins(), table1.backbone_pins());
    let pinned = |m: &Matrix| {
        m.backbone_pins()
            .iter()
            .filter(|p| p.pinning.is_commit())
            .count()
    };
    assert_eq!((pinned(&distil), pinned(&table1)), (6, 6));
    assert_eq!(distil.compare_with, Some(experiments.join("table1.toml")));
    let mini = Matrix::load(&experiments.join("mini.toml")).unwrap();
    let mini_distil = Matrix::load(&experiments.join("mini-distil.toml")).unwrap();
    assert_eq!(
        mini_distil.compare_with,
        Some(experiments.join("mini.toml"))
    );
    assert!(mini_distil.backbone_differences(&mini).is_empty());
    let margin_mse = lsr_train::Distillation::MarginMse { weight: 1.0 };
    assert_eq!(recipe.distillation, margin_mse);
    assert_eq!(recipe.batching, lsr_train::Batching::Cached);
    assert_eq!(
        (recipe.batch_size, recipe.lambda_q, recipe.lambda_d),
        (128, 0.5, 0.4)
    );
}

/// Two matrices meant to be read side by side (`compare_with`, relative to the file's
/// folder) must train the same checkpoints: the pre-flight lists every difference.
#[test]
fn a_matrix_compared_with_another_of_other_backbones_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("base.toml"), MATRIX).unwrap();
    let differing = MATRIX
        .replace(
            "bert-base-uncased",
            "google-bert/bert-base-uncased@86b5e0934494bd15c9632b12f734a8a67f723594",
        )
        .replace("name = \"modernbert\"", "name = \"ettin\"")
        .replace(
            "results = \"results/test\"",
            "results = \"results/test\"\ncompare_with = \"base.toml\"",
        );
    let path = dir.path().join("other.toml");
    std::fs::write(&path, &differing).unwrap();
    let matrix = Matrix::load(&path).unwrap();
    assert_eq!(matrix.compare_with, Some(dir.path().join("base.toml")));
    let message = matrix.check_inputs().unwrap_err().to_string();
    for difference in [
        "base.toml: backbone `bert` is `google-bert/bert-base-uncased@86b5e0934494bd15c9632b12f734a8a67f723594` here, `bert-base-uncased` there",
        "base.toml: backbone `ettin` only here",
        "base.toml: backbone `modernbert` only there",
    ] {
        assert!(message.contains(difference), "{difference}: {message}");
    }
    let same = MATRIX.replace(
        "results = \"results/test\"",
        "results = \"results/test\"\ncompare_with = \"base.toml\"",
    );
    std::fs::write(&path, same).unwrap();
    let message = Matrix::load(&path)
        .unwrap()
        .check_inputs()
        .unwrap_err()
        .to_string();
    assert!(!message.contains("compare_with"), "{message}");
    std::fs::remove_file(dir.path().join("base.toml")).unwrap();
    let message = Matrix::load(&path)
        .unwrap()
        .check_inputs()
        .unwrap_err()
        .to_string();
    assert!(message.contains("base.toml"), "{message}");
}

/// The miniature builds and runs one model per registered backbone family: a family added
/// to the registry (or taken out) without its miniature fails here, naming it.
#[test]
fn the_miniature_has_exactly_the_registered_families() {
    use std::collections::BTreeSet;
    let experiments = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let registered: BTreeSet<&str> = lsr_backbone::FAMILIES.iter().map(|f| f.name).collect();
    let models = std::fs::read_to_string(experiments.join("mini-models.toml")).unwrap();
    let models: toml::Table = toml::from_str(&models).unwrap();
    let normed: BTreeSet<&str> = models["norms"]
        .as_table()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mini = Matrix::load(&experiments.join("mini.toml")).unwrap();
    let run: BTreeSet<&str> = mini.cells.iter().map(|c| c.backbone.as_str()).collect();
    let distil = Matrix::load(&experiments.join("mini-distil.toml")).unwrap();
    let distilled: BTreeSet<&str> = distil.cells.iter().map(|c| c.backbone.as_str()).collect();
    for (file, names) in [
        ("mini-models.toml [norms]", normed),
        ("mini.toml", run),
        ("mini-distil.toml", distilled),
    ] {
        let missing: Vec<_> = registered.difference(&names).collect();
        let extra: Vec<_> = names.difference(&registered).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "experiments/{file}: registered families missing {missing:?}, unregistered {extra:?}"
        );
    }
}
