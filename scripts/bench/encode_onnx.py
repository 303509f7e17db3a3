"""The `lsr bench encode` workload in ONNX Runtime: the model `encode.py` times (a random
BERT-base-shaped BertForMaskedLM, seed 0) with its SPLADE pooling, exported once to ONNX
(dynamic batch and length), checked against PyTorch, and timed on the CPU with every graph
optimisation and one intra-op thread per core, as sentence-transformers' ONNX backend and
fastembed run it.

    python scripts/bench/encode_onnx.py [--batch 32] [--seq-len 128] [--iterations 5]
        [--model target/bench-encode/model.onnx]

The export is kept at `--model` (made again when missing) and checked at every run: the pooled
vectors of the timed batch against PyTorch's, largest absolute difference printed and held
under 1e-4. Prints one JSON line, with the same keys as `encode.py`.
"""
import argparse
import json
import os
import resource
import time

import numpy as np
import torch
from transformers import BertForMaskedLM

import counting


class Splade(torch.nn.Module):
    """MLM logits, then max over tokens of log(1 + relu), padding masked: lsr's pooling."""

    def __init__(self, mlm):
        super().__init__()
        self.mlm = mlm

    def forward(self, input_ids, attention_mask):
        logits = self.mlm(input_ids=input_ids, attention_mask=attention_mask).logits
        weights = torch.log1p(torch.relu(logits)) * attention_mask.unsqueeze(-1)
        return weights.amax(dim=1)


def export(model, ids, mask, path):
    """The pooled model as ONNX at `path` (written atomically), batch and length dynamic."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp"
    torch.onnx.export(
        model, (ids, mask), tmp, input_names=["input_ids", "attention_mask"],
        output_names=["vectors"], opset_version=18, dynamo=False,
        dynamic_axes={"input_ids": {0: "batch", 1: "length"},
                      "attention_mask": {0: "batch", 1: "length"}, "vectors": {0: "batch"}},
    )
    os.replace(tmp, path)


def main():
    import onnxruntime as ort

    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--model", default="target/bench-encode/model.onnx")
    args = p.parse_args()
    torch.manual_seed(0)
    model = Splade(BertForMaskedLM(counting.bert_config(args.hidden)).eval())
    ids = (1000 + (torch.arange(args.batch * args.seq_len) * 7919) % 29000).reshape(args.batch, args.seq_len)
    mask = torch.ones_like(ids)
    if not os.path.exists(args.model):
        with torch.inference_mode():
            export(model, ids, mask, args.model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}

    def step():
        return session.run(None, feed)[0]

    with torch.inference_mode():
        expected = model(ids, mask).numpy()
    difference = float(np.abs(step() - expected).max())
    if difference > 1e-4:
        raise SystemExit(f"{args.model}: ONNX Runtime's vectors differ from PyTorch's by {difference}")
    del model
    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.iterations):
        step()
    seconds = (time.perf_counter() - start) / args.iterations
    print(json.dumps({
        "device": "cpu", "threads": args.threads, "batch": args.batch, "seq_len": args.seq_len,
        "precision": "f32", "iterations": args.iterations, "seconds_per_batch": seconds,
        "sequences_per_second": args.batch / seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "onnxruntime": ort.__version__, "torch": torch.__version__, "hidden": args.hidden,
        "max_abs_difference_from_pytorch": difference,
    }))


if __name__ == "__main__":
    main()
