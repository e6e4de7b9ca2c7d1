"""The run-time modes' own state: the stochastic mode's LFSR and the dynamic (EMA) threshold.

The three modes, all off when their inputs are 0 (:data:`design.params.MODES_OFF`):

* **Dual threshold** (``small_threshold``, 0 disables it). A small gradient (not direct) with
  ``|grad| < small_threshold`` that *misses* in L1 is not allocated (a hit still accumulates).
  With ``stochastic = 0`` (mode *drop*) it is discarded; with ``stochastic = 1`` it is written as
  ``sign(grad) * small_threshold`` (``Cause.STOCHASTIC``) with probability about
  ``|grad| / small_threshold``, else nothing. Either way ``grad - written`` is *accounted*: a
  ``discard`` strobe with ``discard_addr`` / ``discard_error``, and the step's running
  ``discard_count`` / ``discard_sum`` (held after a completed flush barrier, cleared by the next
  accepted gradient). So after a
  flush, per address: accepted = written + accounted.

  The random bits: ``R = min(grad_width, 32)`` low bits ``u`` of a 32-bit Galois LFSR
  (:data:`~design.params.LFSR_TAPS`, shifting right), stepped once per stochastic decision
  (in the cycle the decision commits). The write happens iff ``u * small_threshold <
  |grad| * 2**R``. The LFSR is loaded with ``lfsr_seed`` (0 loads 1) in a cycle with
  ``lfsr_load`` high while the compressor is ``idle`` (so never under a pending decision).
  Successive ``u`` share bits (one shift per decision): each decision is unbiased on average
  over the LFSR's period, but neighbouring decisions are correlated.

* **Dynamic threshold** (``ema_enable``). The threshold in force is
  ``clamp((EMA * ema_scale) >> (8 + 4), ema_min, ema_max)``: ``ema_max`` if the
  candidate is above it, else ``ema_min`` if below that (so with crossed bounds, ``ema_min >
  ema_max``, ``ema_max`` only for a candidate above it, else ``ema_min``), where EMA is
  ``|grad|`` with 8 fraction bits and ``ema_scale`` has 4.
  The EMA is updated by every accepted gradient outside the bypass windows (whether or not
  ``ema_enable`` is set, so it is warm when enabled), in shift-and-add arithmetic:
  ``ema += ((|grad| << 8) - ema) >> ema_shift`` (an arithmetic shift: floor), so
  ``0 <= ema <= 2**(grad_width-1) << 8``. A gradient is judged against the threshold of the EMA
  *before* its own update. With ``ema_per_step`` the threshold follows the EMA's value latched
  while ``flush`` was last high (no gradient is accepted then: the value at the last flush
  barrier), so it is constant during a step. ``current_threshold`` shows the
  threshold in force (``threshold`` when the mode is off) three cycles later, as a register
  (``GradientCompressor.CURRENT_THRESHOLD_DELAY``).

* **Bypass windows** (``bypass[i].base``, ``bypass[i].limit``, ``bypass[i].enable``, ports
  ``bypass__<i>__base``, ...; ``bypass_windows`` of them, a parameter, two by default). A
  gradient with ``base <= addr <= limit`` in an enabled window is judged against threshold 0,
  so it is written through as it is (``Cause.DIRECT``), exactly once, never accumulated and
  never dropped; ``bypassed`` strobes in the cycle after its acceptance.

All settings (and ``threshold``) apply to a gradient as they are in the cycle it is accepted.
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bits import tree_sum
from .compare import less, greater
from .layouts import discard_error_width, discard_sum_width
from .params import (DEFAULTS, DISCARD_COUNT_WIDTH, LFSR_WIDTH, LFSR_TAPS, LFSR_RESET,
                     EMA_FRACTION_BITS, EMA_LINE_LAG,
                     EMA_SHIFT_WIDTH, EMA_SCALE_WIDTH, EMA_SCALE_FRACTION_BITS, checked,
                     check_int, check_lanes, ema_fraction_bits, log2)

__all__ = ["Lfsr", "EmaThreshold", "DiscardTotals", "ema_candidate", "ema_clamp", "ema_update",
           "signed_level"]


def signed_level(grad, level):
    """What the stochastic mode writes for a tiny gradient it rounds up: ``level`` with the
    sign of ``grad`` (``+level`` for 0)."""
    return Mux(grad[-1], -level, level)


def ema_candidate(source, scale, fraction_bits=EMA_FRACTION_BITS):
    """The EMA threshold before its clamp: ``(source * scale) >> (8 + 4)`` (``source`` with
    ``fraction_bits`` fraction bits: ``8 + log2(lanes)`` on lines). A multiply: the pipeline
    gives it a stage of its own."""
    return (source * scale) >> (fraction_bits + EMA_SCALE_FRACTION_BITS)


def ema_clamp(m, candidate, minimum, maximum, name, values=None):
    """The EMA threshold: ``candidate`` clamped to ``[minimum, maximum]``: ``maximum`` if the
    candidate is above it, else ``minimum`` if below (with crossed bounds, ``maximum`` only for
    a candidate above it, else ``minimum``), as a signal named ``name`` (of ``len(minimum)``
    bits).

    ``values``, if given, is what to pick in each case instead, ``(above, below, within)``,
    three signals of one shape: quantities computed from each possible threshold side by side,
    so that the clamp's compares only pick one (the signal has their shape).
    """
    above, below, within = values or (maximum, minimum, candidate)
    threshold = Signal(values[0].shape() if values else len(minimum), name=name)
    with m.If(greater(candidate, maximum)):  # mutation site: ema-clamp
        m.d.comb += threshold.eq(above)
    with m.Elif(less(candidate, minimum)):
        m.d.comb += threshold.eq(below)
    with m.Else():
        m.d.comb += threshold.eq(within)
    return threshold


def ema_update(average, magnitude, shift):
    """The EMA after a sample: ``average + (((magnitude << 8) - average) >> shift)`` (an
    arithmetic shift), for ``0 <= shift <= 8``, as ``average`` bits wide.

    Made as ``average - ceil(average / 2**shift) + (magnitude << (8 - shift))``, which is the
    same value (``magnitude << 8`` is a multiple of ``2**shift``), with the three terms added
    in one carry chain (a carry-save step in front): the loop ``average -> average`` then
    holds one shift and one adder rather than two adders around the shift.
    ``tests/test_modes.py`` proves the two forms equal with Yosys' SAT solver.
    """
    width = len(average)
    shifted = average >> shift
    # average mod 2**shift != 0 (a bit below the shift is set): ceil(average / 2**shift) =
    # shifted + rounded_up.
    below = ~(Const(2 ** width - 1, width) << shift)[:width]
    rounded_up = (average & below).any()
    added = (magnitude << EMA_FRACTION_BITS) >> shift          # exact: no bit is lost
    # average + ~shifted + added + ~rounded_up = average - shifted - rounded_up + added
    # (mod 2**width)
    return add_three(average, (~shifted)[:width], added[:width],
                     ~rounded_up)  # mutation site: ema-share-rounding


def add_three(x, y, z, carry_in):
    """``(x + y + z + carry_in) mod 2**len(x)`` in one carry chain: the three operands reduced
    to two by a carry-save step, whose carries' lowest bit (always 0) takes ``carry_in`` (one
    bit)."""
    width = len(x)
    partial = Cat(x[i] ^ y[i] ^ z[i] for i in range(width))
    carries = Cat(carry_in, *((x[i] & y[i]) | (x[i] & z[i]) | (y[i] & z[i])
                              for i in range(width - 1)))
    return (partial + carries)[:width]


def _lfsr_step(state):
    """The LFSR's next state (of an int, or of a value)."""
    if isinstance(state, int):
        return (state >> 1) ^ (LFSR_TAPS if state & 1 else 0)
    return (state >> 1) ^ Mux(state[0], LFSR_TAPS, 0)  # mutation site: lfsr-feedback


class Lfsr(wiring.Component):
    """The stochastic mode's random bits: a Galois LFSR, one step per decision.

    ``next = (state >> 1) ^ (LFSR_TAPS if state[0] else 0)``; reset state ``LFSR_RESET``.

    Members
    -------
    seed : ``In(LFSR_WIDTH)``
        Value to load (0 loads ``LFSR_RESET``: the all-zero state would never move).
    load : ``In(1)``
        Load ``seed`` this cycle (it wins over ``step``).
    step : ``In(1)``
        Take one step this cycle.
    state : ``Out(LFSR_WIDTH)``
        The current state (a register).
    next_state : ``Out(LFSR_WIDTH)``
        The state after one step (for a decision made a stage ahead of its step): a register
        too, kept a step ahead of ``state``, so that the multiply it feeds starts from a
        flip-flop.
    """

    def __init__(self):
        super().__init__({
            "seed":  In(LFSR_WIDTH),
            "load":  In(1),
            "step":  In(1),
            "state": Out(LFSR_WIDTH, init=LFSR_RESET),
            "next_state": Out(LFSR_WIDTH, init=_lfsr_step(LFSR_RESET)),
        })

    def elaborate(self, platform):
        m = Module()
        seeded = Mux(self.seed == 0, LFSR_RESET, self.seed)  # mutation site: lfsr-seed-0
        with m.If(self.load):
            m.d.sync += [self.state.eq(seeded), self.next_state.eq(_lfsr_step(seeded))]
        with m.Elif(self.step):
            m.d.sync += [self.state.eq(self.next_state),
                         self.next_state.eq(_lfsr_step(self.next_state))]
        return m


class EmaThreshold(wiring.Component):
    """The dynamic threshold: an EMA of ``|grad|`` in shift-and-add arithmetic, scaled and
    clamped (see the module's description for the exact arithmetic).

    On lines (``lanes > 1``) a beat updates the EMA once, by its ``k`` sampled lanes outside
    the bypass windows, each weighing ``1 / lanes`` of a gradient, with
    ``F = 8 + log2(lanes)`` fraction bits (docs/lanes.md)::

        ema += ((magnitude << F) - k * ema) >> (shift + log2(lanes))

    Parameters
    ----------
    grad_width : int
        Gradient width (the threshold and the bounds are unsigned ``grad_width`` bits).
    lanes : int
        Gradients per beat (1: one gradient per sample).

    Members
    -------
    sample : ``In(1)``
        Update the EMA with ``magnitude`` this cycle (a gradient accepted outside the bypass
        windows) ...
    magnitude : ``In(grad_width)``
        ... ``|grad|`` of that gradient.
    sampled : ``In(lanes)``
        On lines (instead of ``sample`` and ``magnitude``): the lanes of a beat accepted this
        cycle that update the EMA (masked, outside the bypass windows; ``k`` of them) ...
    magnitudes : ``In(ArrayLayout(grad_width, lanes))``
        ... and each lane's ``|grad|``. The update reaches ``average`` two cycles later
        (:meth:`_beat_pipeline`).
    shift : ``In(EMA_SHIFT_WIDTH)``
        ``k``: alpha = ``2**-k``.
    scale : ``In(EMA_SCALE_WIDTH)``
        Unsigned, ``EMA_SCALE_FRACTION_BITS`` fraction bits.
    minimum, maximum : ``In(grad_width)``
        Clamp bounds: ``maximum`` if the candidate is above it, else ``minimum`` if below.
    per_step : ``In(1)``
        The threshold follows ``latched_average``, not ``average``.
    latch : ``In(1)``
        A flush barrier: ``latched_average`` takes ``average``.
    threshold : ``Out(grad_width)``
        The EMA's threshold now (combinational: a multiply and a clamp).
    source : ``Out(grad_width + EMA_FRACTION_BITS)``
        The EMA value the threshold follows now (``average`` or ``latched_average``; on lines,
        instead of ``average``, the EMA before the last :data:`~design.params.EMA_LINE_LAG`
        beats' updates): the pipelined uses compute the threshold from it in later cycles.
    average : ``Out(grad_width + EMA_FRACTION_BITS)``
        The EMA of every sample before this cycle (``EMA_FRACTION_BITS`` fraction bits; on
        lines, of every beat before the last two cycles'): a register and the last sample's
        update, made from registers.
    latched_average : ``Out(grad_width + EMA_FRACTION_BITS)``
        Its value at the last flush barrier (a register).
    """

    def __init__(self, *, grad_width=DEFAULTS["grad_width"], lanes=1):
        with checked(self):
            self.grad_width = check_int("grad_width", grad_width, minimum=2)
            self.lanes      = check_lanes(lanes)
        self.fraction_bits = ema_fraction_bits(lanes)
        # |grad| <= 2**(grad_width - 1), so the EMA is at most 2**(grad_width - 1 + F).
        average_width = grad_width + self.fraction_bits
        if lanes == 1:
            samples = {"sample": In(1), "magnitude": In(grad_width)}
        else:
            samples = {"sampled": In(lanes),
                       "magnitudes": In(data.ArrayLayout(unsigned(grad_width), lanes))}
        super().__init__({
            **samples,
            "shift":           In(EMA_SHIFT_WIDTH),
            "scale":           In(EMA_SCALE_WIDTH),
            "minimum":         In(grad_width),
            "maximum":         In(grad_width),
            "per_step":        In(1),
            "latch":           In(1),
            "threshold":       Out(grad_width),
            "source":          Out(average_width),
            "average":         Out(average_width),
            "latched_average": Out(average_width),
        })
        if lanes > 1:
            # The averages before the last update applied and before the one before it (made
            # here, not in elaborate, so that the proofs on lines can name them: their
            # induction needs them).
            self.recent_averages = [Signal(average_width, name=f"recent_average{i}")
                                    for i in range(2)]

    def elaborate(self, platform):
        m = Module()
        if self.lanes == 1:
            with m.If(self.sample):
                m.d.sync += self.average.eq(ema_update(self.average, self.magnitude, self.shift))
            judged = self.average
        else:
            judged = self._beat_pipeline(m)
        with m.If(self.latch):
            m.d.sync += self.latched_average.eq(self.average)

        m.d.comb += self.source.eq(Mux(self.per_step, self.latched_average, judged))
        candidate = Signal(len(self.average) + EMA_SCALE_WIDTH - self.fraction_bits -
                           EMA_SCALE_FRACTION_BITS)
        m.d.comb += candidate.eq(ema_candidate(self.source, self.scale, self.fraction_bits))
        m.d.comb += self.threshold.eq(ema_clamp(m, candidate, self.minimum, self.maximum,
                                                "clamped"))
        return m


    def _beat_pipeline(self, m):
        """Lines: a beat's update in three cycles, the EMA's loop holding only the last; returns
        the EMA a beat is judged by (before the last ``EMA_LINE_LAG`` updates).

        1. ``beat_*``: the lanes sampled and their ``|g|`` (0 if not sampled), and the shift;
        2. ``update_*``: their sum ``magnitude`` and number ``samples`` (``k``), the shift;
        3. ``average`` takes the update (:meth:`_beat_update`), ``recent`` the averages before.

        A beat in stage 1 or 2 has not updated ``average`` yet, so the EMA before the last two
        updates is ``average`` with two of them in flight, the one before the last update
        (``recent[0]``) with one, and the one before that (``recent[1]``) with none."""
        assert EMA_LINE_LAG == 2, "the lag is the pipeline's two stages"
        N, gw = self.lanes, self.grad_width
        beat_sampled = Signal(N)
        beat_magnitudes = Signal(data.ArrayLayout(unsigned(gw), N))
        beat_shift = Signal.like(self.shift, name="beat_shift")
        update_valid = Signal()
        update_magnitude = Signal(gw + log2(N))
        update_samples = Signal(range(N + 1))
        update_shift = Signal.like(self.shift, name="update_shift")
        recent = self.recent_averages
        m.d.sync += [
            beat_sampled.eq(self.sampled),
            *[beat_magnitudes[i].eq(Mux(self.sampled[i], self.magnitudes[i], 0))
              for i in range(N)],
            beat_shift.eq(self.shift),
            update_valid.eq(beat_sampled.any()),
            update_magnitude.eq(tree_sum(beat_magnitudes[i] for i in range(N))),
            update_samples.eq(tree_sum(beat_sampled[i] for i in range(N))),
            update_shift.eq(beat_shift),
        ]
        with m.If(update_valid):
            m.d.sync += [
                self.average.eq(self._beat_update(m, update_magnitude, update_samples,
                                                  update_shift)),
                recent[0].eq(self.average),
                recent[1].eq(recent[0]),
            ]
        judged = Signal.like(self.average, name="judged_average")
        with m.If(beat_sampled.any() & update_valid):
            m.d.comb += judged.eq(self.average)
        with m.Elif(beat_sampled.any() | update_valid):  # mutation site: line-ema-lag
            m.d.comb += judged.eq(recent[0])
        with m.Else():
            m.d.comb += judged.eq(recent[1])
        return judged

    def _beat_update(self, m, magnitude, samples, shift):
        """The EMA after a beat (lines): ``ema + (((magnitude << F) - k * ema) >> (shift +
        log2(lanes)))``, the shift arithmetic (floor), as the line model makes it.

        Made as ``ema - ceil(k * ema / 2**(shift + log2(lanes))) + ((magnitude << 8) >>
        shift)``, the same value (``magnitude << F`` is a multiple of ``2**(shift +
        log2(lanes))``), ``k * ema`` from shifted copies of ``ema`` (``k <= lanes``, no
        multiplier), and the three terms added in one carry chain behind a carry-save step,
        as :func:`ema_update` does with one lane."""
        average, lane_bits = self.average, log2(self.lanes)
        width = len(average)
        product = Signal(width + lane_bits, name="ema_beat_product")      # k * ema
        m.d.comb += product.eq(Mux(samples[lane_bits], average << lane_bits,
                                   sum(Mux(samples[j], average << j, 0)
                                       for j in range(lane_bits))))
        # ceil(product / 2**(shift + lane_bits)) = shifted + rounded_up
        shifted = (product >> lane_bits) >> shift
        below = ~(Const(2 ** width - 1, width) << shift)[:width]
        rounded_up = product[:lane_bits].any() | ((product >> lane_bits) & below).any()
        added = (magnitude << EMA_FRACTION_BITS) >> shift          # exact: no bit is lost
        return add_three(average, (~shifted)[:width], added[:width], ~rounded_up)


class DiscardTotals(wiring.Component):
    """The dual threshold's step totals: the number of accounted discards and the sum of their
    errors since the first gradient accepted after the last completed flush barrier. They
    hold through the barrier and after it, so that they can be read then; that first
    gradient clears them (its own decision comes later).

    Parameters
    ----------
    grad_width : int
        Gradient width (``error`` is ``grad_width + 1`` bits, ``sum`` ``grad_width + 33``).
    lanes : int
        Discards that may be accounted in one cycle (a beat's lanes).

    Members
    -------
    discard : ``In(lanes)``
        Strobes: a discard is accounted this cycle (per lane) ...
    error : ``In(signed(grad_width + 1))`` (on lines, one per lane)
        ... with this ``grad - written``.
    accept : ``In(1)``
        A gradient is accepted this cycle.
    barrier : ``In(1)``
        The flush barrier is complete this cycle (``flush`` and ``idle``).
    count : ``Out(32)``, sum : ``Out(signed(grad_width + 33))``
        The step's totals (registers).
    barrier_done : ``Out(1)``
        A barrier has completed and no gradient was accepted since (a register).
    """

    def __init__(self, *, grad_width=DEFAULTS["grad_width"], lanes=1):
        with checked(self):
            self.grad_width = check_int("grad_width", grad_width, minimum=2)
            self.lanes      = check_lanes(lanes)
        error = signed(discard_error_width(grad_width))
        super().__init__({
            "discard":      In(lanes),
            "error":        In(error if lanes == 1 else data.ArrayLayout(error, lanes)),
            "accept":       In(1),
            "barrier":      In(1),
            "count":        Out(DISCARD_COUNT_WIDTH),
            "sum":          Out(signed(discard_sum_width(grad_width))),
            "barrier_done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        clear = Signal()
        m.d.comb += clear.eq(self.barrier_done & self.accept)
        with m.If(self.barrier):
            m.d.sync += self.barrier_done.eq(1)
        with m.Elif(clear):
            m.d.sync += self.barrier_done.eq(0)
        if self.lanes == 1:
            counted, errors = self.discard, Mux(self.discard, self.error, 0)
        else:
            counted = tree_sum(self.discard[i] for i in range(self.lanes))
            errors = tree_sum(Mux(self.discard[i], self.error[i], 0) for i in range(self.lanes))
        m.d.sync += [
            self.count.eq(Mux(clear, 0, self.count) + counted),  # mutation site: discard-count
            self.sum.eq(Mux(clear, 0, self.sum) + errors),
        ]
        return m
