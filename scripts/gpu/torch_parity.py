"""PyTorch's own deviation from the committed fixtures on a device, with TF32 matmuls off and
on: the scale against which `lsr check --device cuda` is read (cubecl runs f32 matmuls in TF32
where its autotune picks tensor cores). Every fixture transformers can load by itself (GTE's is
an independent reference in scripts/fixtures/generate.py, so it is skipped here).

    python scripts/gpu/torch_parity.py [--device cuda] [--fixtures data/fixtures]
"""
import argparse
import json
import os

import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--fixtures", default="data/fixtures")
    args = p.parse_args()
    report = {"device": args.device, "fixtures": {}}
    for name in sorted(os.listdir(args.fixtures)):
        d = os.path.join(args.fixtures, name)
        if not os.path.exists(os.path.join(d, "expected.safetensors")) or name == "gte":
            continue
        expected = load_file(os.path.join(d, "expected.safetensors"))
        model = AutoModelForMaskedLM.from_pretrained(d, dtype=torch.float32).eval().to(args.device)
        ids = expected["input_ids"].to(args.device)
        mask = expected["attention_mask"].to(args.device)
        row = {}
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            with torch.inference_mode():
                logits = model(input_ids=ids, attention_mask=mask).logits.float().cpu()
            diff = (logits - expected["logits"]).abs()[expected["attention_mask"].bool()]
            row["tf32" if tf32 else "f32"] = diff.max().item()
        report["fixtures"][name] = row
    print(json.dumps(report))


if __name__ == "__main__":
    main()
