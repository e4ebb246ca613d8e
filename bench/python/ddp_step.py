"""One DistributedDataParallel training step (forward, backward with DDP's allreduces, SGD)
over gloo, over gradsync, over gradsync with the Adasum hook, and with no communication at
all (a hook that hands each bucket back unreduced: the floor no backend can beat on this
machine), interleaved in one run: each repetition times one step of each model (the order
rotating), all four models started from the same parameters; rank 0's medians and the ratios
to gloo (above 1: faster than gloo).

    /usr/bin/python3 bench/python/ddp_step.py --spawn 2 --model lenet
    /usr/bin/python3 bench/python/ddp_step.py --spawn 2 --model mlp25m
    /usr/bin/python3 bench/python/ddp_step.py --spawn 2 --model mlp25m --bucket-cap planned

--bucket-cap gives every side the same bucket_cap_mb: a number, or "planned", the cap
gradsync.torch.buckets chooses from this model's backward profile and the gradsync group's
measured all_reduce cost (docs/python.md, "Bucket size").
"""
import copy
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from launch import arguments, run


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def mlp25m():
    """24.2 million parameters (about ResNet-50's count) in four linear layers."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10))


def unreduced(state, bucket):
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def body(rank, world, gloo, a):
    import gradsync.torch.hooks as hooks

    torch.manual_seed(0)
    model = {"lenet": lenet, "mlp25m": mlp25m}[a.model]()
    data = torch.Generator().manual_seed(rank)
    x, y = torch.randn(a.batch, 1, 28, 28, generator=data), torch.randint(0, 10, (a.batch,), generator=data)
    cap = 25.0
    if a.bucket_cap == "planned":
        from gradsync.torch import buckets
        probe = copy.deepcopy(model)
        profile = buckets.backward_profile(probe, lambda: nn.functional.cross_entropy(probe(x), y))
        choice = buckets.bucket_cap(profile, buckets.measured_cost())
        cap = choice.bucket_cap_mb
        if rank == 0:
            print(f"planned bucket_cap_mb {cap:.3f}: predicted {choice.predicted_s * 1e3:.2f} ms, "
                  f"25 MB {choice.default_s * 1e3:.2f} ms, MG-WFBP {choice.mgwfbp_s * 1e3:.2f} ms, "
                  f"optimum {choice.optimal_s * 1e3:.2f} ms")
    elif a.bucket_cap is not None:
        cap = float(a.bucket_cap)
    sides = {
        "gloo": DistributedDataParallel(copy.deepcopy(model), process_group=gloo, bucket_cap_mb=cap),
        "gradsync": DistributedDataParallel(copy.deepcopy(model), bucket_cap_mb=cap),
        "gradsync+adasum": DistributedDataParallel(copy.deepcopy(model), bucket_cap_mb=cap),
    }
    sides["gradsync+adasum"].register_comm_hook(None, hooks.adasum)
    sides["no communication"] = DistributedDataParallel(copy.deepcopy(model), bucket_cap_mb=cap)
    sides["no communication"].register_comm_hook(None, unreduced)
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in sides.items()}

    def step(name):
        optimizers[name].zero_grad()
        nn.functional.cross_entropy(sides[name](x), y).backward()
        optimizers[name].step()

    names = list(sides)
    for name in names:  # plans, buckets
        for _ in range(3):
            step(name)
    times = {name: [] for name in names}
    for rep in range(a.steps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            dist.barrier(group=gloo)
            start = time.perf_counter()
            step(name)
            times[name].append(time.perf_counter() - start)
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        base = statistics.median(times["gloo"])
        print(f"DDP step, {a.model} ({params / 1e6:.2f} M parameters), batch {a.batch}, {world} ranks, "
              f"bucket_cap_mb {cap:.3f}, {a.steps} interleaved steps")
        for name in names:
            m = statistics.median(times[name])
            print(f"{name:>16} {m * 1e3:9.2f} ms  gloo/this {base / m:5.2f}")


def options(parser):
    parser.add_argument("--model", choices=["lenet", "mlp25m"], default="lenet")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bucket-cap", help='bucket_cap_mb for every side: MB, or "planned"')


if __name__ == "__main__":
    run(body, arguments(__doc__.splitlines()[0], options))
