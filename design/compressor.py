from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .bits import tree_sum
from .compare import at_most
from .l1 import L1Accumulator
from .layouts import (Cause, gradient_layout, dram_layout, line_layout, line_dram_layout,
                      line_value_width, discard_error_width, discard_sum_width)
from .line_accumulator import LineAccumulator
from .modes import DiscardTotals, Lfsr, EmaThreshold, ema_candidate, ema_clamp
from .params import (LFSR_WIDTH, DISCARD_COUNT_WIDTH, Config, checked,
                     ema_fraction_bits, log2, modes_signature)
from .streamer import Streamer
from .writeback import WritebackBuffer

__all__ = ["GradientCompressor", "signature", "connect_random"]


def connect_random(m, lfsr, l1):
    """Feed ``l1``'s random bits from ``lfsr`` (an :class:`~design.modes.Lfsr`, or a stand-in
    with its ``state``, ``next_state`` and ``step``), which steps when L1 uses them.

    The random bits are the LFSR's low ``R = min(grad_width, 32)`` bits, placed at the top of
    L1's ``grad_width``-bit input (so L1's test ``u * small < |g| * 2**grad_width`` is the same
    as ``u * small < |g| * 2**R`` on the ``R`` bits)."""
    width = len(l1.random)
    random_bits = min(width, LFSR_WIDTH)
    m.d.comb += [
        l1.random.eq(lfsr.state[:random_bits] << (width - random_bits)),
        l1.random_next.eq(lfsr.next_state[:random_bits] << (width - random_bits)),
        lfsr.step.eq(l1.random_step),
    ]


def signature(config=None, /, **params):
    """The :class:`GradientCompressor` signature of a configuration (its members' shapes),
    without building one: of ``config`` (a :class:`~design.params.Config`, else the defaults)
    with ``params`` in place of its own."""
    config = Config.of(config, **params)
    addr_width, grad_width, lanes = config.addr_width, config.grad_width, config.lanes
    sets, ways, fifo_depth = config.sets, config.ways, config.fifo_depth
    # Under the whole-line rule a DRAM write's values are gradients' width (a record's value
    # with one lane, each lane's on lines).
    value_width = line_value_width(grad_width, config.whole_line)
    if lanes == 1:
        beat, write = (gradient_layout(addr_width, grad_width),
                       dram_layout(addr_width, grad_width, value_width))
        discard_error = signed(discard_error_width(grad_width))
    else:
        beat, write = (line_layout(addr_width, grad_width, lanes),
                       line_dram_layout(addr_width, grad_width, lanes, value_width))
        discard_error = data.ArrayLayout(signed(discard_error_width(grad_width)), lanes)
    return wiring.Signature({
        "grad_in":           In(stream.Signature(beat)),
        "threshold":         In(grad_width),
        "dram_out":          Out(stream.Signature(write)),
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
        # run-time modes (design/modes.py)
        **modes_signature(addr_width, grad_width, config.bypass_windows).members,
        "current_threshold": Out(grad_width),
        "ema_average":       Out(grad_width + ema_fraction_bits(lanes)),
        "stochastic_write":  Out(1),
        "discard":           Out(lanes),
        "discard_addr":      Out(addr_width),
        "discard_error":     Out(discard_error),
        "discard_count":     Out(DISCARD_COUNT_WIDTH),
        "discard_sum":       Out(signed(discard_sum_width(grad_width))),
        "bypassed":          Out(lanes),
    })


class GradientCompressor(wiring.Component):
    """Gradient compressor: streamer, set-associative L1 accumulator, L2 write-back buffer.

    Sits on the write path from an accelerator's compute core to DRAM. Every gradient accepted
    on ``grad_in`` reaches ``dram_out``, alone or added up with others for the same address:
    after a flush barrier, the values written for each address add up exactly to the gradients
    accepted for it. DRAM ``value`` is signed, ``grad_width + 2`` bits, enough for any sum
    (under the whole-line rule, ``grad_width`` bits: the input's format).

    One gradient is accepted per cycle whenever the L2 buffer can take a write, including runs
    to one address or one set. Each gradient is judged against the ``threshold`` in force in
    the cycle it is accepted.

    After reset, L1 spends ``sets`` cycles clearing its SRAM (``grad_in.ready`` is low).

    Run-time modes (dual threshold, dynamic EMA threshold, bypass windows) are described in
    :mod:`design.modes`; with their inputs at 0 (:data:`design.params.MODES_OFF`) the
    compressor behaves exactly as without them.

    Parameters
    ----------
    config : :class:`~design.params.Config`, optional
        The configuration (the defaults if not given); the keyword parameters below, if given,
        replace its own.
    addr_width : int
        Address width, ``> log2(sets)`` (``> log2(sets) + log2(lanes)`` on lines).
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
    lanes : int
        Gradients per beat (a line), one of 1, 2, 4, 8, 16, 32 (docs/lanes.md).
    whole_line : bool
        L1 decides by the whole-line rule (``model.LineModel(whole_line=True)``; with one lane
        ``model.ReferenceModel(whole_line=True)``; docs/lanes.md): a beat writes its whole line
        or allocates it, and every value L1 writes fits ``grad_width`` bits, so the writes are
        ``grad_width`` bits a value from L1 to ``dram_out`` (the input's format: with one lane a
        record is an address and a gradient's width, on lines a line write a gradient's width a
        lane; :func:`~design.layouts.line_value_width`). False (the default): the line policy,
        or the seed's with one lane.

    The defaults (32-bit addresses, 16-bit gradients, 32 sets x 4 ways, max_updates 255, L2 of
    32 with bursts at 16, one lane) and the checks are :class:`design.params.Config`'s.

    Members
    -------
    grad_in : ``In(stream.Signature(StructLayout({"addr": addr_width, "grad": signed(grad_width)})))``
        Gradients from the compute core.
    threshold : ``In(grad_width)``
        Run-time threshold: ``|grad| >= threshold`` is written straight on.
    dram_out : ``Out(stream.Signature(StructLayout({"addr": addr_width, "value": signed(grad_width + 2)})))``
        Writes to DRAM; each adds ``value`` to the gradient at ``addr``. With ``whole_line``
        the value is ``signed(grad_width)``.
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
    small_threshold : ``In(grad_width)``
        Dual threshold: a small gradient with ``|grad| < small_threshold`` that misses in L1 is
        not allocated. 0: off.
    stochastic : ``In(1)``
        Dual-threshold mode: 0 drop, 1 stochastic rounding.
    lfsr_seed : ``In(32)``, lfsr_load : ``In(1)``
        Load the stochastic mode's LFSR with ``lfsr_seed`` (0 loads 1) in a cycle with
        ``lfsr_load`` high while ``idle``.
    ema_enable : ``In(1)``
        The threshold in force follows the EMA instead of ``threshold``.
    ema_per_step : ``In(1)``
        The EMA's threshold moves only at flush barriers.
    ema_shift : ``In(3)``, ema_scale : ``In(8)``, ema_min, ema_max : ``In(grad_width)``
        ``k`` (alpha = 2**-k), scale (4 fraction bits) and clamp bounds of the EMA threshold.
    bypass : ``In(window_signature(addr_width)).array(bypass_windows)``
        The bypass windows (:func:`~design.params.window_signature`; none if
        ``bypass_windows`` is 0): ``bypass[i]`` holds ``base <= addr <= limit`` if ``enable``
        (ports ``bypass__<i>__base``, ``bypass__<i>__limit``, ``bypass__<i>__enable``).
    current_threshold : ``Out(grad_width)``
        The threshold that was in force :attr:`CURRENT_THRESHOLD_DELAY` (3) cycles before (a
        register; the EMA threshold's multiply and clamp take a cycle each): the one a gradient
        accepted then was judged against (outside bypass windows).
    ema_average : ``Out(grad_width + 8)``
        The EMA of ``|grad|`` (8 fraction bits).
    stochastic_write : ``Out(1)``
        Strobe: a write of ``Cause.STOCHASTIC`` entered the L2 buffer.
    discard : ``Out(1)``
        Strobe: a tiny miss was accounted (dropped, or rounded stochastically) ...
    discard_addr : ``Out(addr_width)``, discard_error : ``Out(signed(grad_width + 1))``
        ... at this address, with this ``grad - written``.
    discard_count : ``Out(32)``, discard_sum : ``Out(signed(grad_width + 33))``
        Running count and sum of the accounted discards of the step; they hold through and
        after a completed flush barrier, and the first gradient accepted after it clears them.
    bypassed : ``Out(1)``
        Strobe (a register): a gradient in an enabled bypass window was accepted in the cycle
        before.
    """

    #: Cycles from a threshold being in force to ``current_threshold`` showing it.
    CURRENT_THRESHOLD_DELAY = 3

    def __init__(self, config=None, /, **params):
        with checked(self):
            self.config = config = Config.of(config, **params)
        # Each component takes the parameters it reads, and checks them itself: it is proven
        # alone on parameters that need not make a whole configuration (L2 on lines of 4 with
        # 3-bit addresses, say).
        widths = dict(addr_width=config.addr_width, grad_width=config.grad_width)
        geometry = dict(widths, sets=config.sets, ways=config.ways,
                        max_updates=config.max_updates)
        lanes = config.lanes
        self.streamer  = Streamer(**widths, lanes=lanes)
        # L1 decides by the seed's policy (one lane), the line policy (lines) or, with
        # whole_line, by the whole-line rule.
        self.l1        = (L1Accumulator(**geometry, whole_line=config.whole_line) if lanes == 1
                          else LineAccumulator(lanes=lanes, whole_line=config.whole_line,
                                               **geometry))
        # L2 stores L1's writes at their width (under the whole-line rule grad_width, one
        # lane or lines; else grad_width + 2).
        value_width = line_value_width(config.grad_width, config.whole_line)
        self.writeback = WritebackBuffer(**widths, depth=config.fifo_depth,
                                         burst_size=config.burst_size, lanes=lanes,
                                         value_width=value_width)
        self.lfsr      = Lfsr()
        self.ema       = EmaThreshold(grad_width=config.grad_width, lanes=lanes)
        self.discards  = DiscardTotals(grad_width=config.grad_width, lanes=lanes)
        self.addr_width, self.grad_width = config.addr_width, config.grad_width
        self.sets, self.ways, self.max_updates = config.sets, config.ways, config.max_updates
        self.fifo_depth, self.burst_size = config.fifo_depth, config.burst_size
        self.lanes, self.bypass_windows = config.lanes, config.bypass_windows
        self.whole_line = config.whole_line
        super().__init__(signature(config))

    def elaborate(self, platform):
        m = Module()
        m.submodules.streamer  = self.streamer
        m.submodules.l1        = self.l1
        m.submodules.writeback = self.writeback
        m.submodules.lfsr      = self.lfsr
        m.submodules.ema       = self.ema
        m.submodules.discards  = self.discards

        wiring.connect(m, wiring.flipped(self.grad_in), self.streamer.grad_in)
        wiring.connect(m, self.streamer.grad_out, self.l1.grad_in)
        wiring.connect(m, self.writeback.dram_out, wiring.flipped(self.dram_out))
        accept = Signal()
        m.d.comb += accept.eq(self.grad_in.valid & self.grad_in.ready)

        self._modes(m, accept)
        self._streamer_l1_l2(m)
        self._events(m)
        self._dual_threshold(m, accept)
        self._counters(m)
        return m

    # -- the stages of elaborate() ---------------------------------------------------------------

    def _modes(self, m, accept):
        """The run-time modes: the bypass windows, the threshold in force, the EMA's samples and
        settings, the streamer's mode inputs, the random bits."""
        ema, lfsr = self.ema, self.lfsr
        in_window = Signal(self.lanes)
        # The modes' outputs are registers: no input reaches an output combinationally.
        if self.lanes == 1:
            m.d.sync += self.bypassed.eq(accept & in_window)  # mutation site: bypassed-strobe
        else:
            m.d.sync += self.bypassed.eq(Mux(accept, in_window & self.grad_in.p.mask, 0))
        self._current_threshold(m)
        m.d.comb += in_window.eq(Cat(self._in_window(addr) for addr in self._lane_addresses()))
        m.d.comb += [
            *self._ema_sample(ema, accept, in_window),
            ema.shift.eq(self.ema_shift),
            ema.scale.eq(self.ema_scale),
            ema.minimum.eq(self.ema_min),
            ema.maximum.eq(self.ema_max),
            ema.per_step.eq(self.ema_per_step),
            ema.latch.eq(self.flush),      # no gradient is accepted while flush is high
            self.ema_average.eq(ema.average),
            self.streamer.bypass.eq(in_window),
            self.streamer.small_threshold.eq(self.small_threshold),
            self.streamer.stochastic.eq(self.stochastic),
        ]
        connect_random(m, lfsr, self.l1)
        m.d.comb += [
            lfsr.seed.eq(self.lfsr_seed),
            # Only while idle: no decision is pending, so a write being offered never changes.
            lfsr.load.eq(self.lfsr_load & self.idle),  # mutation site: lfsr-load
        ]

    def _current_threshold(self, m):
        """``current_threshold``: the threshold in force, in three steps (register the EMA's
        value and the settings; multiply; clamp), so that no multiply and clamp share a cycle."""
        ema = self.ema
        shown_source = Signal.like(ema.source)
        shown_scale  = Signal.like(self.ema_scale)
        shown_enable = [Signal(name=f"shown_enable{i}") for i in range(2)]
        shown_bounds = [[Signal(self.grad_width, name=f"shown_{b}{i}") for b in ("min", "max")]
                        for i in range(2)]
        shown_threshold = [Signal(self.grad_width, name=f"shown_threshold{i}")
                           for i in range(2)]
        shown_candidate = Signal(self.grad_width + 4)
        m.d.sync += [
            shown_source.eq(ema.source), shown_scale.eq(self.ema_scale),
            shown_enable[0].eq(self.ema_enable), shown_threshold[0].eq(self.threshold),
            shown_bounds[0][0].eq(self.ema_min), shown_bounds[0][1].eq(self.ema_max),
            shown_candidate.eq(ema_candidate(shown_source, shown_scale,
                                             ema_fraction_bits(self.lanes))),
            shown_enable[1].eq(shown_enable[0]), shown_threshold[1].eq(shown_threshold[0]),
            shown_bounds[1][0].eq(shown_bounds[0][0]), shown_bounds[1][1].eq(shown_bounds[0][1]),
            self.current_threshold.eq(Mux(
                shown_enable[1],
                ema_clamp(m, shown_candidate, shown_bounds[1][0], shown_bounds[1][1],
                          "shown_ema_threshold"),
                shown_threshold[1])),
        ]

    def _streamer_l1_l2(self, m):
        """The streamer's threshold inputs; L1's writes into L2; the flush barrier and
        ``idle``."""
        streamer, l1, writeback = self.streamer, self.l1, self.writeback
        m.d.comb += [
            # The EMA threshold is computed in L1's pipeline, from the EMA's value now.
            streamer.threshold.eq(self.threshold),
            streamer.ema.eq(self.ema_enable),
            streamer.ema_source.eq(self.ema.source),
            streamer.ema_scale.eq(self.ema_scale),
            streamer.ema_min.eq(self.ema_min),
            streamer.ema_max.eq(self.ema_max),
            # L1 -> L2: the cause only feeds the event strobes.
            writeback.push.valid.eq(l1.push.valid),
            writeback.push.p.addr.eq(l1.push.p.addr),
            *self._l1_to_l2(l1, writeback),
            l1.push.ready.eq(writeback.push.ready),
            l1.flush.eq(self.flush),
            writeback.flush.eq(self.flush),
            self.idle.eq(l1.idle & ~writeback.holding),  # mutation site: idle
        ]

    def _events(self, m):
        """The event strobes (a write of each cause into L2, L1's hits and misses) and the
        levels."""
        l1, writeback = self.l1, self.writeback
        pushed = Signal()
        m.d.comb += pushed.eq(l1.push.valid & l1.push.ready)
        for strobe, cause in [(self.direct_write,      Cause.DIRECT),
                              (self.accum_write,       Cause.ACCUM_THRESHOLD),
                              (self.max_updates_write, Cause.MAX_UPDATES),
                              # mutation site: cause-strobes
                              (self.evict_write,       Cause.EVICTION),
                              (self.flush_write,       Cause.FLUSH),
                              (self.stochastic_write,  Cause.STOCHASTIC)]:
            m.d.comb += strobe.eq(pushed & self._has_cause(l1.push.p, cause))
        m.d.comb += [
            self.l1_hit.eq(l1.hit),
            self.l1_miss.eq(l1.miss),
            self.l1_valid_count.eq(l1.valid_count),
            self.l2_level.eq(writeback.level),
            self.burst_active.eq(writeback.burst_active),
        ]

    def _dual_threshold(self, m, accept):
        """The dual threshold's accounting of tiny misses: L1 registers them (a cycle after its
        decision), so that the running sum of the step's totals starts from a register."""
        l1, discards = self.l1, self.discards
        m.d.comb += [
            self.discard.eq(l1.discard),
            self.discard_addr.eq(l1.discard_addr),
            self.discard_error.eq(l1.discard_error),
        ]
        # The step's totals (held through and after a completed barrier).
        m.d.comb += [
            discards.discard.eq(self.discard),
            discards.error.eq(self.discard_error),
            discards.accept.eq(accept),
            discards.barrier.eq(self.flush & self.idle),
            self.discard_count.eq(discards.count),
            self.discard_sum.eq(discards.sum),
        ]

    def _counters(self, m):
        """The running counts of gradients accepted and of DRAM writes."""
        m.d.sync += [
            # mutation site: accepted-count
            self.accepted_count.eq(self.accepted_count +
                                   self._gradients(self.grad_in.valid & self.grad_in.ready)),
            self.dram_write_count.eq(self.dram_write_count +
                                     (self.dram_out.valid & self.dram_out.ready)),
        ]

    # -- what depends on the number of lanes ----------------------------------------------------

    def _lane_addresses(self):
        """The address of each lane of the beat on ``grad_in`` (lane ``i`` at the line's
        ``+ i``)."""
        if self.lanes == 1:
            return [self.grad_in.p.addr]
        line = self.streamer.grad_out.p.addr        # the low log2(lanes) bits cleared
        bits = log2(self.lanes)
        return [Cat(Const(i, bits), line[bits:]) for i in range(self.lanes)]   # line + i

    def _in_window(self, addr):
        """``addr`` lies in an enabled bypass window."""
        return Cat(
            window.enable &  # mutation site: bypass-window-enable
            at_most(window.base, addr) &
            # mutation site: bypass-window-limit
            at_most(addr, window.limit)
            for window in (self.bypass if self.bypass_windows else ())).any()

    def _ema_sample(self, ema, accept, in_window):
        """The EMA's sample: a gradient accepted outside the windows; on lines, the beat's
        masked lanes outside them and the lanes' ``|g|``."""
        if self.lanes == 1:
            return [ema.sample.eq(accept & ~in_window),  # mutation site: ema-sample
                    ema.magnitude.eq(abs(self.grad_in.p.grad))]
        # mutation site: line-ema-sample
        return [ema.sampled.eq(Mux(accept, self.grad_in.p.mask & ~in_window, 0)),
                *[ema.magnitudes[i].eq(abs(self.grad_in.p.grads[i]))
                  for i in range(self.lanes)]]

    def _l1_to_l2(self, l1, writeback):
        """A write's values (and mask) from L1 to L2: the cause stays behind."""
        if self.lanes == 1:
            return [writeback.push.p.value.eq(l1.push.p.value)]  # mutation site: l1-to-l2-value
        return [writeback.push.p.values.eq(l1.push.p.values),
                writeback.push.p.mask.eq(l1.push.p.mask)]

    def _has_cause(self, write, cause):
        """``write`` writes a value of ``cause`` (on lines: some lane of it)."""
        if self.lanes == 1:
            return write.cause == cause
        return Cat(write.mask[i] & (write.causes[i] == cause) for i in range(self.lanes)).any()

    def _gradients(self, accepted):
        """Gradients accepted in a cycle: one, or a beat's masked lanes."""
        if self.lanes == 1:
            return accepted
        return Mux(accepted, tree_sum(self.grad_in.p.mask[i] for i in range(self.lanes)), 0)
