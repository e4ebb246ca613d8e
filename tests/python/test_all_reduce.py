"""all_reduce, broadcast and barrier of the gradsync backend against torch's gloo backend on the
same inputs, on 1 to 4 processes: integer results equal, float results equal where the inputs
make every order of summation exact, and within the documented rounding elsewhere."""
import hashlib

import pytest
import torch
import torch.distributed as dist

from harness import launch, values

Op = dist.ReduceOp
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTEGERS = [torch.int8, torch.uint8, torch.int32, torch.int64]
SIZES = [1, 1000, 70001]
NAMES = {Op.SUM: "SUM", Op.AVG: "AVG", Op.MIN: "MIN", Op.MAX: "MAX", Op.PRODUCT: "PRODUCT", Op.BAND: "BAND",
         Op.BOR: "BOR", Op.BXOR: "BXOR"}


def ops_for(dtype):
    if dtype.is_floating_point:
        return [Op.SUM, Op.AVG, Op.MIN, Op.MAX, Op.PRODUCT]
    return [Op.SUM, Op.MIN, Op.MAX, Op.PRODUCT, Op.BAND, Op.BOR, Op.BXOR]


def exact_input(rank, dtype, n, op):
    """Small integers (products: ±1 and ±2 a few times), so that every order of combining is exact
    in every dtype; int8 sums wrap, as gloo's do."""
    g = torch.Generator().manual_seed(1000 * rank + n)
    if op == Op.PRODUCT:
        x = torch.randint(-2, 3, (n,), generator=g)
        x[x == 0] = 1
    else:
        x = torch.randint(-60, 60, (n,), generator=g)
    if dtype == torch.uint8:
        x = x.abs()
    return x.to(dtype)


def reference(inputs, op, dtype):
    """The rank-order reduction of every rank's input, computed here (float64 for floats)."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    acc = inputs[0].to(wide)
    for x in inputs[1:]:
        y = x.to(wide)
        if op in (Op.SUM, Op.AVG):
            acc = acc + y
        elif op == Op.PRODUCT:
            acc = acc * y
        elif op == Op.MIN:
            acc = torch.minimum(acc, y)
        elif op == Op.MAX:
            acc = torch.maximum(acc, y)
        elif op == Op.BAND:
            acc = acc & y
        elif op == Op.BOR:
            acc = acc | y
        elif op == Op.BXOR:
            acc = acc ^ y
    if op == Op.AVG:  # docs/semantics.md: the sum times 1/N, both in the accumulate type
        accumulate = torch.float64 if dtype == torch.float64 else torch.float32
        one_in_n = torch.tensor(1.0, dtype=accumulate) / len(inputs)
        return (acc.to(accumulate) * one_in_n).to(dtype)
    return acc.to(dtype)  # integer sums wrap here as in the dtype


def check_all_reduce(rank, world):
    """Every dtype x op x size; returns the failures, empty when all agree."""
    gloo = dist.new_group(backend="gloo")
    failures = []
    for dtype in FLOATS + INTEGERS:
        for op in ops_for(dtype):
            for n in SIZES:
                inputs = [exact_input(r, dtype, n, op) for r in range(world)]
                got = inputs[rank].clone()
                dist.all_reduce(got, op=op)
                want = reference(inputs, op, dtype)
                if not torch.equal(got, want):
                    bad = (got != want).nonzero()[0].item()
                    failures.append(f"{dtype} {NAMES[op]} n={n}: element {bad} is {got[bad]}, the rank-order reduction "
                                    f"{want[bad]}")
                # gloo on the same input, where it has the op
                if op != Op.AVG and dtype != torch.bfloat16:
                    theirs = inputs[rank].clone()
                    dist.all_reduce(theirs, op=op, group=gloo)
                    if not torch.equal(got, theirs):
                        failures.append(f"{dtype} {NAMES[op]} n={n}: differs from gloo's")
    return failures


def check_rounding(rank, world):
    """Random floats: SUM within n_ranks * eps * sum|x| of the exact sum, the same bits on every rank."""
    gloo = dist.new_group(backend="gloo")
    failures = []
    gathered = []
    for dtype in FLOATS:
        g = torch.Generator().manual_seed(rank)
        x = (torch.randn(50000, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (50000,), generator=g))
        x = x.to(dtype)
        raw = x.view(torch.uint8)  # gloo gathers bytes of any dtype
        everyone = [torch.empty_like(raw) for _ in range(world)]
        dist.all_gather(everyone, raw, group=gloo)
        everyone = [t.view(dtype) for t in everyone]
        got = x.clone()
        dist.all_reduce(got)
        exact = sum(t.to(torch.float64) for t in everyone)
        bound = sum(t.to(torch.float64).abs() for t in everyone) * world * torch.finfo(dtype).eps + 1e-300
        err = (got.to(torch.float64) - exact).abs()
        if (err > bound).any():
            failures.append(f"{dtype}: error {err.max().item()} above the bound")
        gathered.append(got)
    return failures, [hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest() for t in gathered]


def check_broadcast_barrier(rank, world):
    failures = []
    for root in range(world):
        for dtype in FLOATS + INTEGERS:
            x = exact_input(root, dtype, 777, Op.SUM)
            got = x.clone() if rank == root else torch.zeros_like(x)
            dist.broadcast(got, src=root)
            if not torch.equal(got, x):
                failures.append(f"broadcast of {dtype} from {root} differs")
        dist.barrier()
    return failures


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_all_reduce_matches_reference_and_gloo(world):
    assert values(launch(world, check_all_reduce)) == [[]] * world


@pytest.mark.parametrize("world", [2, 3])
def test_float_sums_within_rounding_same_bits_everywhere(world):
    results = values(launch(world, check_rounding))
    assert all(failures == [] for failures, _ in results), results
    assert all(fingerprint == results[0][1] for _, fingerprint in results)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_broadcast_and_barrier(world):
    assert values(launch(world, check_broadcast_barrier)) == [[]] * world
