"""The benchmarks' `--profile`: where one call's time goes, by operator (torch.profiler), on stderr."""
import sys

import torch


def print_profile(step):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20), file=sys.stderr)
