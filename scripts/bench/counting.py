"""The benchmarks' `--count`: what one step or batch costs a GPU in kernel launches and in bytes
kept for the backward pass, counted on any device (a CPU will do), for comparison with
`lsr bench train-step --launches` / `lsr bench encode --launches`.

Launches: every ATen operator the step dispatches, counted by a TorchDispatchMode, less the
ones that launch nothing on a GPU: views and metadata (`view`, `reshape`, `t`, `transpose`,
`expand`, `as_strided`, `slice`, `select`, `unsqueeze`, `permute`, `detach`, `alias`, any
operator ATen marks as a view), allocations (`empty*`), host reads (`_local_scalar_dense`,
`item`, `is_nonzero`), the profiler's annotations, and dropout outside training (its input). A `_foreach_*` operator counts once (on CUDA it launches one kernel per chunk of
tensors; torch.profiler's CUDA kernel count, `cuda_kernels`, says how many). Each operator is
attributed to the region of BERT it ran in (embedding, attention, ffn, head, loss, optimizer,
and their backward passes), named as lsr names its regions, by module hooks.

Bytes: every tensor autograd saves for the backward pass (saved_tensors_hooks), each storage
once, parameters left out: what lsr reads as the allocator's growth before `backward()`.
"""
import collections
import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Launch nothing on a GPU: metadata, views, allocation, host reads.
NOT_KERNELS = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "expand", "as_strided", "slice",
    "select", "unsqueeze", "squeeze", "permute", "detach", "alias", "lift_fresh",
    "_local_scalar_dense", "item", "is_nonzero", "empty", "empty_like", "empty_strided", "new_empty",
    "new_empty_strided", "_reshape_alias", "unflatten", "flatten", "split", "split_with_sizes",
    "chunk", "unbind", "narrow", "expand_as", "view_as", "sym_size", "sym_stride", "sym_numel",
    "is_same_size", "_has_compatible_shallow_copy_type", "set_", "resize_",
    # The profiler's annotations (AdamW's step records one).
    "_record_function_enter_new", "_record_function_exit",
}

# Where each part of BertForMaskedLM starts (forward) and where its backward pass starts
# (backward: the module that ran last in a region sees its gradient first). The FFN is two
# modules, BertIntermediate then BertOutput.
REGION_MODULES = {
    "BertEmbeddings": "embedding",
    "BertAttention": "attention",
    "BertIntermediate": "ffn",
    "BertOutput": "ffn",
    "BertOnlyMLMHead": "head",
}


class Regions:
    """The region the step is in: set by module hooks and by the step itself."""

    def __init__(self, model):
        self.current = "unlabelled"
        for module in model.modules():
            region = REGION_MODULES.get(type(module).__name__)
            if region is None:
                continue
            module.register_forward_pre_hook(self._setter(region))
            module.register_full_backward_pre_hook(self._setter(region + "-backward"))

    def _setter(self, region):
        def hook(*_):
            self.current = region
        return hook

    def enter(self, region):
        self.current = region

    def exit_head(self, pooled):
        """The head's exit, as lsr marks it: the backward pass reaches the pooled vectors'
        gradient first, and the head's backward (pooling included) starts there."""
        if pooled.requires_grad:
            pooled.register_hook(lambda grad: self.enter("head-backward"))
        return pooled


class CountOps(TorchDispatchMode):
    def __init__(self, regions):
        super().__init__()
        self.regions = regions
        self.by_op = collections.Counter()
        self.by_region = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        # Dropout outside training returns its input.
        idle_dropout = name == "dropout" and not args[2]
        if not func.is_view and name not in NOT_KERNELS and not idle_dropout:
            self.by_op[name] += 1
            self.by_region[self.regions.current] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def saved_bytes(model, totals):
    """Totals the bytes of every storage autograd saves, parameters left out, into `totals`."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = set()

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in parameters and key not in seen:
            seen.add(key)
            totals["saved_bytes"] = totals.get("saved_bytes", 0) + storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield


def cuda_kernels(step):
    """Kernels one call of `step` launches on CUDA, by name, from torch.profiler."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        step()
        torch.cuda.synchronize()
    kernels = collections.Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name] += 1
    return kernels


def count(step, model, device_type):
    """One call of `step` counted: operators by name and region, saved bytes, and on CUDA the
    kernels torch.profiler saw."""
    regions = model._count_regions
    totals = {}
    mode = CountOps(regions)
    regions.enter("unlabelled")
    with mode, saved_bytes(model, totals):
        step()
    report = {
        "ops": sum(mode.by_op.values()),
        "by_region": dict(sorted(mode.by_region.items())),
        "by_op": dict(sorted(mode.by_op.items())),
        "saved_bytes": totals.get("saved_bytes", 0),
    }
    if device_type == "cuda":
        kernels = cuda_kernels(step)
        report["cuda_kernels"] = sum(kernels.values())
        report["cuda_kernels_by_name"] = dict(kernels.most_common())
    return report


def watch(model):
    """Installs the region hooks on `model` (once); the step calls `model._count_regions`'s
    `enter` and `exit_head` at the boundaries hooks cannot see."""
    model._count_regions = Regions(model)
    return model._count_regions


def bert_config(hidden, **overrides):
    """BERT-base's structure with `hidden` units: heads of 64, FFN 4x (lsr's `--hidden`)."""
    from transformers import BertConfig

    return BertConfig(
        hidden_size=hidden,
        num_attention_heads=max(hidden // 64, 1),
        intermediate_size=4 * hidden,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa",
        **overrides,
    )
