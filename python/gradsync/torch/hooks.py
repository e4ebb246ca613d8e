"""DDP communication hooks for the gradsync backend (docs/python.md, "Hooks").

Register one with ``ddp.register_comm_hook(state, hook)``; ``state`` is the process group
(``None``: the default group), which must be a gradsync one::

    ddp.register_comm_hook(None, gradsync.torch.hooks.adasum)

- ``adasum``: Adasum (Maleki et al., 2020) of each parameter's gradient, the parameters of the
  bucket being its layers; every rank gets the same bits. The result is Adasum's combination,
  not divided by the number of ranks (what Adasum replaces is the average).
- ``fp16_compress``, ``bf16_compress``: the bucket rounded once to float16 / bfloat16 for the
  wire, averaged there (each combine rounded to the narrow type, as gradsync's reducers do),
  and widened once into the bucket.
"""
import torch
import torch.distributed as dist

from gradsync.torch._c10d import ProcessGroup

__all__ = ["adasum", "fp16_compress", "bf16_compress"]


def _group(state):
    group = state if state is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(group, ProcessGroup):
        raise RuntimeError(
            "gradsync.torch.hooks: the hook's state must be a gradsync process group (or None with "
            f"init_process_group('gradsync')), not {type(group).__name__}")
    return group


def adasum(state, bucket):
    group = _group(state)
    layers = [p.numel() for p in bucket.parameters()]
    buffer = bucket.buffer()
    return group.allreduce_adasum(buffer, layers).get_future().then(lambda done: done.value()[0])


def _compressed(dtype):
    def hook(state, bucket):
        group = _group(state)
        buffer = bucket.buffer()
        wire = buffer.to(dtype)
        future = dist.all_reduce(wire, op=dist.ReduceOp.AVG, group=group, async_op=True).get_future()

        def widened(done):
            buffer.copy_(done.value()[0])
            return buffer

        return future.then(widened)

    hook.__name__ = f"{str(dtype).split('.')[-1]}_compress"
    return hook


fp16_compress = _compressed(torch.float16)
bf16_compress = _compressed(torch.bfloat16)
