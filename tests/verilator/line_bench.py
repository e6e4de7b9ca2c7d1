"""cocotb testbench: the exported Verilog of the compressor on lines (``design/verilog.py``,
``--lanes 8`` on :data:`tests.line_helpers.GEOMETRY`) under Verilator against the line model.

Run by ``tests/verilator/test_verilator.py`` (cocotb's runner); not collected by pytest itself.
Random beats (:func:`~tests.line_helpers.random_steps`: random lines, gradients, masks and
thresholds), each step ended by a flush barrier, go in through the flat ports ``in_grads`` and
``in_mask``, with the bypass windows and the dual threshold on (their windows cover some lanes
of a line and not others) and a seeded random ``dram_ready``. What leaves through
``dram_addr``, ``dram_values`` and ``dram_mask``, lane by lane, and the discards reported on
``discard``, ``discard_addr`` and ``discard_error`` are then compared with the line model's
(:func:`~tests.line_helpers.check_with_the_model`, the comparison the Amaranth simulation's
test makes). Lanes packed in another order than the documented one (lane ``i`` in bits
``[i*w +: w]``, mask bit ``i``) on any of these ports put values at the wrong addresses.

With the environment variable ``LINE_BENCH_WHOLE_LINE=1`` the Verilog is the one exported with
``--whole-line`` (its ports are the same but ``dram_values``, ``grad_width`` bits a lane, as
``in_grads``), and the model follows the whole-line rule.
"""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from ..line_helpers import GEOMETRY, MODES, check_with_the_model, random_steps
from .handshake import flush, offer

#: Steps of random beats (each ended by a flush), and beats per step.
STEPS, BEATS = 60, 60
#: Run-time modes: lanes of one line inside and outside a bypass window, tiny misses dropped.
MODE = "bypass"
#: The probabilities that DRAM is ready in a cycle, one drawn per step.
READY_PROBABILITIES = (0.25, 0.5, 0.9)
#: The Verilog was exported with --whole-line: the model follows the whole-line rule.
WHOLE_LINE = os.environ.get("LINE_BENCH_WHOLE_LINE") == "1"
#: Cycle limits of the waits.
ACCEPT_LIMIT = 2_000
FLUSH_LIMIT = 2_000
RESET_CYCLES = 2


def lanes_of(value, lanes):
    """The ``lanes`` fields of a packed port's value, lane ``i`` in bits ``[i*w +: w]``, as
    signed integers."""
    width = len(value) // lanes
    fields = [int(value) >> i * width & ((1 << width) - 1) for i in range(lanes)]
    return [field - (1 << width) if field >> width - 1 else field for field in fields]


def packed(values, width):
    """``values`` packed into one integer, value ``i`` (two's complement) in bits
    ``[i*width +: width]``."""
    return sum((v & ((1 << width) - 1)) << i * width for i, v in enumerate(values))


class LineHarness:
    """Drives the inputs after each falling edge and samples the settled outputs 1 ns later,
    which is what the next rising edge takes; records the DRAM writes and the discards lane by
    lane."""

    def __init__(self, dut, seed):
        self.dut = dut
        self.lanes = len(dut.in_mask)
        self.rng = random.Random(seed)
        self.ready_probability = 1.0
        self.cycle = 0
        self.dram, self.discards = [], []

    def lanes_in(self, mask):
        """The lanes whose bit is set in ``mask``."""
        return [i for i in range(self.lanes) if int(mask) >> i & 1]

    async def step(self):
        """One cycle: draw DRAM's ready, settle, record the DRAM write taken and the discards.
        Returns whether the beat offered (if any) was taken."""
        dut = self.dut
        dut.dram_ready.value = int(self.rng.random() < self.ready_probability)
        await Timer(1, unit="ns")
        taken = bool(dut.in_valid.value) and bool(dut.in_ready.value)
        if dut.dram_valid.value and dut.dram_ready.value:
            addr, values = int(dut.dram_addr.value), lanes_of(dut.dram_values.value, self.lanes)
            self.dram += [(addr + i, values[i]) for i in self.lanes_in(dut.dram_mask.value)]
        if int(dut.discard.value):
            addr = int(dut.discard_addr.value)
            errors = lanes_of(dut.discard_error.value, self.lanes)
            self.discards += [(addr + i, errors[i]) for i in self.lanes_in(dut.discard.value)]
        await FallingEdge(dut.clk)
        self.cycle += 1
        return taken

    async def offer(self, line, grads, mask, threshold):
        """Offer one beat and hold it until it is taken."""
        dut = self.dut
        dut.in_addr.value = line
        dut.in_grads.value = packed(grads, GEOMETRY["grad_width"])
        dut.in_mask.value = mask
        dut.threshold.value = threshold
        await offer(self, f"beat ({line}, {grads}, {mask:#x})", ACCEPT_LIMIT)

    async def flush(self):
        """Raise flush until idle, keep it a cycle more (idle must stay high), drop it."""
        await flush(self, FLUSH_LIMIT, 1)


@cocotb.test()
async def random_beats_are_the_line_model(dut):
    """Random beats with flushes, the bypass windows and DRAM backpressure: DRAM's writes and
    the discards, lane by lane, are the line model's."""
    lanes = len(dut.in_mask)
    assert len(dut.in_grads) == lanes * GEOMETRY["grad_width"], \
        "the Verilog is not of tests.line_helpers.GEOMETRY"
    # A DRAM value: grad_width bits under the whole-line rule (the input's format), else two
    # more (design.layouts.line_value_width).
    value_width = GEOMETRY["grad_width"] + (0 if WHOLE_LINE else 2)
    assert len(dut.dram_values) == lanes * value_width, (len(dut.dram_values), value_width)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start(start_high=False))
    for name in ("in_valid", "in_addr", "in_grads", "in_mask", "flush", "dram_ready"):
        getattr(dut, name).value = 0
    for name, value in MODES[MODE].items():
        getattr(dut, name).value = value
    dut.rst.value = 1
    for _ in range(RESET_CYCLES):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    rng = random.Random(f"verilator-lines-{lanes}")
    steps = random_steps(rng, lanes, steps=STEPS, beats=BEATS)
    harness = LineHarness(dut, rng.random())
    for beats in steps:
        harness.ready_probability = rng.choice(READY_PROBABILITIES)
        for beat in beats:
            await harness.offer(*beat)
        await harness.flush()
    check_with_the_model(lanes, steps, MODES[MODE], harness.dram, harness.discards,
                         whole_line=WHOLE_LINE)
    dut._log.info("%d beats in %d steps, %d cycles: %d lane writes, %d discards, as the "
                  "model%s", STEPS * BEATS, STEPS, harness.cycle, len(harness.dram),
                  len(harness.discards), " (whole-line rule)" if WHOLE_LINE else "")
