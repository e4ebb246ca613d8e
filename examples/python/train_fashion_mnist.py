"""LeNet on Fashion-MNIST with DistributedDataParallel over the gradsync backend: the Python
twin of examples/torch/train_fashion_mnist.cpp (docs/torch.md, "The study"), with its network,
data order and schedule: momentum SGD (0.9), batch 32 per rank, 2 epochs, a linear warm-up over
the first 17% of the steps to the peak rate 0.0328 and a linear decay to zero; N ranks take N
times fewer steps with N times the batch. The gradients are averaged (DDP's own reduction),
summed, or combined by Adasum (gradsync.torch.hooks.adasum).

    torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 \\
        examples/python/train_fashion_mnist.py --policy adasum
    /usr/bin/python3 examples/python/train_fashion_mnist.py --spawn 4 --policy sum --seed 2

Rank 0 prints the test accuracy after the last epoch and a hash of the parameters, which every
rank checks against its own (the replicas must be equal).
"""
import argparse
import datetime
import gzip
import hashlib
import os
import struct
import tempfile

import numpy
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import gradsync.torch  # noqa: F401  registers the backend
import gradsync.torch.hooks as hooks


class LeNet(nn.Module):
    """Horovod's MNIST network, as examples/torch/lenet.hpp: dropout from the replica's own
    generator, whole channels after the second convolution."""

    def __init__(self, dropout_seed):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
        self.fc1, self.fc2 = nn.Linear(320, 50), nn.Linear(50, 10)
        self.dropout = torch.Generator().manual_seed(dropout_seed)

    def drop(self, x, channels):
        if not self.training:
            return x
        shape = (x.size(0), x.size(1), 1, 1) if channels else x.shape
        return x * torch.bernoulli(torch.full(shape, 0.5), generator=self.dropout) / 0.5

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.drop(self.conv2(x), True), 2))
        x = self.drop(F.relu(self.fc1(x.view(-1, 320))), False)
        return F.log_softmax(self.fc2(x), 1)


def idx(path):
    with gzip.open(path) as f:
        magic, = struct.unpack(">i", f.read(4))
        dims = struct.unpack(">" + "i" * (magic & 0xff), f.read(4 * (magic & 0xff)))
        return torch.from_numpy(numpy.frombuffer(f.read(), dtype=numpy.uint8).reshape(dims).copy())


def load(directory, split, limit):
    x = idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"))
    y = idx(os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"))
    if limit:
        x, y = x[:limit], y[:limit]
    return ((x.float().div(255) - 0.2860) / 0.3530).unsqueeze(1), y.long()


def rate_at(a, step, steps):
    t, w = step / steps, max(a.warmup, 1e-9)
    return a.lr * (t / w if t < w else max(0.0, (1 - t) / (1 - w)))


def summed(state, bucket):
    """DDP hook: the gradients added, not averaged."""
    return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda done: done.value()[0])


def train(rank, world, a):
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    model = LeNet(a.seed * 1000 + rank)
    ddp = DistributedDataParallel(model)
    if a.policy == "sum":
        ddp.register_comm_hook(None, summed)
    elif a.policy == "adasum":
        ddp.register_comm_hook(None, hooks.adasum)
    sgd = torch.optim.SGD(ddp.parameters(), lr=0.0, momentum=a.momentum)
    x, y = load(a.data, "train", a.train_limit)
    test_x, test_y = load(a.data, "t10k", 0)
    per_step = a.batch * world
    steps_per_epoch = x.size(0) // per_step
    steps = steps_per_epoch * a.epochs
    for e in range(a.epochs):
        order = torch.randperm(x.size(0), generator=torch.Generator().manual_seed(a.seed * 1000 + e))
        for s in range(steps_per_epoch):
            picked = order[s * per_step + rank * a.batch:][:a.batch]
            for group in sgd.param_groups:
                group["lr"] = rate_at(a, e * steps_per_epoch + s, steps)
            sgd.zero_grad()
            F.nll_loss(ddp(x[picked]), y[picked]).backward()
            sgd.step()
    model.eval()
    with torch.no_grad():
        right = sum(int(model(test_x[i:i + 1000]).argmax(1).eq(test_y[i:i + 1000]).sum()) for i in
                    range(0, test_x.size(0), 1000))
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    everyone = [None] * world
    dist.all_gather_object(everyone, digest)
    if len(set(everyone)) != 1:
        raise RuntimeError(f"rank {rank}: the replicas differ after {steps} steps")
    if rank == 0:
        print(f"policy={a.policy} ranks={world} seed={a.seed} steps={steps} "
              f"accuracy={100.0 * right / test_x.size(0):.2f} parameters={digest[:16]}", flush=True)


def spawned(rank, world, store, a):
    dist.init_process_group("gradsync", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    train(rank, world, a)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spawn", type=int, help="start N ranks on this host (otherwise torchrun's environment)")
    p.add_argument("--policy", choices=["average", "sum", "adasum"], default="average")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.0328)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--warmup", type=float, default=0.17)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train-limit", type=int, default=0, help="use the first IMAGES training images (0: all)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--timeout", type=float, default=300, help="seconds, the group's deadline")
    a = p.parse_args()
    if a.spawn:
        with tempfile.TemporaryDirectory(prefix="gradsync-example-") as d:
            mp.spawn(spawned, args=(a.spawn, os.path.join(d, "store"), a), nprocs=a.spawn)
    else:
        dist.init_process_group("gradsync", timeout=datetime.timedelta(seconds=a.timeout))
        train(dist.get_rank(), dist.get_world_size(), a)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
