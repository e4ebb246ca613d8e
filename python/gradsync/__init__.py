"""gradsync: gradient allreduce for data-parallel training.

The C++ library is header-only; this package is its Python side. ``import gradsync.torch``
registers the ``"gradsync"`` backend of ``torch.distributed`` (docs/python.md).
"""
