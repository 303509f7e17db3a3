"""Corpus encoding as a user meets it: 2,000 passages of varied length (10-180 words, MS MARCO's
spread), encoded by lsr's evaluation pipeline (`lsr eval`: length-sorted batches, the index and a
few queries after) and by sentence-transformers' `SparseEncoder.encode_document` (batch 32) on
its PyTorch and ONNX Runtime backends, from one random BERT-base MLM saved once as a Hugging
Face checkpoint (a synthetic 30,522-word vocabulary: every word one token).

    python scripts/bench/encode_corpus.py --lsr target/release/lsr [--work target/bench-corpus]
        [--backends torch,onnx] [--passages 2000] [--precision f32|bf16-mixed|bf16]

lsr's time is its whole process (loading, encoding, indexing, 16 queries, retrieval); each
backend's is `encode_document` alone, after loading and one warm-up batch. Prints one JSON line.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def words(count):
    """`count` distinct lowercase words, three letters and up (WordPiece keeps each whole)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out, i = [], 26 * 26
    while len(out) < count:
        n, word = i, ""
        while n:
            n, r = divmod(n, 26)
            word = letters[r] + word
        out.append(word)
        i += 1
    return out


def make_model(path, seed=0):
    """A random BERT-base MLM with SPLADE pooling, as a Hugging Face and sentence-transformers
    directory at `path` (written once, atomically)."""
    import torch
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    tmp = tempfile.mkdtemp(dir=os.path.dirname(path))
    vocab = SPECIAL + words(30522 - len(SPECIAL))
    with open(os.path.join(tmp, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    BertTokenizerFast(os.path.join(tmp, "vocab.txt"), do_lower_case=True).save_pretrained(tmp)
    os.remove(os.path.join(tmp, "vocab.txt"))
    torch.manual_seed(seed)
    BertForMaskedLM(BertConfig(vocab_size=len(vocab))).save_pretrained(tmp)
    mlm = Transformer(tmp, max_seq_length=256, transformer_task="fill-mask")
    SparseEncoder(modules=[mlm, SpladePooling("max")]).save(tmp)
    os.replace(tmp, path)


def make_data(root, passages, seed=0):
    """A BEIR-layout set `beir/bench-corpus` under `root`: the passages, 16 queries, qrels."""
    rng = np.random.default_rng(seed)
    vocab = words(30522 - len(SPECIAL))
    # MS MARCO passages: median about 50 words, a long right tail; clipped to 10-180.
    lengths = np.clip(rng.lognormal(np.log(50), 0.55, passages).astype(int), 10, 180)
    texts = [" ".join(rng.choice(vocab, n)) for n in lengths]
    directory = os.path.join(root, "beir", "bench-corpus")
    os.makedirs(os.path.join(directory, "qrels"), exist_ok=True)
    with open(os.path.join(directory, "corpus.jsonl"), "w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    with open(os.path.join(directory, "queries.jsonl"), "w") as f, \
            open(os.path.join(directory, "qrels", "test.tsv"), "w") as q:
        q.write("query-id\tcorpus-id\tscore\n")
        for i in range(16):
            f.write(json.dumps({"_id": f"q{i}", "text": " ".join(rng.choice(vocab, 6))}) + "\n")
            q.write(f"q{i}\td{i}\t1\n")
    return texts, lengths


def time_lsr(lsr, model, root, precision):
    out = tempfile.mkdtemp()
    try:
        start = time.perf_counter()
        subprocess.run([lsr, "eval", "--checkpoint", model, "--dataset", "beir/bench-corpus",
                        "--data-root", root, "--output", out, "--precision", precision], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(out)


def time_sparse_encoder(model, texts, backend):
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(model, device="cpu", backend=backend)
    if backend == "onnx" and not os.path.exists(os.path.join(model, "onnx", "model.onnx")):
        encoder.save_pretrained(model)  # the export, kept for the next run
    encoder.encode_document(texts[:32], batch_size=32)
    start = time.perf_counter()
    encoder.encode_document(texts, batch_size=32)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lsr", default="target/release/lsr")
    p.add_argument("--work", default="target/bench-corpus")
    p.add_argument("--backends", default="torch,onnx")
    p.add_argument("--passages", type=int, default=2000)
    p.add_argument("--precision", default="f32", help="lsr's: f32, bf16-mixed or bf16")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.abspath(os.path.join(args.work, "model"))
    if not os.path.exists(model):
        make_model(model)
    root = os.path.abspath(os.path.join(args.work, "data"))
    texts, lengths = make_data(root, args.passages)
    report = {"passages": len(texts), "words_mean": float(lengths.mean()),
              "words_min": int(lengths.min()), "words_max": int(lengths.max()),
              "threads": os.cpu_count(), "lsr_matmul": os.environ.get("LSR_MATMUL", "cube"),
              "lsr_precision": args.precision,
              "lsr_seconds": time_lsr(args.lsr, model, root, args.precision)}
    for backend in filter(None, args.backends.split(",")):
        seconds = time_sparse_encoder(model, texts, backend)
        report[f"{backend}_seconds"] = seconds
        report[f"lsr_speed_over_{backend}"] = seconds / report["lsr_seconds"]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
