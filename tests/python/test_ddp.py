"""DistributedDataParallel over the gradsync backend: the same training as over gloo (replicas
bitwise equal within each run, parameters within 1e-6 of gloo's), and the hooks: Adasum equal to
a reference computed from every rank's bucket, fp16/bf16 compression close to the average, the
same bits on every rank."""
import hashlib

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from harness import launch, values


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def train(rank, world, hook=None, steps=5, bucket_cap_mb=0.05):
    torch.manual_seed(0)
    model = DistributedDataParallel(lenet(), bucket_cap_mb=bucket_cap_mb)
    if hook is not None:
        import gradsync.torch.hooks as hooks
        model.register_comm_hook(None, getattr(hooks, hook))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 1, 28, 28, generator=data)
        y = torch.randint(0, 10, (16,), generator=data)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return digest(model), [p.detach().numpy().copy() for p in model.parameters()]  # tensors would travel by fd


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_trains_as_over_gloo(world):
    ours = values(launch(world, train))
    theirs = values(launch(world, train, backend="gloo"))
    assert len({d for d, _ in ours}) == 1, "gradsync replicas differ"
    assert len({d for d, _ in theirs}) == 1, "gloo replicas differ"
    for a, b in zip(ours[0][1], theirs[0][1]):
        assert abs(a - b).max() <= 1e-6


@pytest.mark.parametrize("hook", ["adasum", "fp16_compress", "bf16_compress"])
def test_hooks_train_with_equal_replicas(hook):
    results = values(launch(2, train, hook))
    assert results[0][0] == results[1][0]


def adasum_pair(a, b):
    """docs/adasum.md's A(a, b): coefficients from double dot products, the result rounded once."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    d, na, nb = (a64 * b64).sum(), (a64 * a64).sum(), (b64 * b64).sum()
    tiny = torch.finfo(torch.float64).tiny ** 0.5
    ca = 1 - d / (2 * na) if na >= tiny else 1.0
    cb = 1 - d / (2 * nb) if nb >= tiny else 1.0
    return (ca * a64 + cb * b64).to(a.dtype)


def adasum_reference(buckets, layers):
    """The ring's chains (docs/adasum.md, "Which tree"): layer j starts at rank j mod N."""
    world = len(buckets)
    out, at = [], 0
    for j, n in enumerate(layers):
        parts = [b[at:at + n] for b in buckets]
        acc = parts[j % world]
        for k in range(1, world):
            acc = adasum_pair(acc, parts[(j + k) % world])
        out.append(acc)
        at += n
    return torch.cat(out)


def check_adasum_hook(rank, world):
    """Wraps the hook: every bucket's inputs gathered over gloo, the hook's result compared with
    the reference; returns the largest relative error per layer and a digest of every result."""
    import gradsync.torch.hooks as hooks
    gloo = dist.new_group(backend="gloo")
    errors, seen, layer_counts = [], hashlib.sha256(), []

    def checked(state, bucket):
        mine = bucket.buffer().clone()
        everyone = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(everyone, mine, group=gloo)
        layers = [p.numel() for p in bucket.parameters()]
        layer_counts.append(len(layers))
        want = adasum_reference(everyone, layers)

        def compare(done):
            got = done.value()
            scale = want.abs().max().item() or 1.0
            errors.append((got - want).abs().max().item() / scale)
            seen.update(got.numpy().tobytes())
            return got

        return hooks.adasum(state, bucket).then(compare)

    torch.manual_seed(0)
    model = DistributedDataParallel(lenet(), bucket_cap_mb=0.05)
    model.register_comm_hook(None, checked)
    data = torch.Generator().manual_seed(7 + rank)
    for _ in range(3):
        model.zero_grad()
        x = torch.randn(8, 1, 28, 28, generator=data)
        nn.functional.cross_entropy(model(x), torch.randint(0, 10, (8,), generator=data)).backward()
    return max(errors), sum(layer_counts), seen.hexdigest()


@pytest.mark.parametrize("world", [2, 3])
def test_adasum_hook_equals_reference_on_every_rank(world):
    results = values(launch(world, check_adasum_hook))
    assert all(n >= 30 for _, n, _ in results), "every parameter of three iterations must be a layer"
    assert all(err < 1e-5 for err, _, _ in results), results
    assert len({d for _, _, d in results}) == 1, "ranks hold different bits"
