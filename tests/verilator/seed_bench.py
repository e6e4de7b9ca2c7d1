"""cocotb testbench: the exported Verilog (``design/verilog.py``) under Verilator, driven by
the seed's stimulus (``workloads/seed.py``) with DRAM backpressure and a flush after each
scenario, as an SV user's flow would drive it.

Run by ``tests/verilator/test_verilator.py`` (cocotb's runner); not collected by pytest itself.
Each scenario offers its gradients (holding ``in_valid`` with a stable payload until
``in_ready``), answers DRAM with a seeded random ``dram_ready``, then raises ``flush`` until
``idle``. Checked: the DRAM stream's rules on every cycle, and after each flush, per address,
the sum written to DRAM equals the sum of the gradients accepted, and the compressor is idle.
"""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from gradient_compressor.workloads.seed import THRESHOLD, seed_phases

from .handshake import flush, offer

#: (phases of the seed's stimulus, probability that DRAM is ready in a cycle, seed)
SCENARIOS = [
    (["T1", "T2", "T3"], 0.5, 1),    # direct writes, accumulation threshold, max updates
    (["T4", "T5"], 0.3, 2),          # evictions in one set, an L2 burst, heavy backpressure
    (["S2"], 0.25, 3),               # 320 outliers: L2 fills and holds the input back
    (["S5"], 0.6, 4),                # L1 full, then forced evictions
]
#: Cycle limits of the waits.
ACCEPT_LIMIT = 2_000
FLUSH_LIMIT = 20_000
RESET_CYCLES = 2
IDLE_HOLD = 3


def scenario_gradients(prefixes):
    """The ``(addr, grad)`` pairs of the seed's phases whose names start with ``prefixes``."""
    return [pair for name, pairs in seed_phases()
            if any(name.startswith(p + " ") for p in prefixes) for pair in pairs]


class Harness:
    """Drives the inputs after each falling edge and samples the settled outputs 1 ns later,
    which is what the next rising edge takes."""

    def __init__(self, dut, ready_probability, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        self.ready_probability = ready_probability
        self.cycle = 0
        self.accepted, self.written = {}, {}
        self.pending = None     # (addr, value) offered to DRAM and not taken last cycle

    async def step(self):
        """One cycle: draw DRAM's ready, settle, check the DRAM stream, count the handshakes.
        Returns whether the gradient offered (if any) was taken."""
        dut = self.dut
        dut.dram_ready.value = int(self.rng.random() < self.ready_probability)
        await Timer(1, unit="ns")
        taken = bool(dut.in_valid.value) and bool(dut.in_ready.value)
        if taken:
            addr = int(dut.in_addr.value)
            self.accepted[addr] = self.accepted.get(addr, 0) + dut.in_grad.value.to_signed()
        if self.pending is not None:
            assert dut.dram_valid.value, f"cycle {self.cycle}: dram_valid fell before dram_ready"
            payload = (int(dut.dram_addr.value), dut.dram_value.value.to_signed())
            assert payload == self.pending, \
                f"cycle {self.cycle}: DRAM payload changed from {self.pending} to {payload}"
        self.pending = None
        if dut.dram_valid.value:
            payload = (int(dut.dram_addr.value), dut.dram_value.value.to_signed())
            if dut.dram_ready.value:
                self.written[payload[0]] = self.written.get(payload[0], 0) + payload[1]
            else:
                self.pending = payload
        await FallingEdge(dut.clk)
        self.cycle += 1
        return taken

    async def offer(self, addr, grad):
        """Offer one gradient and hold it until it is taken."""
        dut = self.dut
        dut.in_addr.value = addr
        dut.in_grad.value = grad & ((1 << len(dut.in_grad)) - 1)
        await offer(self, f"gradient ({addr:#x}, {grad})", ACCEPT_LIMIT)

    async def flush(self):
        """Raise flush until idle, hold it a few cycles (idle must stay high), drop it."""
        await flush(self, FLUSH_LIMIT, IDLE_HOLD)


@cocotb.test()
async def seed_scenarios_conserve_gradients(dut):
    """Every seed scenario, with backpressure and a flush: written == accepted per address."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start(start_high=False))
    for name in ("in_valid", "in_addr", "in_grad", "flush", "dram_ready"):
        getattr(dut, name).value = 0
    dut.threshold.value = THRESHOLD
    dut.rst.value = 1
    for _ in range(RESET_CYCLES):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    for prefixes, probability, seed in SCENARIOS:
        harness = Harness(dut, probability, seed)
        gradients = scenario_gradients(prefixes)
        assert gradients, f"no seed phase starts with {prefixes}"
        for addr, grad in gradients:
            await harness.offer(addr, grad)
        await harness.flush()
        # An address whose gradients add up to 0 need not be written at all.
        accepted = {a: s for a, s in harness.accepted.items() if s}
        written = {a: s for a, s in harness.written.items() if s}
        assert written == accepted, f"{prefixes}: per-address sums differ after the flush: " \
            f"{sorted(set(written.items()) ^ set(accepted.items()))[:5]}"
        dut._log.info("%s: %d gradients to %d addresses in %d cycles, DRAM ready %.0f %%",
                      "+".join(prefixes), len(gradients), len(harness.accepted),
                      harness.cycle, 100 * probability)
