"""DDP's ``bucket_cap_mb`` from a measured backward profile, chosen with gradsync's planner.

DDP reduces its gradients in buckets: walking the parameters in backward order, it closes a
bucket once it holds ``first_bucket_bytes`` (the first) or ``bucket_cap_mb`` (the others).
Small buckets start communicating early but pay a call's fixed cost many times; large ones
pay it once but wait for more of backward. The planner (docs/planner.md) predicts, from each
parameter's backward time and a linear cost ``a + b * bytes`` per all_reduce, when backward
and the last reduction end; this module picks the cap whose buckets it predicts end first::

    profile = buckets.backward_profile(model, lambda: loss_fn(model(x), y))
    cost = buckets.measured_cost()                    # collective: every rank calls it
    choice = buckets.bucket_cap(profile, cost)
    ddp = DDP(model, bucket_cap_mb=choice.bucket_cap_mb)

docs/python.md ("Bucket size") says what the prediction leaves out.
"""
import math
import statistics
import time
from typing import Callable, List, NamedTuple, Optional

import torch
import torch.distributed as dist

from gradsync.torch._c10d import bucket_groups, planned_groups, predicted_s

MiB = 1024 * 1024


class Profile(NamedTuple):
    """One layer per parameter tensor, in ``model.parameters()`` order (DDP's)."""
    params: List[int]        # elements
    backward_s: List[float]  # seconds of backward spent on it, in backward order


class Cost(NamedTuple):
    """One all_reduce of ``bytes`` takes ``a + b * bytes`` seconds."""
    a: float
    b: float


class BucketChoice(NamedTuple):
    bucket_cap_mb: float  # for DDP(bucket_cap_mb=...)
    predicted_s: float    # the end of backward and of the last bucket's all_reduce
    default_s: float      # the same with DDP's default cap, 25 MB
    mgwfbp_s: float       # with MG-WFBP's groups (any sizes, no first bucket): what DDP cannot express
    optimal_s: float      # with the best grouping of all


def _agreed(values, group):
    """values, made the same on every rank: each the largest any rank measured."""
    if not dist.is_initialized():
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def backward_profile(model: torch.nn.Module, loss: Callable[[], torch.Tensor], repetitions: int = 5,
                     group: Optional[object] = None) -> Profile:
    """Times ``loss().backward()`` per parameter: a hook on each parameter notes when its
    gradient is ready. A parameter's backward time is the time since the one before it in
    backward order was ready (the first: since backward began); the median of `repetitions`
    runs after one untimed. Gradients are left zeroed (set to None). Where a process group is
    initialized every rank must call it: the ranks agree on the largest time of each."""
    if repetitions < 1:
        raise ValueError(f"gradsync.torch.buckets.backward_profile: repetitions is {repetitions}, must be >= 1")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("gradsync.torch.buckets.backward_profile: the model has no parameter that requires grad")
    stamps = [[] for _ in params]
    handles = [p.register_hook(lambda g, i=i: stamps[i].append(time.perf_counter())) for i, p in enumerate(params)]
    starts = []
    try:
        for _ in range(repetitions + 1):
            model.zero_grad(set_to_none=True)
            value = loss()
            starts.append(time.perf_counter())
            value.backward()
    finally:
        for h in handles:
            h.remove()
        model.zero_grad(set_to_none=True)
    missing = [i for i, s in enumerate(stamps) if len(s) != repetitions + 1]
    if missing:
        raise ValueError(f"gradsync.torch.buckets.backward_profile: parameters {missing} (model.parameters() order) "
                         "got no gradient from loss().backward(); DDP would need find_unused_parameters")
    ready = [statistics.median(s[k] - starts[k] for k in range(1, repetitions + 1)) for s in stamps]
    ready = _agreed(ready, group)
    # Backward runs from the last parameter to the first: make the ready times monotone in
    # that order, then each parameter's time is its step.
    layers = len(params)
    backward_s = [0.0] * layers
    later = 0.0
    for i in reversed(range(layers)):
        r = max(ready[i], later)
        backward_s[i] = r - later
        later = r
    return Profile([p.numel() for p in params], backward_s)


def measured_cost(group: Optional[object] = None, small: int = 64 * 1024, large: int = 16 * MiB,
                  repetitions: int = 11) -> Cost:
    """a and b of ``dist.all_reduce`` of float32 on `group` (the default group if None), fitted
    through the medians at `small` and `large` bytes. Collective: every rank of the group calls
    it, and every rank gets the same (the largest any rank measured)."""
    if not 0 < small < large:
        raise ValueError(f"gradsync.torch.buckets.measured_cost: sizes {small} and {large} bytes; "
                         "need 0 < small < large")
    medians = []
    for size in (small, large):
        x = torch.zeros(size // 4)
        dist.all_reduce(x, group=group)
        times = []
        for _ in range(repetitions):
            dist.barrier(group=group)
            t = time.perf_counter()
            dist.all_reduce(x, group=group)
            times.append(time.perf_counter() - t)
        medians.append(statistics.median(times))
    t_small, t_large = _agreed(medians, group)
    b = max(0.0, (t_large - t_small) / (large - small))
    return Cost(max(0.0, t_small - b * small), b)


def ddp_buckets(params: List[int], cap_bytes: int, first_bucket_bytes: int = dist._DEFAULT_FIRST_BUCKET_BYTES,
                bytes_per_element: int = 4) -> List[List[int]]:
    """The buckets DDP forms with these caps, as the planner's groups: ascending runs of layer
    indices, the last layers' first."""
    if cap_bytes <= 0 or first_bucket_bytes <= 0:
        raise ValueError(f"gradsync.torch.buckets.ddp_buckets: caps {first_bucket_bytes} and {cap_bytes} bytes; "
                         "both must be positive")
    return [list(g) for g in bucket_groups(params, cap_bytes, first_bucket_bytes, bytes_per_element)]


def bucket_cap(profile: Profile, cost: Cost, bytes_per_element: int = 4,
               first_bucket_bytes: int = dist._DEFAULT_FIRST_BUCKET_BYTES) -> BucketChoice:
    """The cap whose DDP buckets the planner predicts end first; among equal predictions, the
    fewest buckets, then the cap nearest DDP's default of 25 MiB (caps that form the same
    buckets tie, and the default surprises least). Every cap DDP could be given forms the
    buckets of one of the candidates tried, the default and the byte sums of runs of
    consecutive parameters (a bucket closes once its run reaches the cap): O(L^3) for L
    parameters, about a second at L = 200."""
    params, backward_s = list(profile.params), list(profile.backward_s)
    if not params:
        raise ValueError("gradsync.torch.buckets.bucket_cap: the profile has no layer")

    def predict(groups):
        return predicted_s(params, backward_s, groups, cost.a, cost.b, bytes_per_element)

    sizes = [p * bytes_per_element for p in params]
    candidates = {25 * MiB}
    for first in range(len(sizes)):
        total = 0
        for size in sizes[first:]:
            total += size
            if total > 0:
                candidates.add(total)
    best = None
    for cap in sorted(candidates):
        groups = ddp_buckets(params, cap, first_bucket_bytes, bytes_per_element)
        key = (predict(groups), len(groups), abs(math.log(cap / (25 * MiB))))
        if best is None or key < best[0]:
            best = (key, cap)
    (best_s, _, _), cap = best
    default = ddp_buckets(params, 25 * MiB, first_bucket_bytes, bytes_per_element)
    return BucketChoice(cap / MiB, best_s, predict(default),
                        predict(planned_groups(params, backward_s, cost.a, cost.b, bytes_per_element, "mgwfbp")),
                        predict(planned_groups(params, backward_s, cost.a, cost.b, bytes_per_element, "optimal")))


__all__ = ["Profile", "Cost", "BucketChoice", "backward_profile", "measured_cost", "ddp_buckets", "bucket_cap"]
