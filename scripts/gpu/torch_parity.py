"""PyTorch's own deviation from the committed fixtures on a device: f32 with TF32 matmuls off
and on, and bf16 autocast. The yardstick `lsr check` is read against (cubecl runs f32 matmuls in
TF32 where its autotune picks tensor cores; bf16-mixed is lsr's autocast). Every fixture
transformers can load by itself (GTE's is an independent reference in
scripts/fixtures/generate.py, so it is skipped here).

    python scripts/gpu/torch_parity.py [--device cuda] [--fixtures data/fixtures]
        [--write-bf16 data/fixtures/bf16-autocast.json]

`--write-bf16` records the bf16 autocast deviations (on the CPU, where they were committed) as
the yardstick `lsr check --precision bf16-mixed` and the bf16 parity test hold lsr to.
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
    p.add_argument("--write-bf16")
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
        for mode in ("f32", "tf32", "bf16"):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            autocast = torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=mode == "bf16")
            with torch.inference_mode(), autocast:
                logits = model(input_ids=ids, attention_mask=mask).logits.float().cpu()
            diff = (logits - expected["logits"]).abs()[expected["attention_mask"].bool()]
            row[mode] = diff.max().item()
        row["largest_logit"] = expected["logits"].abs().max().item()
        report["fixtures"][name] = row
    print(json.dumps(report))
    if args.write_bf16:
        record = {
            "what": "max |logit - transformers' f32 logit| over non-padding tokens under "
                    "torch.autocast(bfloat16), per fixture (scripts/gpu/torch_parity.py)",
            "device": args.device, "torch": torch.__version__,
            "max_abs_deviation": {n: v["bf16"] for n, v in report["fixtures"].items()},
        }
        with open(args.write_bf16, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
