"""The whole-line rule's decision (:class:`design.line_decision.LineDecision`), stated on its
ports and proven alone (:mod:`.component`), every input free: what makes the rule never
worse than dense write-through, lane by lane. (Which decision it takes is the line model's:
tests/test_line_decision.py checks that on random beats.)

``line_decision``:

* a beat writes its line or allocates it, never both, and allocates only on a miss;
* a written line carries every pending value: on a hit, each held lane and each lane of the
  beat; on a miss, each lane of the beat not accounted by the dual threshold;
* per lane, nothing is lost or made: the held sum plus the beat's gradient is what the line
  write carries plus what the entry keeps, but for the dual threshold's accounted lanes, which
  write 0 or ``sign(g) * level`` and keep nothing;
* a direct lane is always written, as ``DIRECT``; an entry kept holds a lane.

Every value is a ``grad_width``-bit port, so it fits the gradients' own format: the
conservation above, stated on wider sums, is what rules out a value that wrapped.
"""

from amaranth import *

from gradient_compressor.design.layouts import Cause, grad_range

__all__ = ["contract", "covers"]


def contract(m, P, d):
    N, gw = d.lanes, d.grad_width
    active = d.mask.any()
    P.require("line_decision", "an_entry_holds_a_lane",
              ~d.hit | d.entry.held.any())
    bottom, top = grad_range(gw)
    P.require("line_decision", "fit_bounds_are_the_range_less_the_gradient",
              Cat((d.fit_high[i] == top - d.grads[i]) & (d.fit_low[i] == bottom - d.grads[i])
                  for i in range(N)).all())
    P.require("line_decision", "a_lane_not_held_sums_0",
              ~d.hit | Cat(d.entry.held[i] | (d.entry.sums[i] == 0) for i in range(N)).all())
    P.require("line_decision", "rounded_only_if_tiny", (d.rounded & ~d.tiny) == 0)
    P.check("line_decision", "writes_or_allocates_never_both",
            ~(d.written & d.allocates) & ~(d.allocates & d.hit))
    P.check("line_decision", "an_entry_kept_holds_a_lane",
            ~d.keeps | d.after.held.any())
    P.check("line_decision", "a_miss_keeps_only_what_it_allocates",
            d.hit | (d.keeps == d.allocates))
    P.check("line_decision", "nothing_decided_without_a_lane",
            active | (~d.written & ~d.allocates & (d.accounted == 0) &
                      (d.keeps == d.hit) & (d.after.as_value() == d.entry.as_value())))
    P.check("line_decision", "a_written_hit_carries_every_pending_value",
            ~(d.written & d.hit) | (d.write_mask == (d.entry.held | d.mask)))
    P.check("line_decision", "a_written_miss_carries_every_lane_not_accounted",
            ~d.written | d.hit | ((d.write_mask | d.accounted) == d.mask))
    P.check("line_decision", "accounted_lanes_are_tiny_misses",
            ((d.accounted & ~(d.mask & d.tiny & ~d.direct)) == 0) &
            (~d.hit | (d.accounted == 0)))
    for i in range(N):
        _lane(m, P, d, i, gw)


def _lane(m, P, d, i, gw):
    """Lane ``i``: conservation, the accounted lanes' values, the direct lane's write."""
    wide = signed(gw + 2)
    before = Signal(wide, name=f"lane{i}_before")     # held sum and the beat's gradient
    out = Signal(wide, name=f"lane{i}_written")
    kept = Signal(wide, name=f"lane{i}_kept")
    in_write = d.written & d.write_mask[i]
    m.d.comb += [
        before.eq(Mux(d.hit & d.entry.held[i], d.entry.sums[i], 0) +
                  Mux(d.mask[i], d.grads[i], 0)),
        out.eq(Mux(in_write, d.values[i], 0)),
        kept.eq(Mux(d.keeps & d.after.held[i], d.after.sums[i], 0)),
    ]
    P.check("line_decision", f"lane{i}_conserves",
            d.accounted[i] | (before == out + kept))
    level = Cat(d.level, C(0, 1)).as_signed()
    P.check("line_decision", f"lane{i}_accounted_writes_0_or_the_level",
            ~d.accounted[i] | ((~d.keeps | ~d.after.held[i]) &
                               (~in_write | Mux(d.grads[i][-1], d.values[i] == -level,
                                                d.values[i] == level))))
    P.check("line_decision", f"lane{i}_direct_is_written",
            ~(d.mask[i] & d.direct[i]) |
            (d.written & d.write_mask[i] & (d.causes[i] == Cause.DIRECT)))


def covers(m, P, d):
    """Each way a line is decided, reachable (so the contract is not vacuous)."""
    P.cover("hit_written_with_a_carried_lane",
            d.hit & d.written & (d.causes[0] == Cause.LINE) & d.write_mask[0])
    P.cover("hit_written_keeping_a_lane_that_did_not_fit", d.hit & d.written & d.keeps)
    P.cover("hit_accumulates", d.hit & ~d.written & d.keeps)
    P.cover("miss_allocates", d.allocates)
    P.cover("miss_written_rounded", ~d.hit & d.written & d.accounted.any())
