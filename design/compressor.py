from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .l1 import L1Accumulator
from .layouts import Cause, gradient_layout, dram_layout
from .params import DEFAULTS, check_config, checked
from .streamer import Streamer
from .writeback import WritebackBuffer

__all__ = ["GradientCompressor"]


class GradientCompressor(wiring.Component):
    """Gradient compressor: streamer, set-associative L1 accumulator, L2 write-back buffer.

    Sits on the write path from an accelerator's compute core to DRAM. Every gradient accepted
    on ``grad_in`` reaches ``dram_out``, alone or added up with others for the same address:
    after a flush barrier, the values written for each address add up exactly to the gradients
    accepted for it. DRAM ``value`` is signed, ``grad_width + 2`` bits, enough for any sum.

    One gradient is accepted per cycle whenever the L2 buffer can take a write, including runs
    to one address or one set. Each gradient is judged against the ``threshold`` in force in
    the cycle it is accepted.

    After reset, L1 spends ``sets`` cycles clearing its SRAM (``grad_in.ready`` is low).

    Parameters
    ----------
    addr_width : int
        Address width, ``> log2(sets)``.
    grad_width : int
        Gradient width (signed) and threshold width (unsigned), ``>= 2``.
    sets, ways : int
        L1 geometry, powers of two.
    max_updates : int
        Updates after which an L1 entry is written out, ``>= 1``.
    fifo_depth : int
        L2 buffer capacity in writes, ``>= 1``.
    burst_size : int
        L2 level that starts a burst, ``1 <= burst_size <= fifo_depth``.

    The defaults (32-bit addresses, 16-bit gradients, 32 sets x 4 ways, max_updates 255, L2 of
    32 with bursts at 16) are :data:`design.params.DEFAULTS`; :func:`design.params.check_config`
    checks a configuration.

    Members
    -------
    grad_in : ``In(stream.Signature(StructLayout({"addr": addr_width, "grad": signed(grad_width)})))``
        Gradients from the compute core.
    threshold : ``In(grad_width)``
        Run-time threshold: ``|grad| >= threshold`` is written straight on.
    dram_out : ``Out(stream.Signature(StructLayout({"addr": addr_width, "value": signed(grad_width + 2)})))``
        Writes to DRAM; each adds ``value`` to the gradient at ``addr``.
    flush : ``In(1)``
        Flush barrier (a level): stops accepting, writes every L1 entry out, drains L2.
    idle : ``Out(1)``
        Nothing accepted is still inside. Under ``flush`` it rises once the barrier has
        completed and stays high until ``flush`` drops.
    direct_write, accum_write, max_updates_write, evict_write, flush_write : ``Out(1)``
        Strobes: a write of that cause entered the L2 buffer.
    l1_hit, l1_miss : ``Out(1)``
        Strobes: a small gradient committed on an L1 hit or miss.
    l1_valid_count : ``Out(range(sets * ways + 1))``
        Number of valid L1 entries.
    l2_level : ``Out(range(fifo_depth + 1))``
        Writes held in the L2 buffer.
    burst_active : ``Out(1)``
        The L2 buffer is in a burst.
    accepted_count, dram_write_count : ``Out(32)``
        Running counts (modulo 2**32) of gradients accepted and of DRAM writes.
    """

    def __init__(self, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                 sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], fifo_depth=DEFAULTS["fifo_depth"],
                 burst_size=DEFAULTS["burst_size"]):
        with checked(self):
            check_config(addr_width=addr_width, grad_width=grad_width, sets=sets, ways=ways,
                         max_updates=max_updates, fifo_depth=fifo_depth, burst_size=burst_size)

        self.streamer  = Streamer(addr_width=addr_width, grad_width=grad_width)
        self.l1        = L1Accumulator(addr_width=addr_width, grad_width=grad_width,
                                       sets=sets, ways=ways, max_updates=max_updates)
        self.writeback = WritebackBuffer(addr_width=addr_width, grad_width=grad_width,
                                         depth=fifo_depth, burst_size=burst_size)
        self.addr_width, self.grad_width = addr_width, grad_width
        self.sets, self.ways, self.max_updates = sets, ways, max_updates
        self.fifo_depth, self.burst_size = fifo_depth, burst_size

        super().__init__({
            "grad_in":           In(stream.Signature(gradient_layout(addr_width, grad_width))),
            "threshold":         In(grad_width),
            "dram_out":          Out(stream.Signature(dram_layout(addr_width, grad_width))),
            "flush":             In(1),
            "idle":              Out(1),
            "direct_write":      Out(1),
            "accum_write":       Out(1),
            "max_updates_write": Out(1),
            "evict_write":       Out(1),
            "flush_write":       Out(1),
            "l1_hit":            Out(1),
            "l1_miss":           Out(1),
            "l1_valid_count":    Out(range(sets * ways + 1)),
            "l2_level":          Out(range(fifo_depth + 1)),
            "burst_active":      Out(1),
            "accepted_count":    Out(32),
            "dram_write_count":  Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.streamer  = streamer  = self.streamer
        m.submodules.l1        = l1        = self.l1
        m.submodules.writeback = writeback = self.writeback

        wiring.connect(m, wiring.flipped(self.grad_in), streamer.grad_in)
        wiring.connect(m, streamer.grad_out, l1.grad_in)
        wiring.connect(m, writeback.dram_out, wiring.flipped(self.dram_out))
        m.d.comb += [
            streamer.threshold.eq(self.threshold),
            # L1 -> L2: the cause only feeds the event strobes.
            writeback.push.valid.eq(l1.push.valid),
            writeback.push.p.addr.eq(l1.push.p.addr),
            writeback.push.p.value.eq(l1.push.p.value),
            l1.push.ready.eq(writeback.push.ready),
            l1.flush.eq(self.flush),
            writeback.flush.eq(self.flush),
            self.idle.eq(l1.idle & (writeback.level == 0)),
        ]

        pushed = Signal()
        m.d.comb += pushed.eq(l1.push.valid & l1.push.ready)
        for strobe, cause in [(self.direct_write,      Cause.DIRECT),
                              (self.accum_write,       Cause.ACCUM_THRESHOLD),
                              (self.max_updates_write, Cause.MAX_UPDATES),
                              (self.evict_write,       Cause.EVICTION),
                              (self.flush_write,       Cause.FLUSH)]:
            m.d.comb += strobe.eq(pushed & (l1.push.p.cause == cause))
        m.d.comb += [
            self.l1_hit.eq(l1.hit),
            self.l1_miss.eq(l1.miss),
            self.l1_valid_count.eq(l1.valid_count),
            self.l2_level.eq(writeback.level),
            self.burst_active.eq(writeback.burst_active),
        ]

        m.d.sync += [
            self.accepted_count.eq(self.accepted_count + (self.grad_in.valid & self.grad_in.ready)),
            self.dram_write_count.eq(self.dram_write_count +
                                     (self.dram_out.valid & self.dram_out.ready)),
        ]
        return m
