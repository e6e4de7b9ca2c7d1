"""design.compare: each compare equals Amaranth's operator, for every shape pair."""

import itertools

import pytest
from amaranth import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from design.compare import at_least, at_most, greater, less

SHAPES = [unsigned(3), signed(3), unsigned(2), signed(4)]


def _values(shape):
    """Every value of ``shape``."""
    if shape.signed:
        return range(-(1 << (shape.width - 1)), 1 << (shape.width - 1))
    return range(1 << shape.width)


@pytest.mark.parametrize("shape_a, shape_b", itertools.product(SHAPES, SHAPES))
def test_compares_equal_the_operators(shape_a, shape_b):
    a, b = Signal(shape_a), Signal(shape_b)
    pairs = [(less(a, b), a < b), (at_least(a, b), a >= b), (greater(a, b), a > b),
             (at_most(a, b), a <= b)]
    m = Module()
    outputs = []
    for ours, theirs in pairs:
        o, t = Signal(), Signal()
        m.d.comb += [o.eq(ours), t.eq(theirs)]
        outputs.append((o, t))

    async def testbench(ctx):
        for x in _values(shape_a):
            for y in _values(shape_b):
                ctx.set(a, x)
                ctx.set(b, y)
                for o, t in outputs:
                    assert ctx.get(o) == ctx.get(t), (x, y)

    sim = Simulator(m)
    sim.add_testbench(testbench)
    sim.run()
