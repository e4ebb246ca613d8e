"""The gradsync backend's other collectives on 1 to 4 processes, every dtype, against the result
each must give (every rank's input is known to every rank) and, where gloo has the call,
against gloo on the same input: all_gather (list and into one tensor), gather, scatter,
all_to_all (list and single), reduce_scatter (list and tensor), reduce, all_reduce_coalesced,
send/recv/isend/irecv, async_op, and subgroups from dist.new_group."""
import pytest
import torch
import torch.distributed as dist

from harness import launch, values

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32,
          torch.int64]


def block(source, dtype, n, salt=0):
    """Rank `source`'s data: small integers every dtype holds exactly."""
    g = torch.Generator().manual_seed(7919 * source + 31 * n + salt)
    return torch.randint(0, 100, (n,), generator=g).to(dtype)


def check(failures, what, got, want):
    if not torch.equal(got, want):
        failures.append(what)


def movements(rank, world):
    failures = []
    gloo = dist.new_group(backend="gloo")
    for dtype in DTYPES:
        for n in (0, 1, 1000, 40000):
            mine = block(rank, dtype, n)
            everyone = [block(r, dtype, n) for r in range(world)]
            what = f"{dtype} n={n}"

            out = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(out, mine)
            for r in range(world):
                check(failures, f"all_gather {what} block {r}", out[r], everyone[r])
            if dtype != torch.bfloat16 and n > 0:  # gloo has no bf16; its allgather of 0 elements divides by 0
                theirs = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(theirs, mine, group=gloo)
                check(failures, f"all_gather {what} against gloo", torch.cat(out), torch.cat(theirs))

            flat = torch.empty(world * n, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine)
            check(failures, f"all_gather_into_tensor {what}", flat, torch.cat(everyone))

            for root in range(world):
                out = [torch.empty_like(mine) for _ in range(world)] if rank == root else None
                dist.gather(mine, out, dst=root)
                if rank == root:
                    for r in range(world):
                        check(failures, f"gather {what} to {root} block {r}", out[r], everyone[r])

                pieces = [block(root, dtype, n, salt=r + 1) for r in range(world)]
                got = torch.empty_like(mine)
                dist.scatter(got, pieces if rank == root else None, src=root)
                check(failures, f"scatter {what} from {root}", got, pieces[rank])

            sent = [block(rank, dtype, n, salt=100 + r) for r in range(world)]
            got = [torch.empty_like(mine) for _ in range(world)]
            dist.all_to_all(got, sent)
            for r in range(world):
                check(failures, f"all_to_all {what} from {r}", got[r], block(r, dtype, n, salt=100 + rank))
            single = torch.empty(world * n, dtype=dtype)
            dist.all_to_all_single(single, torch.cat(sent))
            check(failures, f"all_to_all_single {what}", single, torch.cat(got))
    return failures


def reductions(rank, world):
    failures = []
    for dtype in DTYPES:
        for n in (1, 1000, 30000):
            inputs = [[block(r, dtype, n, salt=b) for b in range(world)] for r in range(world)]
            want = [sum(inputs[r][b].to(torch.float64) for r in range(world)).to(dtype) for b in range(world)]
            what = f"{dtype} n={n}"

            out = torch.empty(n, dtype=dtype)
            kept = [t.clone() for t in inputs[rank]]
            dist.reduce_scatter(out, inputs[rank])
            check(failures, f"reduce_scatter {what}", out, want[rank])
            if any(not torch.equal(a, b) for a, b in zip(kept, inputs[rank])):
                failures.append(f"reduce_scatter {what} changed its input")

            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, torch.cat(inputs[rank]))
            check(failures, f"reduce_scatter_tensor {what}", out, want[rank])

            for root in range(world):
                x = inputs[rank][0].clone()
                dist.reduce(x, dst=root)
                if rank == root:
                    check(failures, f"reduce {what} to {root}", x, want[0])

            tensors = [t.clone() for t in inputs[rank]]
            dist.all_reduce_coalesced(tensors)
            for b in range(world):
                check(failures, f"all_reduce_coalesced {what} tensor {b}", tensors[b], want[b])
    return failures


def messages(rank, world):
    """Rank r sends to r+1 and receives from r-1 (a ring), blocking and posted first, then
    every rank async_op all_reduces two tensors and waits on both."""
    failures = []
    right, left = (rank + 1) % world, (rank - 1) % world
    for dtype in DTYPES:
        for n in (1, 100000):
            mine, got = block(rank, dtype, n), torch.empty(n, dtype=dtype)
            posted = [dist.isend(mine, right, tag=5), dist.irecv(got, left, tag=5)]
            for w in posted:
                w.wait()
            check(failures, f"isend/irecv {dtype} n={n}", got, block(left, dtype, n))
            if rank % 2 == 0:
                dist.send(mine, right, tag=6)
                dist.recv(got, left, tag=6)
            else:
                dist.recv(got, left, tag=6)
                dist.send(mine, right, tag=6)
            check(failures, f"send/recv {dtype} n={n}", got, block(left, dtype, n))
    a, b = torch.full((1000,), float(rank)), torch.full((10,), 1.0)
    works = [dist.all_reduce(a, async_op=True), dist.all_reduce(b, async_op=True)]
    for w in works:
        w.wait()
    check(failures, "async all_reduce", a, torch.full((1000,), float(sum(range(world)))))
    check(failures, "async all_reduce", b, torch.full((10,), float(world)))
    return failures


def subgroups(rank, world):
    """Even and odd ranks in groups of their own, each reducing its members' ranks."""
    failures = []
    evens, odds = list(range(0, world, 2)), list(range(1, world, 2))
    groups = [dist.new_group(evens, backend="gradsync"), dist.new_group(odds, backend="gradsync")]
    members = evens if rank % 2 == 0 else odds
    x = torch.full((5000,), float(rank))
    dist.all_reduce(x, group=groups[rank % 2])
    check(failures, f"subgroup {members}", x, torch.full((5000,), float(sum(members))))
    for g in groups:
        dist.destroy_process_group(g)
    return failures


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_data_movements(world):
    assert values(launch(world, movements)) == [[]] * world


@pytest.mark.parametrize("world", [1, 2, 3])
def test_reduce_scatter_reduce_coalesced(world):
    assert values(launch(world, reductions)) == [[]] * world


@pytest.mark.parametrize("world", [2, 3])
def test_messages_and_async(world):
    assert values(launch(world, messages)) == [[]] * world


def test_subgroups():
    assert values(launch(4, subgroups)) == [[]] * 4
