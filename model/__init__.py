"""A plain-Python, cycle-free reference model of the compressor's policy."""

from .reference import ReferenceModel, Write, Discard, CAUSES, lfsr_step

__all__ = ["ReferenceModel", "Write", "Discard", "CAUSES", "lfsr_step"]
