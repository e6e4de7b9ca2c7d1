"""The gradient compressor's RTL: one component per module."""

from .compressor import GradientCompressor
from .l1 import L1Accumulator, L1State
from .layouts import Cause, value_width
from .streamer import Streamer
from .writeback import WritebackBuffer

__all__ = ["GradientCompressor", "L1Accumulator", "L1State", "Streamer", "WritebackBuffer",
           "Cause", "value_width"]
