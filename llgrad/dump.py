"""LLGRAD_DUMP=DIR: write every stage of every compile to DIR/<function>/<signature-hash>/."""
from __future__ import annotations


def dump_compiled(root: str, inspection) -> str:
    """Write the stages of one compiled signature; returns the directory written."""
    raise NotImplementedError("LLGRAD_DUMP is not implemented yet")  # TODO(issue 6)
