"""Magnitude compares of two values, written as the sign of their difference.

Yosys' ``synth_ecp5`` maps a compare of two signals (``a >= b``) to a carry chain with
logic after it that sets the critical path: signed compares of a 17-bit register with
19-bit ones, into registers, measured 6.5-6.9 ns on the ECP5-85F, where the sign bit of
``a - b`` (one carry chain, nothing after it) measured 4.0-4.3 ns
(``python -m gradient_compressor.synth.loops lookahead2``; docs/synth.md, design rules for
timing). These functions give
the same value as the operators for operands of any shape: Amaranth's difference of two
values is exact (one bit wider than the wider operand, signed if either is), so its top bit
is set exactly when ``a < b`` (for two unsigned operands the top bit is the borrow).

Compares with a constant keep the operators: Yosys turns them into a few LUTs.
``tests/test_compare.py`` checks every function against the operator on every value of small
shapes, and proves them equal with Yosys' SAT solver at the design's wide shapes (the formal
harness states the bypass windows with these functions and relies on that proof).
"""

from amaranth.hdl import Value

__all__ = ["less", "at_least", "greater", "at_most"]


def less(a, b):
    """``a < b``."""
    return (Value.cast(a) - b)[-1]


def at_least(a, b):
    """``a >= b``."""
    return ~less(a, b)


def greater(a, b):
    """``a > b``."""
    return less(b, a)


def at_most(a, b):
    """``a <= b``."""
    return ~less(b, a)
