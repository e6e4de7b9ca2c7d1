"""Assertions on the outputs (the design's contract).

* ``stream``: ``dram_out`` and the internal L1 -> L2 ``push`` obey the stream rules: once
  ``valid`` is high and not taken it stays high with the same payload; ``dram_out.valid`` is
  a register (it cannot wait for ``ready``), and ``push.ready`` depends on L2's level only.
* ``conservation``: for the tracked address ``a`` (an ``AnyConst``), in every cycle
  ``accepted(a) - written(a) == held in L1 + held in s1 + held in L2``, L2's share as pushed
  minus written matches L2's storage, nothing is written for ``a`` unless L2 holds a write
  for ``a``, nothing is pushed for ``a`` unless s1 or L1 holds ``a``, and at ``idle``
  ``accepted(a) == written(a)``.
* ``idle``: ``idle`` only when no L1 entry is valid (counted in storage), ``valid_count == 0``,
  L2 empty, nothing in s1 or on either stream; under ``flush`` it stays high once high.
* ``termination``: with ``flush`` held high and DRAM fair, ``idle`` is high at the latest
  ``B = flush_bound(...)`` cycles after the first cycle with ``flush`` high.
"""

from amaranth import *

from design import L1State

__all__ = ["add"]


def _stream(m, P, name, stream, fields):
    last_wait = Signal(name=f"{name}_waiting_last_cycle")
    last = [Signal.like(f, name=f"{name}_last_{i}") for i, f in enumerate(fields)]
    m.d.sync += last_wait.eq(stream.valid & ~stream.ready)
    m.d.sync += [l.eq(f) for l, f in zip(last, fields)]
    same = Cat(*[l == f for l, f in zip(last, fields)]).all()
    P.check("stream", f"{name}_valid_held_until_ready", ~last_wait | stream.valid)
    P.check("stream", f"{name}_payload_stable_until_ready", ~last_wait | same)


def add(h, m, P):
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback

    # -- stream rules ------------------------------------------------------------------------
    _stream(m, P, "dram_out", d.dram_out, [d.dram_out.p.addr, d.dram_out.p.value])
    _stream(m, P, "l1_push", l1.push, [l1.push.p.addr, l1.push.p.value, l1.push.p.cause])
    P.check("stream", "dram_out_valid_is_a_register", d.dram_out.valid == wb.out_valid)
    P.check("stream", "push_ready_is_level_below_depth",
            l1.push.ready == (wb.level < d.fifo_depth))

    # -- conservation for the tracked address --------------------------------------------
    held_l1 = Mux(h.init, 0, h.l1_sum)
    P.check("conservation", "accepted_eq_l1_plus_s1_plus_l2_plus_written",
            h.balance == held_l1 + h.s1_sum + h.l2_sum)
    P.check("conservation", "idle_implies_accepted_eq_written", ~d.idle | (h.balance == 0))
    P.check("conservation", "no_dram_write_for_address_not_in_l2",
            ~(d.dram_out.valid & (d.dram_out.p.addr == h.track)) | (h.l2_n != 0))
    P.check("conservation", "no_push_for_address_not_in_s1_or_l1",
            ~(l1.push.valid & (l1.push.p.addr == h.track)) |
            h.s1_n | (~h.init & (h.l1_n != 0)))
    if h.l2_ports:
        P.check("conservation", "l2_shadow_sum_matches_storage", h.l2_sum == h.l2_real_sum)
        P.check("conservation", "l2_shadow_count_matches_storage", h.l2_n == h.l2_real_n)

    # -- idle -----------------------------------------------------------------------------
    P.check("idle", "idle_implies_everything_empty",
            ~d.idle | ((l1.valid_count == 0) & (wb.level == 0) & ~l1.s1_valid &
                       ~l1.push.valid & ~d.dram_out.valid &
                       ((l1.state == L1State.RUN) | (l1.state == L1State.DONE))))
    P.check("idle", "idle_implies_tracked_set_holds_nothing_for_address",
            ~d.idle | (h.l1_n == 0))
    if h.l1_ports:
        P.check("idle", "idle_implies_no_valid_entry_in_storage", ~d.idle | (h.l1_total == 0))
    idle_under_flush = Signal(name="idle_under_flush_last_cycle")
    m.d.sync += idle_under_flush.eq(d.flush & d.idle)
    P.check("idle", "idle_stays_high_while_flush_high", ~(idle_under_flush & d.flush) | d.idle)

    # -- termination ----------------------------------------------------------------------
    if h.bound is not None:
        P.check("termination", f"flush_idle_within_B_{h.bound}",
                ~(d.flush & (h.flush_cycles >= h.bound)) | d.idle)
