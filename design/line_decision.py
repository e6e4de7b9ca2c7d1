"""The whole-line rule's decision on one line: what one beat does to the line's L1 entry.

:class:`LineDecision` is combinational: from a beat (its lanes' gradients, mask, and which
lanes are direct, tiny or rounded up) and the entry its line hits (or none), it decides
whether the beat *writes its line*, what that one line write carries, the entry the line
leaves (kept, freed, or allocated on a miss) and which lanes the dual threshold accounts
for. It is the policy of :class:`model.LineModel` with ``whole_line=True`` (model/lines.py
states it in words), for one beat, as a component of its own: an L1 pipeline composes it
with the row's read, the hit, the victim and the output queue, as both L1s built with
``whole_line`` do, on the hit entry picked a stage ahead: the line L1
(:class:`~design.line_accumulator.LineAccumulator`) and the one-lane L1
(:class:`~design.l1.L1Accumulator`, ``lanes=1``).

The rule, per beat (lanes outside the mask take no part):

* **Hit.** Each lane of the beat adds its gradient to its held sum (0 where it holds none).
  The line is written if a lane is direct, a small lane's new sum crosses its threshold or
  would leave ``grad_width`` bits, or the line reaches ``max_updates`` updates. The write
  carries every held lane and every lane of the beat, each with its new sum; a lane whose
  new sum would not fit writes its held sum and keeps its gradient (small) or writes its
  gradient and keeps its held sum (direct). The entry then holds what was kept, as updated
  once, or is freed. A line not written takes the small lanes' new sums and one update.
* **Miss.** The line is written with every lane of the beat as it came if a lane is direct
  or (``max_updates == 1``) a small lane is not tiny; else, if a tiny lane is rounded up,
  with the rounded lanes (``sign(g) * level``) and the small lanes that are not tiny; else
  the small lanes that are not tiny allocate the line, as updated once. The tiny lanes of a
  line not written as it came are accounted (dropped, or rounded).

A beat with an empty mask decides nothing.
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .compare import at_least, at_most
from .layouts import Cause
from .modes import signed_level
from .params import check_int, check_lanes

__all__ = ["LineDecision", "line_entry_layout"]


def line_entry_layout(lanes, grad_width, count_width):
    """A line's L1 entry as the decision sees it: a sum per lane (``grad_width`` bits: every
    value the whole-line rule holds fits the gradients' own format), the lanes holding a sum,
    and the updates the line has taken."""
    return data.StructLayout({
        "sums":  data.ArrayLayout(signed(grad_width), lanes),
        "held":  unsigned(lanes),
        "count": unsigned(count_width),
    })


class LineDecision(wiring.Component):
    """The whole-line rule's decision on one beat and its line's entry (combinational).

    Parameters
    ----------
    lanes : int
        Gradients per line (:data:`~design.params.LANES`).
    grad_width : int
        Width of a gradient, of a held sum and of a written value.
    max_updates : int
        Updates after which a line is written.

    Attributes
    ----------
    grads : In(ArrayLayout(signed(grad_width), lanes))
        The beat's gradients.
    mask : In(lanes)
        The lanes the beat carries.
    direct : In(lanes)
        Lanes with ``|g| >= `` their threshold (0 in a bypass window): written as they come.
    tiny : In(lanes)
        Lanes with ``|g| < small_threshold`` (the dual threshold; 0 when it is off).
    rounded : In(lanes)
        Tiny lanes the stochastic mode rounds up on this beat's draw (0 outside it).
    high, low : In(ArrayLayout(signed(grad_width + 2), lanes))
        Per lane, ``t - g`` and ``-t - g`` for the threshold ``t`` a small lane's sum crosses:
        it crosses when its held sum is at least ``high`` or at most ``low`` (``|sum + g| >=
        t``). They depend on the beat alone, so a pipeline makes them a stage ahead and the
        test on the entry is one compare.
    fit_high, fit_low : In(ArrayLayout(signed(grad_width + 1), lanes))
        Per lane, ``2**(grad_width-1) - 1 - g`` and ``-2**(grad_width-1) - g``: a held sum
        between them (both included) plus ``g`` fits ``grad_width`` bits. Made a stage ahead
        too, so that whether a line is written waits for compares of the held sums alone.
    level : In(grad_width - 1)
        The stochastic mode's rounding level, ``min(small_threshold, 2**(grad_width-1) - 1)``.
    hit : In(1)
        The line holds an entry: ``entry``.
    entry : In(line_entry_layout)
        The line's entry (when ``hit``): it holds a lane, and a lane it does not hold sums 0.
    written : Out(1)
        The beat writes its line: one line write of ``values`` under ``write_mask`` (0 when
        not written).
    values : Out(ArrayLayout(signed(grad_width), lanes))
    causes : Out(ArrayLayout(Cause, lanes))
        Each lane's value and cause, meant where ``write_mask`` is set (made whether or not the
        line is written, so that they need not wait for the decision).
    write_mask : Out(lanes)
    after : Out(line_entry_layout)
        The line's entry after the beat, when ``keeps``.
    keeps : Out(1)
        The line holds an entry after the beat (kept on a hit, allocated on a miss).
    allocates : Out(1)
        A miss that allocates the line (the pipeline picks the way, and writes a victim).
    accounted : Out(lanes)
        Tiny lanes the dual threshold accounts for: dropped, or written rounded.
    """

    def __init__(self, *, lanes, grad_width, max_updates):
        check_lanes(lanes)
        check_int("grad_width", grad_width, minimum=2)
        check_int("max_updates", max_updates, minimum=1)
        self.lanes, self.grad_width, self.max_updates = lanes, grad_width, max_updates
        #: Width of an entry's count: up to ``max_updates - 1`` updates are held.
        self.count_width = max(1, (max_updates - 1).bit_length())
        values = data.ArrayLayout(signed(grad_width), lanes)
        bounds = data.ArrayLayout(signed(grad_width + 2), lanes)
        fit_bounds = data.ArrayLayout(signed(grad_width + 1), lanes)
        entry = line_entry_layout(lanes, grad_width, self.count_width)
        super().__init__({
            "grads": In(values), "mask": In(lanes), "direct": In(lanes), "tiny": In(lanes),
            "rounded": In(lanes), "high": In(bounds), "low": In(bounds),
            "fit_high": In(fit_bounds), "fit_low": In(fit_bounds),
            "level": In(grad_width - 1),
            "hit": In(1), "entry": In(entry),
            "written": Out(1), "values": Out(values), "write_mask": Out(lanes),
            "causes": Out(data.ArrayLayout(Cause, lanes)),
            "after": Out(entry), "keeps": Out(1), "allocates": Out(1),
            "accounted": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()
        # Only the lanes of the mask take part.
        direct = Signal(self.lanes, name="direct_lanes")
        small = Signal(self.lanes, name="small_lanes")
        m.d.comb += [direct.eq(self.direct & self.mask), small.eq(self.mask & ~self.direct)]
        lanes = self._lanes(m, small)
        active = self.mask.any()
        with m.If(active & self.hit):
            self._hit(m, lanes, direct, small)
        with m.Elif(active):
            self._miss(m, direct, small)
        with m.Else():      # nothing to decide: the entry stays as it is
            m.d.comb += [self.after.eq(self.entry), self.keeps.eq(self.hit)]
        return m

    def _lanes(self, m, small):
        """Per lane: the held sum (0 where none), the new sum (held sum plus the gradient,
        one bit wider), whether it fits ``grad_width`` bits and whether a small lane crosses
        (both on the bounds: compares of the held sum, beside the add)."""
        gw = self.grad_width
        lanes = []
        for i in range(self.lanes):
            held = Signal(signed(gw), name=f"held_sum{i}")
            new = Signal(signed(gw + 1), name=f"new_sum{i}")
            fits, crosses = Signal(name=f"fits{i}"), Signal(name=f"crosses{i}")
            # mutation site: line-threshold-rule
            beyond = at_least(held, self.high[i]) | at_most(held, self.low[i])  # |new| >= t
            m.d.comb += [
                held.eq(self.entry.sums[i]),    # (0 where not held: a well-formed entry)
                new.eq(held + Mux(self.mask[i], self.grads[i], 0)),
                # mutation site: value-fits
                fits.eq(at_least(held, self.fit_low[i]) & at_most(held, self.fit_high[i])),
                # mutation site: lane-crosses
                crosses.eq(small[i] & (beyond | ~fits)),
            ]
            lanes.append((held, new, fits, crosses))
        return lanes

    def _hit(self, m, lanes, direct, small):
        gw = self.grad_width
        fills = self.entry.count >= self.max_updates - 1  # mutation site: line-max-updates-rule
        crossed = Cat(crosses for _, _, _, crosses in lanes)
        written = direct.any() | crossed.any() | fills
        # The lanes whose value would not fit: a written line leaves them held.
        unfit = Signal(self.lanes, name="unfit_lanes")
        m.d.comb += unfit.eq(self.mask & ~Cat(fits for _, _, fits, _ in lanes))
        # The values and causes a write would carry, made beside the decision: only the mask
        # and the entry after wait for it.
        for i, (held, new, fits, crosses) in enumerate(lanes):
            m.d.comb += [
                self.values[i].eq(Mux(~unfit[i], new[:gw], Mux(direct[i], self.grads[i], held))),
                self.causes[i].eq(Mux(direct[i], Cause.DIRECT,
                                  Mux(crosses, Cause.ACCUM_THRESHOLD,
                                  Mux(fills, Cause.MAX_UPDATES, Cause.LINE)))),
            ]
        lines = self.lanes > 1
        if not lines:
            # One lane: a written line that keeps its lane keeps it because its value would
            # not fit (its gradient, or a direct lane's held sum, as updated once); one that
            # keeps none is freed, and its sum and count are never read. So the sum and count
            # after wait for the fit alone, not for the crossing and the written bit: the
            # accumulate loop of the one-lane L1 is one compare long.
            held, new, fits, crosses = lanes[0]
            m.d.comb += [
                self.after.sums[0].eq(Mux(unfit[0], Mux(direct[0], held, self.grads[0]),
                                          new[:gw])),
                self.after.count.eq(Mux(unfit[0], 1, self.entry.count + 1)),
            ]
        with m.If(written):
            # mutation site: written-line-carries
            m.d.comb += [self.written.eq(1), self.write_mask.eq(self.entry.held | self.mask)]
            for i, (held, new, fits, crosses) in enumerate(lanes if lines else []):
                m.d.comb += self.after.sums[i].eq(Mux(unfit[i], Mux(direct[i], held,
                                                                    self.grads[i]), 0))
            m.d.comb += [self.after.held.eq(unfit),
                         *([self.after.count.eq(1)] if lines else []),
                         self.keeps.eq(unfit.any())]
        with m.Else():
            for i, (held, new, _, _) in enumerate(lanes if lines else []):
                m.d.comb += self.after.sums[i].eq(Mux(small[i], new[:gw], held))
            m.d.comb += [self.after.held.eq(self.entry.held | small),
                         *([self.after.count.eq(self.entry.count + 1)] if lines else []),
                         self.keeps.eq(1)]

    def _miss(self, m, direct, small):
        kept = small & ~self.tiny       # lanes a line not written would allocate
        rounded = self.rounded & self.tiny & small
        as_it_came = direct.any() | (kept.any() if self.max_updates == 1 else 0)
        for i in range(self.lanes):
            # mutation site: line-rounded-value
            rounded_value = signed_level(self.grads[i], self.level)
            m.d.comb += [
                self.values[i].eq(Mux(rounded[i] & ~as_it_came, rounded_value,
                                      self.grads[i])),
                self.causes[i].eq(Mux(direct[i], Cause.DIRECT,
                                  Mux(kept[i] & (self.max_updates == 1), Cause.MAX_UPDATES,
                                  Mux(rounded[i] & ~as_it_came, Cause.STOCHASTIC,
                                      Cause.LINE)))),
                self.after.sums[i].eq(Mux(kept[i], self.grads[i], 0)),
            ]
        with m.If(as_it_came):
            # mutation site: miss-written
            m.d.comb += [self.written.eq(1), self.write_mask.eq(self.mask)]
        with m.Elif(rounded.any()):
            m.d.comb += [self.written.eq(1), self.write_mask.eq(rounded | kept),
                         self.accounted.eq(small & self.tiny)]
        with m.Else():
            m.d.comb += self.accounted.eq(small & self.tiny)
            if self.max_updates > 1:
                m.d.comb += [self.allocates.eq(kept.any()), self.keeps.eq(kept.any())]
        m.d.comb += [self.after.held.eq(kept), self.after.count.eq(1)]
