"""The gradient compressor's RTL: one component per module."""

from .compressor import GradientCompressor
from .l1 import L1Accumulator, L1State
from .layouts import Cause, value_width
from .line_accumulator import LineAccumulator
from .streamer import Streamer
from .writeback import WritebackBuffer

# The register interface (an AXI4-Lite register file, and the compressor behind one) is
# design.registers, also a command (python -m gradient_compressor.design.registers writes the map).
__all__ = ["GradientCompressor", "L1Accumulator", "L1State", "LineAccumulator", "Streamer",
           "WritebackBuffer", "Cause", "value_width"]
