"""gradsync as a torch.distributed backend.

Importing this module registers the backend ``"gradsync"`` (once; importing again does
nothing)::

    import torch.distributed as dist
    import gradsync.torch
    dist.init_process_group("gradsync", ...)

The DDP hooks are in :mod:`gradsync.torch.hooks`; docs/python.md has the rest.
"""
import torch.distributed as _dist

from gradsync.torch._c10d import ProcessGroup

BACKEND = "gradsync"


def _create(store, rank, size, timeout):
    return ProcessGroup(store, rank, size, timeout)


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create)

__all__ = ["BACKEND", "ProcessGroup"]
