"""Covers: situations the proofs must be able to reach (else they may pass vacuously)."""

from amaranth import *

__all__ = ["add"]


def add(h, m, P, only=None):
    """Add the covers; ``only``: the names to add (``None``: every one that applies)."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback

    props = P

    class Chosen:   # the property set, adding only the chosen covers
        def cover(self, name, test):
            if only is None or name in only:
                props.cover(name, test)
    P = Chosen()
    if h.fairness is not None:
        # Liveness covers (DRAM fair): the progress bound N is met with equality, i.e. some
        # gradient is accepted in exactly its N-th cycle of being offered.
        P.cover("progress_bound_met_with_equality",
                h.accept & ~d.flush & (h.progress_wait == h.progress - 1))
        return
    for strobe in ("direct_write", "accum_write", "max_updates_write", "evict_write",
                   "flush_write"):
        if strobe == "evict_write" and d.max_updates == 1:
            continue
        if strobe in ("accum_write", "flush_write") and d.max_updates == 1:
            continue   # with max_updates == 1 no entry is ever held
        P.cover(f"cause_{strobe}", getattr(d, strobe))
    # The run-time modes: each does something (else their properties could pass vacuously).
    P.cover("cause_stochastic_write", d.stochastic_write)
    P.cover("tiny_miss_dropped", d.discard & ~l1.push.valid)
    P.cover("bypassed_gradient_written_direct",
            h.s1_in_window & d.direct_write)
    P.cover("ema_threshold_judged_between_its_bounds",
            h.accept & h.in_modes["ema_enable"] & ~h.in_window &
            (d.l1.grad_in.p.threshold > h.in_modes["ema_min"]) &
            (d.l1.grad_in.p.threshold < h.in_modes["ema_max"]))
    P.cover("l2_full_with_dram_stalled",
            (wb.level == d.fifo_depth) & d.dram_out.valid & ~d.dram_out.ready)
    if d.max_updates > 1:
        full_at_flush = Signal(name="flush_with_every_way_valid")
        with m.If(~d.flush):
            m.d.sync += full_at_flush.eq(0)
        with m.Elif(l1.valid_count == d.sets * d.ways):
            m.d.sync += full_at_flush.eq(1)
        P.cover("flush_completes_with_every_way_valid", full_at_flush & d.flush & d.idle)
        P.cover("hit_on_entry_written_the_cycle_before", l1.hit & l1.fwd_valid)
