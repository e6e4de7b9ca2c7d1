"""A plain-Python, cycle-free reference model of the compressor's policy."""

from .reference import ReferenceModel, Write, CAUSES

__all__ = ["ReferenceModel", "Write", "CAUSES"]
