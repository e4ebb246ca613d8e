"""gradsync.torch.buckets against torch's own bucket assignment and the planner's model written
out here: the buckets DDP forms for a cap, the cap chosen against every cap tried one by one,
and a DDP built with the choice in a gradsync job."""
import random

import pytest
import torch
import torch.distributed as dist

from gradsync.torch import buckets

from harness import launch, values


def torch_buckets(params, cap, first, bytes_per_element=4):
    """DDP's own assignment (torch.distributed._compute_bucket_assignment_by_size, given the
    parameters in backward order as DDP gives them), as the planner's groups."""
    dtype = {4: torch.float32, 8: torch.float64, 2: torch.float16}[bytes_per_element]
    last = len(params) - 1
    tensors = [torch.zeros(params[last - i], dtype=dtype) for i in range(len(params))]
    assigned, _ = dist._compute_bucket_assignment_by_size(tensors, [first, cap])
    return [sorted(last - i for i in bucket) for bucket in assigned]


def planner_model(params, backward_s, groups, a, b, bytes_per_element=4):
    """docs/planner.md's model: layer l is ready once backward has run layers L-1 down to l; a
    group's all_reduce starts when the one before it has ended and its layers are ready."""
    ready, t = [0.0] * len(params), 0.0
    for layer in reversed(range(len(params))):
        t += backward_s[layer]
        ready[layer] = t
    end = 0.0
    for g in groups:
        size = sum(params[layer] for layer in g) * bytes_per_element
        end = max(end, ready[min(g)]) + (a + b * size if size > 0 else 0.0)
    return max(end, ready[0])


def random_profile(rng, layers):
    params = [rng.choice([0, 1, rng.randint(1, 40), rng.randint(1, 400)]) for _ in range(layers)]
    return buckets.Profile(params, [rng.choice([0.0, rng.uniform(0, 2e-3)]) for _ in range(layers)])


@pytest.mark.parametrize("seed", range(20))
def test_ddp_buckets_are_torchs(seed):
    rng = random.Random(seed)
    profile = random_profile(rng, rng.randint(1, 12))
    total = max(1, sum(profile.params) * 4)
    for _ in range(20):
        cap, first = rng.randint(1, total + 8), rng.randint(1, total + 8)
        assert buckets.ddp_buckets(profile.params, cap, first) == torch_buckets(profile.params, cap, first), \
            f"params {profile.params}, cap {cap}, first bucket {first}"


@pytest.mark.parametrize("seed", range(12))
def test_bucket_cap_is_the_best_cap(seed):
    rng = random.Random(100 + seed)
    profile = random_profile(rng, rng.randint(1, 7))
    cost = buckets.Cost(rng.choice([0.0, rng.uniform(1e-5, 2e-3)]), rng.uniform(0, 1e-5))
    first = rng.randint(1, 200)
    choice = buckets.bucket_cap(profile, cost, first_bucket_bytes=first)

    def predicted(cap):
        return planner_model(profile.params, profile.backward_s, torch_buckets(profile.params, cap, first), *cost)

    every_cap = [predicted(cap) for cap in range(1, sum(profile.params) * 4 + 2)]
    chosen = round(choice.bucket_cap_mb * buckets.MiB)
    assert choice.bucket_cap_mb * buckets.MiB == chosen, "the cap must be whole bytes for DDP"
    assert predicted(chosen) == pytest.approx(choice.predicted_s, rel=1e-12, abs=1e-15)
    assert choice.predicted_s == pytest.approx(min(every_cap), rel=1e-12, abs=1e-15)
    assert choice.optimal_s <= choice.predicted_s * (1 + 1e-12) + 1e-15
    assert choice.optimal_s <= choice.mgwfbp_s * (1 + 1e-12) + 1e-15
    assert choice.predicted_s <= choice.default_s * (1 + 1e-12) + 1e-15


def test_backward_profile_of_a_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    profile = buckets.backward_profile(model, lambda: torch.nn.functional.cross_entropy(model(x), y), repetitions=3)
    assert profile.params == [p.numel() for p in model.parameters()]
    assert all(t >= 0 for t in profile.backward_s) and sum(profile.backward_s) > 0
    assert all(p.grad is None for p in model.parameters())


def test_misuse_is_named():
    with pytest.raises(ValueError, match="no layer"):
        buckets.bucket_cap(buckets.Profile([], []), buckets.Cost(1e-5, 1e-9))
    with pytest.raises(ValueError, match="must be positive"):
        buckets.ddp_buckets([1, 2], 0)
    with pytest.raises(RuntimeError, match="finite and non-negative"):
        buckets.bucket_cap(buckets.Profile([1, 2], [0.0, -1.0]), buckets.Cost(1e-5, 1e-9))
    with pytest.raises(RuntimeError, match="2 parameter counts and 1 backward times"):
        buckets.bucket_cap(buckets.Profile([1, 2], [0.0]), buckets.Cost(1e-5, 1e-9))
    model = torch.nn.Linear(3, 3)
    model.bias.requires_grad_(False)
    unused = torch.nn.Sequential(model, torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match=r"parameters \[1, 2\]"):
        buckets.backward_profile(unused, lambda: unused[0](torch.ones(1, 3)).sum(), repetitions=1)


def _choose_and_train(rank, world):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10))
    x, y = torch.randn(16, 128), torch.randint(0, 10, (16,))
    profile = buckets.backward_profile(model, lambda: torch.nn.functional.cross_entropy(model(x), y), repetitions=3)
    cost = buckets.measured_cost(small=16 * 1024, large=1024 * 1024, repetitions=5)
    choice = buckets.bucket_cap(profile, cost)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=choice.bucket_cap_mb)
    for _ in range(3):  # DDP forms its buckets after the first iteration, in the order gradients were ready
        ddp.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x + rank), y).backward()
    data = ddp._get_ddp_logging_data()
    formed = [sorted(int(i) for i in bucket.split()) for bucket in data["rebuilt_per_bucket_param_indices"].split(", ")]
    expected = buckets.ddp_buckets(profile.params, round(choice.bucket_cap_mb * buckets.MiB))
    return choice, tuple(profile.params), tuple(profile.backward_s), tuple(cost), expected, formed, \
        [p.grad.numpy().tobytes() for p in model.parameters()]  # tensors would go through shared memory


def test_a_ddp_job_takes_the_choice():
    out = values(launch(2, _choose_and_train, limit=180.0))
    for rank, (choice, _, _, cost, expected, formed, _) in enumerate(out):
        assert cost[0] >= 0 and cost[1] > 0, f"rank {rank}: cost {cost}"
        assert formed == expected, f"rank {rank}: DDP's buckets {formed}, predicted {expected}"
        assert choice.predicted_s <= choice.default_s * (1 + 1e-12)
    assert out[0][:4] == out[1][:4], "every rank must measure the same profile and cost, and choose the same cap"
    assert out[0][6] == out[1][6], "the replicas' gradients differ"
