"""dist.all_reduce (Sum, float32) over the gradsync backend against torch's gloo backend, the
two interleaved in one run: for every size, each repetition times one call of each (the side
that goes first alternating), every rank starting together after a gloo barrier; rank 0's
times, medians, and the ratio gloo / gradsync (above 1: gradsync is faster).

    /usr/bin/python3 bench/python/all_reduce.py --spawn 2            # one host
    (docs/results.md, "torch.distributed backends", has the command across namespace hosts)
"""
import statistics
import time

import torch
import torch.distributed as dist

from launch import arguments, run

KiB = 1024


def sizes(smallest, largest):
    s = smallest
    while s <= largest:
        yield s
        s *= 4


def repetitions(size_bytes):
    return 31 if size_bytes <= 1 << 20 else 11 if size_bytes <= 16 << 20 else 5


def body(rank, world, gloo, a):
    if rank == 0:
        print(f"all_reduce of float32, {world} ranks, medians of interleaved calls")
        print(f"{'bytes':>10} {'gloo ms':>10} {'gradsync ms':>12} {'gloo/gradsync':>14}")
    for size in sizes(a.smallest * KiB, a.largest * KiB):
        x = torch.ones(size // 4)
        sides = {"gloo": gloo, "gradsync": None}
        times = {name: [] for name in sides}
        for group in sides.values():  # the first call plans
            dist.all_reduce(x, group=group)
        for rep in range(repetitions(size)):
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for name in order:
                dist.barrier(group=gloo)
                start = time.perf_counter()
                dist.all_reduce(x, group=sides[name])
                times[name].append(time.perf_counter() - start)
        if rank == 0:
            g, s = statistics.median(times["gloo"]), statistics.median(times["gradsync"])
            print(f"{size:>10} {g * 1e3:>10.3f} {s * 1e3:>12.3f} {g / s:>14.2f}", flush=True)


def options(parser):
    parser.add_argument("--smallest", type=int, default=4, help="KiB")
    parser.add_argument("--largest", type=int, default=256 * 1024, help="KiB")


if __name__ == "__main__":
    run(body, arguments(__doc__.splitlines()[0], options))
