"""A plain-Python, cycle-free reference model of the compressor's policy, per gradient
(:class:`ReferenceModel`) and per line of lanes (:class:`LineModel`)."""

from .reference import ReferenceModel, Write, Discard, CAUSES, lfsr_step
from .lines import LineModel, LineWrite, LANES

__all__ = ["ReferenceModel", "Write", "Discard", "CAUSES", "lfsr_step",
           "LineModel", "LineWrite", "LANES"]
