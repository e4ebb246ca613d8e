"""What the Python benchmarks share: how a rank joins the job, and how the job is started.

Either on this host, `--spawn N` processes (torch.multiprocessing, a file store), or one rank
per command line, `--rank R --world N --init tcp://ADDRESS:PORT`, as on several hosts (each
rank on its host; GLOO_SOCKET_IFNAME names its interface for both backends). Every rank runs
`body(rank, world, arguments)` in a job whose default group is gradsync's, with a gloo group
of the same ranks beside it; rank 0 prints.
"""
import argparse
import datetime
import os
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp


def arguments(description, extra=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--spawn", type=int, help="processes to start on this host")
    parser.add_argument("--rank", type=int)
    parser.add_argument("--world", type=int)
    parser.add_argument("--init", help="the job's init_method (with --rank and --world)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    if extra:
        extra(parser)
    a = parser.parse_args()
    if not a.spawn and (a.rank is None or a.world is None or not a.init):
        parser.error("give --spawn N, or --rank R --world N --init URL")
    return a


def _rank(rank, world, init, body, a):
    import torch

    import gradsync.torch  # noqa: F401  registers the backend

    torch.set_num_threads(a.threads)
    dist.init_process_group("gradsync", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    body(rank, world, gloo, a)
    dist.destroy_process_group()


def run(body, a):
    if a.spawn:
        with tempfile.TemporaryDirectory(prefix="gradsync-bench-") as d:
            mp.spawn(_rank, args=(a.spawn, f"file://{os.path.join(d, 'store')}", body, a), nprocs=a.spawn)
    else:
        _rank(a.rank, a.world, a.init, body, a)
