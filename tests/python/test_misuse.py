"""Calls the gradsync backend cannot run end in a RuntimeError naming the cause, on every rank,
within the group's timeout + 5 s: an op or tensor it refuses, ranks whose calls disagree (size,
dtype, op, order), a rank that died. destroy_process_group leaves no thread, socket or
shared memory behind."""
import gc
import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from harness import launch

TIMEOUT = 5.0  # the group's: init_process_group(timeout=...)


def refused(rank, world, what):
    x = torch.ones(8)
    try:
        if what == "band_on_float":
            dist.all_reduce(x, op=dist.ReduceOp.BAND)
        elif what == "avg_on_int":
            dist.all_reduce(torch.ones(8, dtype=torch.int32), op=dist.ReduceOp.AVG)
        elif what == "not_contiguous":
            dist.all_reduce(torch.ones(4, 4).t())
        elif what == "bool":
            dist.all_reduce(torch.ones(8, dtype=torch.bool))
        elif what == "root":
            dist.broadcast(x, src=world)
    except RuntimeError as e:
        dist.barrier()  # the group still works: the call was refused before it was queued
        return str(e)
    return None


@pytest.mark.parametrize("what,named", [("band_on_float", "BAND is defined for integer dtypes only"),
                                        ("avg_on_int", "ReduceOp.AVG is not defined for Int"),
                                        ("not_contiguous", "not contiguous"),
                                        ("bool", "dtype Bool is not reduced"),
                                        ("root", "is not a rank of the group")])
def test_unsupported_calls_are_refused_by_name(what, named):
    outcome = launch(2, refused, what, timeout=TIMEOUT)
    for rank in (0, 1):
        assert outcome[rank][0] == "ok", outcome[rank]
        assert outcome[rank][1] is not None and named in outcome[rank][1], outcome[rank][1]


def disagree(rank, world, how):
    """Rank 0 and the others make different calls; returns (message, seconds) of the failure."""
    start = time.monotonic()
    try:
        if how == "size":
            dist.all_reduce(torch.ones(10 if rank == 0 else 20))
        elif how == "dtype":
            dist.all_reduce(torch.ones(10, dtype=torch.float32 if rank == 0 else torch.float64))
        elif how == "op":
            dist.all_reduce(torch.ones(10), op=dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX)
        elif how == "order":
            a, b = torch.ones(10), torch.ones(20)
            for _ in range(2):  # planned once in the same order, then called out of order
                for t in (a, b) if rank == 0 or _ == 0 else (b, a):
                    dist.all_reduce(t)
        elif how == "new_shape":  # rank 0 runs a planned call where rank 1 plans a new one
            dist.all_reduce(torch.ones(10))
            dist.all_reduce(torch.ones(10 if rank == 0 else 30))
        elif how == "kind":
            x = torch.ones(10)
            dist.all_reduce(x)
            dist.broadcast(x, 0)
            dist.all_reduce(x) if rank == 0 else dist.broadcast(x, 0)
    except RuntimeError as e:
        return str(e), time.monotonic() - start
    return None, time.monotonic() - start


@pytest.mark.parametrize("how", ["size", "dtype", "op", "order", "new_shape", "kind"])
def test_calls_that_disagree_fail_by_name_on_every_rank(how):
    outcome = launch(2, disagree, how, timeout=TIMEOUT)
    for rank in (0, 1):
        assert outcome[rank][0] == "ok", outcome[rank]
        message, seconds = outcome[rank][1]
        assert message is not None, f"rank {rank} completed a call its peer did not make"
        assert "disagree" in message or "same order" in message, message
        assert seconds < TIMEOUT + 5, (seconds, message)


def lose_a_rank(rank, world):
    x = torch.ones(1000)
    dist.all_reduce(x)
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(x)
    except RuntimeError as e:
        return str(e), time.monotonic() - start
    return None, time.monotonic() - start


def test_a_killed_rank_ends_the_others_waits_by_name():
    outcome = launch(3, lose_a_rank, timeout=TIMEOUT)
    assert outcome[2][0] == "lost"
    for rank in (0, 1):
        assert outcome[rank][0] == "ok", outcome[rank]
        message, seconds = outcome[rank][1]
        assert message is not None and "rank 2" in message, message
        assert seconds < TIMEOUT + 5, (seconds, message)


def resources():
    """Threads, sockets, and mappings of shared memory (gradsync's are memfd files, never in /dev/shm)."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor
            pass
    with open("/proc/self/maps") as maps:
        shared = sum("/memfd:" in line for line in maps)
    return len(os.listdir("/proc/self/task")), sum(link.startswith("socket:") for link in links), shared


def nothing_left(rank, world):
    before = resources()
    for _ in range(3):
        group = dist.new_group(backend="gradsync")
        x = torch.ones(100000)
        dist.all_reduce(x, group=group)
        dist.broadcast(x, 0, group=group)
        dist.destroy_process_group(group)
        del group
    gc.collect()
    return before, resources()


def test_destroy_leaves_nothing_behind():
    outcome = launch(2, nothing_left, timeout=TIMEOUT)
    for rank in (0, 1):
        assert outcome[rank][0] == "ok", outcome[rank]
        before, after = outcome[rank][1]
        assert after == before, f"rank {rank}: threads, sockets, /dev/shm before {before}, after {after}"
