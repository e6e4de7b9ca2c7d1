"""The compressor on lines (``GradientCompressor(lanes=N)``), checked from reset with every
input free: the first formal check of lines, bounded, stated on the ports alone.

* ``lines``: for a tracked address (any one, fixed for the run), the gradients accepted for it
  equal the values DRAM received for it plus the discards accounted for it whenever the
  compressor is ``idle`` (nothing accepted is inside), in every mode; and ``dram_out``'s
  stream rules (valid held with a stable payload until taken).

The same check applies to the compressor built with ``whole_line=True`` (L1 deciding by the
whole-line rule): conservation and the stream rules do not depend on the rule.

A beat's lane ``i`` is the gradient at the line's address plus ``i``, where the line's address
is ``grad_in``'s with its low ``log2(lanes)`` bits cleared, as the design reads it; a DRAM
write's lane ``i`` adds at ``dram_out``'s address plus ``i``; a discard's lane ``i`` is at
``discard_addr`` plus ``i``.
"""

from amaranth import *
from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assume
from amaranth.lib.wiring import In

from gradient_compressor.design.compressor import GradientCompressor
from gradient_compressor.design.params import Config, log2

from .base import PropertySet, past

__all__ = ["LineHarness"]


class LineHarness(Elaboratable):
    """``GradientCompressor(lanes=lanes, whole_line=whole_line)`` with the parameters of
    ``config`` (a :data:`.harness.CONFIGS` entry), reset in the first cycle only, every input
    free; the ``lines`` group asserted (and its covers emitted if ``covers``).

    Parameters
    ----------
    config : Config or mapping
        The compressor's parameters (its ``lanes`` and ``whole_line`` replaced by these).
    lanes : int
        Gradients per beat, at least 2.
    covers : bool
        Emit the covers.
    whole_line : bool
        Build the compressor with L1 deciding by the whole-line rule.
    """

    def __init__(self, config, lanes, *, covers=False, whole_line=False):
        self.config = Config.of(config, lanes=lanes, whole_line=whole_line)
        self.bound = None
        self.dut = GradientCompressor(self.config)
        self.lanes, self.covers = lanes, covers
        self.props = PropertySet()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        N, P = self.lanes, self.props
        rst = ResetSignal()
        m.d.comb += Assume(rst == Initial())
        for path, member, value in dut.signature.flatten(dut):
            if member.flow == In:
                value = Value.cast(value)
                m.d.comb += value.eq(AnySeq(value.shape()))

        tracked = Signal(dut.addr_width, name="lines_tracked_addr")
        m.d.comb += tracked.eq(AnyConst(dut.addr_width))
        wide = signed(dut.grad_width + 24)     # far more than a bounded run can add up
        accepted, written, discarded = (Signal(wide, name=f"lines_{name}_at_tracked")
                                        for name in ("accepted", "written", "discarded"))
        beat, out = dut.grad_in, dut.dram_out
        line = Cat(Const(0, log2(N)), beat.p.addr[log2(N):])

        def at_tracked(addr, i, mask):   # lane i of a line at addr is the tracked address
            return mask[i] & (addr + i == tracked)

        m.d.sync += [
            accepted.eq(accepted + sum(
                Mux(beat.valid & beat.ready & at_tracked(line, i, beat.p.mask),
                    beat.p.grads[i], 0) for i in range(N))),
            written.eq(written + sum(
                Mux(out.valid & out.ready & at_tracked(out.p.addr, i, out.p.mask),
                    out.p.values[i], 0) for i in range(N))),
            discarded.eq(discarded + sum(
                Mux(at_tracked(dut.discard_addr, i, dut.discard), dut.discard_error[i], 0)
                for i in range(N))),
        ]
        P.check("lines", "tracked_address_conserved_at_idle",
                ~dut.idle | (accepted == written + discarded))
        waiting = past(m, out.valid & ~out.ready, "lines_dram_waiting")
        payload = past(m, out.payload.as_value(), "lines_dram_payload")
        P.check("lines", "dram_out_valid_held_until_ready", ~waiting | out.valid)
        P.check("lines", "dram_out_payload_stable_until_ready",
                ~waiting | (out.payload.as_value() == payload))
        if self.covers:
            P.cover("lines_idle_after_a_write_and_a_discard_at_tracked",
                    dut.idle & (written != 0) & (discarded != 0))
        P.emit(m, covers=self.covers, guard=rst)
        return m
