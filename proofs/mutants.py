"""Mutation check: planted bugs in copies of the RTL; each must make some property fail.

    python -m gradient_compressor.proofs.mutants [-j 2] [-k NAME]
        [--config sample|small|default|all]

Each mutant is a textual patch applied to a copy of ``design/`` in a temporary directory, at a
*mutation site*: a ``# mutation site: NAME`` comment in the RTL that marks the line where the
patched text begins. The text is matched whatever its whitespace and comments, and the patch
fails loudly if the site or its text is not found, so the check cannot rot silently when the RTL
changes or is reformatted. The copy stands in for ``gradient_compressor.design`` while the
harness is generated (``proofs.run.module_command``). Mutants come in classes (policy, progress,
counters, power-up, widths, l2, forwarding, lanes, whole-line, and one per run-time mode:
dual-threshold, stochastic, ema, bypass), several per class. Every mutant is checked by bounded model checking
from reset, on the ``small`` and on the ``default`` configuration (``--config all``; by default
every mutant on ``small``, and on ``default`` one per class and the deep ones): first every
safety property, then progress and termination under DRAM fairness. The compressor checked is
the product's, built by the default policy (the whole-line rule), but for a mutant of code only
the seed's policy runs (``SEED_POLICY_SITES``), checked under that policy. The mutants that only a long
run shows on ``default`` (``DEEP``: a full L2, a burst, 255 updates, an eviction, a discard
before a completed flush barrier with the dual threshold on; ``DEEP_LIVENESS``: a completed
flush of all 32 sets) are checked there by a deep BMC of every safety property, or of progress
and termination, under a directed stimulus (``properties.covers``); its counterexample is still
a trace from reset of the mutant. It counts as caught only by a failed bounded check with a
counterexample trace from reset (an induction CTI does not count) that
fails again when replayed with z3 (``proofs.run.replay_with_z3``; the "caught by" names are
those of the replay). The check fails if some mutant survives on some configuration.
"""

import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from gradient_compressor.console import (ArgumentParser, UsageError, file_name, positive_integer,
                                         require_extra, table, usage_error)
from gradient_compressor.properties.component import COMPONENTS
from gradient_compressor.properties.harness import CONFIGS
from .jobs import (Job, LINE_JOBS, LINE_L1_BMC, LINE_SMALL, WHOLE_LINE_L1_BMC,
                   WHOLE_LINE_ONE_LANE_BMC)
from gradient_compressor.provenance import write_results
from .run import ROOT, replay_command, run_job, work_dir

__all__ = ["MUTANTS", "apply_mutant"]

#: name -> (class, description, mutation site, old text, new text). The classes are the kinds of
#: bug the proofs must catch; every class has several mutants.
MUTANTS = {
    # -- policy: bugs that never change a per-address sum -----------------------------------
    "victim_never_moves": (
        "policy", "the round-robin victim pointer never moves",
        "victim-advance",
        "with m.If(c_evict):\n    m.d.comb += new_row.victim.eq(victim_way + 1)",
        "with m.If(c_evict):\n    m.d.comb += new_row.victim.eq(victim_way)"),
    "victim_moves_on_free_way_miss": (
        "policy", "the victim pointer also moves on a miss that takes a free way",
        "victim-advance",
        "with m.If(c_evict):\n    m.d.comb += new_row.victim.eq(victim_way + 1)",
        "with m.If(c_miss):\n    m.d.comb += new_row.victim.eq(victim_way + 1)"),
    "highest_free_way": (
        "policy", "a miss takes the highest free way instead of the lowest",
        "free-way-choice",
        "lowest_free = lowest_one_hot(free)",
        "lowest_free = Cat(*reversed(list(lowest_one_hot(Cat(*reversed(list(free)))))))"),
    "max_updates_one_early": (
        "policy", "an entry is written out one update before max_updates",
        "max-updates-rule",
        "return count >= self.max_updates - 1",
        "return count >= self.max_updates - 2"),
    "direct_zero_skipped": (
        "policy", "a direct write of value 0 is skipped",
        "direct-decision",
        "c_direct = self.s3_valid & self.s3_direct",
        "c_direct = self.s3_valid & self.s3_direct & (s3.grad != 0)"),
    "threshold_strict": (
        "policy", "an accumulated sum is written out only when |sum| > threshold",
        "threshold-rule",
        "return at_least(total, self.s3_high) | at_most(total, self.s3_low)",
        "return ~at_most(total, self.s3_high) | ~at_least(total, self.s3_low)"),
    "victim_not_replaced": (
        "policy", "evicted victim written out but its way neither freed nor replaced",
        "allocation",
        "allocates = c_miss if self.max_updates > 1 else c_evict",
        "allocates = (c_miss & ~full) if self.max_updates > 1 else 0"),
    # -- progress: deadlocks and stalls outside a flush --------------------------------------
    "done_never_resumes": (
        "progress", "after a completed flush, L1 never goes back to work",
        "done-resumes",
        "with m.Case(L1State.DONE):\n    with m.If(~self.flush):\n"
        "        m.d.comb += state_next.eq(L1State.RUN)",
        "with m.Case(L1State.DONE):\n    pass"),
    "push_only_into_empty_l2": (
        "progress", "L2 takes a write only when empty (s1 then waits forever below a burst)",
        "l2-push-ready",
        "self.push.ready.eq(self.room)",
        "self.push.ready.eq(self.level == 0)"),
    "aborted_scan_runs_to_the_end": (
        "progress", "when flush drops during a scan, L1 scans every remaining set first",
        "scan-ends-when-flush-drops",
        "with m.If(~self.flush):\n    m.d.comb += state_next.eq(L1State.RUN)",
        "with m.If(0):\n    pass"),
    "ready_ignores_l2_full": (
        "progress", "grad_in.ready ignores the queue places reserved (writes overrun the queue)",
        "grad-in-ready",
        "self.grad_in.ready.eq((state_next == L1State.RUN) & ~self.flush & (reserved_next < Q))",
        "self.grad_in.ready.eq((state_next == L1State.RUN) & ~self.flush)"),
    # -- strobes and counters -------------------------------------------------------------
    "evict_strobe_on_flush_writes": (
        "counters", "the eviction strobe fires for flush writes",
        "cause-strobes",
        "(self.evict_write,       Cause.EVICTION)",
        "(self.evict_write,       Cause.FLUSH)"),
    "accepted_count_counts_valid": (
        "counters", "accepted_count counts offered gradients, not accepted ones",
        "accepted-count",
        "self.accepted_count + self._gradients(self.grad_in.valid & self.grad_in.ready)",
        "self.accepted_count + self._gradients(self.grad_in.valid)"),
    # (Was hit_strobe_while_stalled: the pipeline never stalls a decision.)
    "hit_strobe_on_direct": (
        "counters", "l1_hit also strobes for a direct gradient whose address is held",
        "hit-strobe",
        "self.hit.eq(c_hit),",
        "self.hit.eq(c_hit | (c_direct & self.s3_now_hit)),"),
    "valid_count_not_decremented": (
        "counters", "valid_count not decremented when a decision writes an entry out",
        "valid-count",
        "self.valid_count.eq(self.valid_base + self.s4_inc - self.s4_dec)",
        "self.valid_count.eq(self.valid_base + self.s4_inc)"),
    "empty_flag_a_cycle_late": (
        "counters",
        "L1's empty flag follows valid_base a cycle late (idle while an entry is held)",
        "empty-flag",
        "self.valid_base_zero.eq(becomes(0)),",
        "self.valid_base_zero.eq(self.valid_base == 0),"),
    "scan_does_not_decrement_valid_count": (
        "counters", "valid_count not decremented when the flush scan writes an entry out",
        "valid-count-in-scan",
        "valid_base_next.eq(self.valid_count - scan_push)",
        "valid_base_next.eq(self.valid_count)"),
    # -- power-up and reset ---------------------------------------------------------------
    "init_does_not_clear": (
        "power-up", "INIT does not clear the SRAM (passes any check that starts from zeros)",
        "init-clear",
        "write.en.eq(1), write.addr.eq(self.scan_set), write.data.eq(0),",
        "write.en.eq(0), write.addr.eq(self.scan_set), write.data.eq(0),"),
    "init_skips_last_set": (
        "power-up", "INIT ends one set early (the last set keeps its power-up contents)",
        "init-end",
        "with m.If(self.scan_set == self.sets - 1):",
        "with m.If(self.scan_set == max(self.sets - 2, 0)):"),
    "scan_counter_too_narrow": (
        "power-up", "flush/INIT scan counter one bit too narrow (never reaches the last set)",
        "scan-counter",
        "self.scan_set  = Signal(range(sets))",
        "self.scan_set  = Signal(range(max(1, sets // 2)))"),
    # -- widths ---------------------------------------------------------------------------
    "value_truncated_to_l2": (
        "widths", "value truncated by one bit on its way to DRAM (L1 -> L2)",
        "l1-to-l2-value",
        "writeback.push.p.value.eq(l1.push.p.value)]",
        "writeback.push.p.value.eq(l1.push.p.value[:-1])]"),
    # -- lanes: bugs of one lane of a line (design/line_accumulator.py), checked on the
    # compressor on lines from reset (properties/line_harness.py) --------------------------
    "lane_sum_cleared_by_another": (
        "lanes", "a lane's held sum is cleared when another lane of the line crosses the "
        "threshold", "lane-sum-cleared",
        "kept_sums[j].eq(Mux(crossed[j], 0,",
        "kept_sums[j].eq(Mux(crossed.any(), 0,"),
    "lane_mask_ignores_lane_1": (
        "lanes", "a direct gradient in lane 1 is left out of the line write's mask",
        "lane-mask", "own.mask.eq(d.direct |", "own.mask.eq((d.direct & ~2) |"),
    "direct_lane_dropped_with_small_lanes": (
        "lanes", "a direct lane is dropped when the rest of the beat is small",
        "lane-mask", "own.mask.eq(d.direct |", "own.mask.eq(Mux(d.small.any(), 0, d.direct) |"),
    "victim_lanes_swapped": (
        "lanes", "a victim line's lanes 0 and 1 are swapped in its write",
        "lane-order", "victim_write.values.eq(d.victim.sums),",
        "victim_write.values.eq(Cat(d.victim.sums[1], d.victim.sums[0], "
        "*(d.victim.sums[i] for i in range(2, self.lanes)))),"),
    "max_updates_counted_per_lane": (
        "lanes", "a hit counts one update per small lane of the beat, not one per beat (the "
        "line's max_updates write comes early)", "line-count",
        "way.count.eq(outcome[\"count\"] + 1),",
        "way.count.eq(outcome[\"count\"] + sum(d.small[j] for j in range(self.lanes))),"),
    "line_row_forwarded_only_to_its_line": (
        "lanes", "a decision forwards its new row only to a beat of its own line, so a beat "
        "to another line of the set decides on the row as s2 read it", "line-forward",
        "with m.If(self.s3_valid & next_same_set):",
        "with m.If(self.s3_valid & (s2.addr == s3.addr)):"),
    "sum_two_bits_short": (
        "widths", "an L1 sum is stored on grad_width bits (a held sum needs grad_width + 1)",
        "sum-width",
        'return {"sum": signed(value_width(self.grad_width))}',
        'return {"sum": signed(value_width(self.grad_width) - 2)}'),
    "threshold_compared_narrow": (
        "widths", "the bound t - g is kept on grad_width bits (wraps)",
        "threshold-bound-width",
        "judged.high.eq(threshold - grad_wide),",
        "judged.high.eq((threshold - grad_wide)[:self.grad_width]),"),
    # -- whole-line: the whole-line rule's decision (design/line_decision.py), alone -------
    "line_write_leaves_a_held_lane": (
        "whole-line", "a written hit carries the beat's lanes but leaves the held lanes behind",
        "written-line-carries",
        "self.write_mask.eq(self.entry.held | self.mask)",
        "self.write_mask.eq(self.mask)"),
    "beat_writes_its_line_and_allocates": (
        "whole-line", "a miss written as it came also allocates its small lanes",
        "miss-written",
        "m.d.comb += [self.written.eq(1), self.write_mask.eq(self.mask)]",
        "m.d.comb += [self.written.eq(1), self.write_mask.eq(self.mask), "
        "self.allocates.eq(kept.any()), self.keeps.eq(kept.any())]"),
    "value_one_bit_too_wide": (
        "whole-line", "a new sum that needs grad_width + 1 bits is taken as fitting (its value "
        "wraps)", "value-fits",
        "fits.eq(at_least(held, self.fit_low[i]) & at_most(held, self.fit_high[i])),",
        "fits.eq(1),"),
    "overflow_not_a_crossing": (
        "whole-line", "a small lane whose new sum would not fit is held, not written",
        "lane-crosses",
        "crosses.eq(small[i] & (beyond | ~fits)),",
        "crosses.eq(small[i] & beyond),"),
    # -- whole-line: the line L1 deciding by the rule (checked with its transfer bound) -----
    "free_way_allocation_evicts": (
        "whole-line", "a miss that allocates a free way also writes out the set's victim line "
        "(two transfers for one beat)", "whole-line-evicts",
        "d.c_hit, d.c_evict, d.allocates = hit & active, allocates & d.full, allocates",
        "d.c_hit, d.c_evict, d.allocates = hit & active, allocates, allocates"),
    "line_victim_never_moves": (
        "whole-line", "the line L1's victim pointer never moves on an eviction",
        "line-victim-advance",
        "written.victim.eq(Mux(self.s4_victim, decided.victim + 1, decided.victim))",
        "written.victim.eq(decided.victim)"),
    "line_threshold_strict": (
        "whole-line", "a small lane's sum crosses only when |sum + g| > threshold",
        "line-threshold-rule",
        "beyond = at_least(held, self.high[i]) | at_most(held, self.low[i])",
        "beyond = ~at_most(held, self.high[i]) | ~at_least(held, self.low[i])"),
    "line_max_updates_one_early": (
        "whole-line", "a line is written after max_updates - 1 updates",
        "line-max-updates-rule",
        "fills = self.entry.count >= self.max_updates - 1",
        "fills = self.entry.count >= self.max_updates - 2"),
    "line_rounded_unsigned": (
        "whole-line", "a tiny lane rounded up is written as +level whatever its sign",
        "line-rounded-value",
        "rounded_value = signed_level(self.grads[i], self.level)",
        "rounded_value = self.level"),
    # -- whole-line: the one-lane L1 deciding by the rule (checked with its transfer bound) -
    "entry_ahead_from_another_address": (
        "whole-line", "the entry a decision leaves is taken as the hit entry of the gradient "
        "behind it on any address of its set, not only its own (on the one-lane L1; the line "
        "L1 takes its hit entry by the same code)",
        "entry-ahead",
        "return self.s3_hit_entry.eq(Mux(self.s3_same_addr, self.s4_entry, self.s3_entry))",
        "return self.s3_hit_entry.eq(Mux(self.s3_same_set, self.s4_entry, self.s3_entry))"),
    "whole_line_victim_not_replaced": (
        "whole-line", "on the one-lane L1, a miss to a full set does not allocate (the victim "
        "stays, the gradient is lost)", "whole-line-allocation",
        "allocates = decision.allocates",
        "allocates = decision.allocates & ~d.full"),
    # -- L2 pointers and burst rule -------------------------------------------------------
    "w_ptr_skips_a_slot": (
        "l2", "L2's write pointer skips a slot",
        "l2-write-pointer",
        "m.d.sync += self.w_ptr.eq(self._next_ptr(self.w_ptr))",
        "m.d.sync += self.w_ptr.eq(self._next_ptr(self._next_ptr(self.w_ptr)))"),
    "r_ptr_not_advanced": (
        "l2", "L2's read pointer does not move on a load (a write goes out twice)",
        "l2-read-pointer",
        "m.d.sync += self.r_ptr.eq(self._next_ptr(self.r_ptr))",
        "pass"),
    "burst_ends_below_burst_size": (
        "l2", "a burst ends when fewer than burst_size writes are left, not when empty",
        "l2-burst-end",
        "self.bursting.eq(nonzero_next &",
        "self.bursting.eq(burst_next &"),
    "no_drain_on_flush": (
        "l2", "flush does not start an L2 burst (writes below burst_size stay forever)",
        "l2-burst-start",
        "(self.bursting | burst_next | self.flush)",
        "(self.bursting | burst_next)"),
    "l2_push_ready_when_full": (
        "l2", "L2 takes a push even when full",
        "l2-push-ready",
        "self.push.ready.eq(self.room)",
        "self.push.ready.eq(1)"),
    "merge_ignores_overflow": (
        "l2", "on lines, L2 merges a lane held by both writes even when their sum overflows a "
        "value",
        "l2-merge-fits",
        "fits[i].eq(~both | (_narrow(newest.values[i]) &",
        "fits[i].eq(1 | (_narrow(newest.values[i]) &"),
    "merge_never_taken": (
        "l2", "on lines, L2 never merges a line write into the newest write for its line",
        "l2-merge-fits",
        "fits[i].eq(~both | (_narrow(newest.values[i]) &",
        "fits[i].eq(0 & (_narrow(newest.values[i]) &"),
    "idle_ignores_l2": (
        "l2", "idle ignores the L2 buffer's level",
        "idle",
        "self.idle.eq(l1.idle & ~writeback.holding)",
        "self.idle.eq(l1.idle)"),
    "idle_only_under_flush": (
        "progress", "idle is high only under flush (nothing inside, flush low: idle low)",
        "idle",
        "self.idle.eq(l1.idle & ~writeback.holding)",
        "self.idle.eq(l1.idle & ~writeback.holding & self.flush)"),
    "l2_bubble_in_burst": (
        "l2", "a burst refills L2's output register only when empty: a DRAM write every "
        "second cycle",
        "l2-output-load",
        "load.eq(self.bursting & self.stored & (~self.out_valid | self.dram_out.ready)),",
        "load.eq(self.bursting & self.stored & ~self.out_valid),"),
    "bubble_after_three_gradients": (
        "progress", "grad_in.ready falls for a cycle after three gradients in a row",
        "grad-in-ready",
        "self.grad_in.ready.eq((state_next == L1State.RUN) & ~self.flush & (reserved_next < Q))",
        "self.grad_in.ready.eq((state_next == L1State.RUN) & ~self.flush & (reserved_next < Q) "
        "& ~(self.s1_valid & self.s2_valid & self.s3_valid))"),
    # -- forwarding -----------------------------------------------------------------------
    "no_forwarding": (
        "forwarding", "s3 ignores the decision of the gradient one stage ahead",
        "forward-to-s3",
        "self.s3_same_set.eq(d_write & next_same_set), "
        "self.s3_same_addr.eq(d_write & (s2.addr == s3.addr)), "
        "self.s3_taken.eq(Mux(allocates & next_same_set, alloc_ways, 0)),",
        "self.s3_same_set.eq(0), self.s3_same_addr.eq(0), self.s3_taken.eq(0),"),
    "forward_ignores_address": (
        "forwarding", "s4's row is forwarded to s2 whatever its set",
        "forward-match",
        "self.s2_fwd.eq(Cat(self._set(s1.addr) == self._set(s3.addr),",
        "self.s2_fwd.eq(Cat(Const(1, 1),"),
    "forward_stale_row": (
        "forwarding", "the row written in the cycle of the read (h2) is not forwarded",
        "forward-from-h2",
        "from_h2.eq(self.s2_fwd[2] & self.h2_valid),",
        "from_h2.eq(0),"),
    # -- run-time modes (design/modes.py), with every mode input and the random bits free ---
    # dual threshold, mode drop
    "tiny_hit_dropped": (
        "dual-threshold", "a tiny gradient that hits in L1 is dropped, not accumulated",
        "hit-decision",
        "c_hit = judged_here & hit\nhit_here = Mux(judged_here, hit_ways, 0)",
        "c_hit = judged_here & hit & ~self.s3_tiny\n"
        "hit_here = Mux(judged_here & ~self.s3_tiny, hit_ways, 0)"),
    "tiny_bound_inclusive": (
        "dual-threshold", "a miss with |g| == small_threshold counts as tiny (<= for <)",
        "tiny-rule",
        "self.s3_tiny.eq(less(magnitude, s2.small_threshold)),",
        "self.s3_tiny.eq(at_most(magnitude, s2.small_threshold)),"),
    "discard_count_not_cleared": (
        "dual-threshold", "the step's discard count is never cleared after a flush barrier",
        "discard-count",
        "self.count.eq(Mux(clear, 0, self.count) + counted),",
        "self.count.eq(self.count + counted),"),
    "discard_on_a_bubble": (
        "dual-threshold", "a bubble in s3 whose stale gradient was tiny reports a discard",
        "discard-strobe",
        "self.discard.eq(self.small_miss),",
        "self.discard.eq(self.small_miss | (~self.s3_valid & self.s3_tiny)),"),
    # the stochastic mode's LFSR (proven alone: properties/lfsr.py)
    "lfsr_wrong_tap": (
        "lfsr", "the LFSR's feedback flips a bit the polynomial has no term for",
        "lfsr-feedback",
        "return (state >> 1) ^ Mux(state[0], LFSR_TAPS, 0)",
        "return (state >> 1) ^ Mux(state[0], LFSR_TAPS ^ 4, 0)"),
    "lfsr_seed_0_loads_0": (
        "lfsr", "a seed of 0 loads 0 (the LFSR then sticks)",
        "lfsr-seed-0",
        "seeded = Mux(self.seed == 0, LFSR_RESET, self.seed)",
        "seeded = self.seed"),
    "lfsr_loads_while_busy": (
        "lfsr", "the LFSR's seed is loaded whenever lfsr_load is high, not only while idle",
        "lfsr-load",
        "lfsr.load.eq(self.lfsr_load & self.idle),",
        "lfsr.load.eq(self.lfsr_load),"),
    # dual threshold, mode stochastic
    "stochastic_write_unsigned": (
        "stochastic", "a stochastic write is +small_threshold whatever the gradient's sign",
        "stochastic-write-value",
        "signed_level(s3.grad, level), 0))",
        "level, 0))"),
    "stochastic_rule_inclusive": (
        "stochastic", "the stochastic decision writes also when u * small >> R == |g|",
        "stochastic-rule",
        "less((self.random * level)[self.grad_width:], magnitude),",
        "at_most((self.random * level)[self.grad_width:], magnitude),"),
    "rounding_error_unaccounted": (
        "stochastic", "a stochastic write's discard_error is the gradient, not grad - written",
        "discard-error",
        "self.discard_error.eq(s3.grad - written),",
        "self.discard_error.eq(s3.grad),"),
    "decision_stale": (
        "stochastic", "s3 decides on the random bits from before the step of the stochastic "
        "decision one stage ahead (two decisions in a row get the same bits)",
        "random-bits-in-use",
        "self.s3_chance.bit_select(self.s4_valid & self.s4_stepped, 1)",
        "self.s3_chance.bit_select(0, 1)"),
    # dynamic (EMA) threshold
    "ema_sampled_in_windows": (
        "ema", "gradients inside a bypass window update the EMA too",
        "ema-sample",
        "ema.sample.eq(accept & ~in_window),",
        "ema.sample.eq(accept),"),
    "ema_share_rounded_down": (
        "ema", "the EMA's update takes floor(ema / 2**shift) off, not the ceiling (it creeps up)",
        "ema-share-rounding",
        "~rounded_up)",
        "Const(1, 1))"),
    "ema_clamp_min_first": (
        "ema", "the clamp tests ema_min before ema_max (crossed bounds give another value)",
        "ema-clamp",
        "with m.If(greater(candidate, maximum)):\n"
        "    m.d.comb += threshold.eq(above)\n"
        "with m.Elif(less(candidate, minimum)):\n"
        "    m.d.comb += threshold.eq(below)",
        "with m.If(less(candidate, minimum)):\n"
        "    m.d.comb += threshold.eq(below)\n"
        "with m.Elif(greater(candidate, maximum)):\n"
        "    m.d.comb += threshold.eq(above)"),
    # the random bits' steps on lines (the line L1: checked on it alone from reset)
    "random_step_every_beat_on_lines": (
        "stochastic", "on lines, the random bits step for every beat deciding, not only for a "
        "miss with tiny lanes in mode stochastic",
        "line-random-step",
        "self.random_step.eq(d.tiny.any() & s3.stochastic),",
        "self.random_step.eq(self.s3_valid),"),
    "random_step_never_on_lines": (
        "stochastic", "on lines, the random bits never step (every beat draws the same bits)",
        "line-random-step",
        "self.random_step.eq(d.tiny.any() & s3.stochastic),",
        "self.random_step.eq(0),"),
    # throughput on lines under the whole-line rule (checked on that compressor on lines)
    "line_queue_too_short": (
        "progress", "on lines, L1's output queue has half its places (4): a beat per cycle no "
        "longer fits, with DRAM always ready",
        "line-queue-depth",
        "QUEUE_DEPTH = L1Accumulator.QUEUE_DEPTH",
        "QUEUE_DEPTH = L1Accumulator.QUEUE_DEPTH // 2"),
    # dynamic (EMA) threshold on lines (checked on the compressor on lines: LINE_SYSTEM_SITES)
    "ema_lag_one_on_lines": (
        "ema", "on lines, a beat is judged by the EMA before the last update, not the last two",
        "line-ema-lag",
        "with m.Elif(beat_sampled.any() | update_valid):\n"
        "    m.d.comb += judged.eq(recent[0])\n"
        "with m.Else():\n"
        "    m.d.comb += judged.eq(recent[1])",
        "with m.Elif(beat_sampled.any() | update_valid):\n"
        "    m.d.comb += judged.eq(self.average)\n"
        "with m.Else():\n"
        "    m.d.comb += judged.eq(recent[0])"),
    "ema_samples_bypassed_lanes": (
        "ema", "on lines, the lanes of a beat inside a bypass window update the EMA too",
        "line-ema-sample",
        "return [ema.sampled.eq(Mux(accept, self.grad_in.p.mask & ~in_window, 0)),",
        "return [ema.sampled.eq(Mux(accept, self.grad_in.p.mask, 0)),"),
    # bypass windows
    "bypass_limit_exclusive": (
        "bypass", "a window's limit address is outside it (< for <=)",
        "bypass-window-limit",
        "at_most(addr, window.limit)",
        "~at_most(window.limit, addr)"),
    "bypass_ignores_enable": (
        "bypass", "a window applies even when its enable bit is low",
        "bypass-window-enable",
        "window.enable &",
        "1 &"),
    # the register interface (proven alone: properties/registers.py)
    "register_write_ignores_strobes": (
        "registers", "a register write takes every byte, whatever WSTRB says",
        "register-strobes",
        "mask = Cat(self.wstrb[i].replicate(8) for i in range(4))",
        "mask = Const(-1, 32)"),
    "register_response_dropped_unread": (
        "registers", "the write response is withdrawn after a cycle, taken or not",
        "register-write-response",
        "with m.Elif(self.bready):",
        "with m.Else():"),
    "register_unmapped_read_okay": (
        "registers", "a read of an address without a register answers OKAY",
        "register-read-response",
        "self.rresp.eq(Mux(unmapped, SLVERR, OKAY))",
        "self.rresp.eq(OKAY)"),
    "register_read_drops_high_half": (
        "registers", "a read returns only the low 16 bits of its register's word",
        "register-read-data",
        "with m.If(hits[register.name]):\n    m.d.sync += self.rdata.eq(self.word(register))",
        "with m.If(hits[register.name]):\n"
        "    m.d.sync += self.rdata.eq(self.word(register)[:16])"),
    "register_lfsr_load_unwired": (
        "registers", "the register file's LFSR load field is not wired to the compressor",
        "register-join",
        "m.d.comb += port(sink, name).eq(port(source, name))",
        "m.d.comb += port(sink, name).eq(Mux(name == \"lfsr_load\", 0, port(source, name)))"),
    "bypassed_strobe_every_accept": (
        "bypass", "the bypassed strobe follows every accepted gradient",
        "bypassed-strobe",
        "self.bypassed.eq(accept & in_window)",
        "self.bypassed.eq(accept)"),
}

#: Configurations each mutant is checked on: (name, DRAM fairness K, safety BMC depth,
#: liveness BMC depth). Depths: INIT (a cycle per set), then enough traffic; for liveness
#: also the progress bound N. On small, the pipeline's latency (a write enters L2 five
#: cycles after its acceptance, so a fifth write finds L2 full in step 12) needs 14, and its
#: progress bound (N = 13) 24 after a flush.
CONFIGS_CHECKED = [("small", 2, 14, 24), ("default", 2, 40, 72)]
#: The mutants `make mutants` (and so `make test`) also checks on the default configuration: at
#: least one per class, and besides them every mutant of :data:`DEEP` and :data:`DEEP_LIVENESS`
#: (under its directed stimulus). Every mutant on both configurations is `--config all`, a
#: longer run.
DEFAULT_SAMPLE = ["direct_zero_skipped", "victim_moves_on_free_way_miss", "highest_free_way",
                  "push_only_into_empty_l2", "accepted_count_counts_valid",
                  "init_does_not_clear", "value_truncated_to_l2", "r_ptr_not_advanced",
                  "forward_ignores_address", "tiny_bound_inclusive", "stochastic_write_unsigned",
                  "ema_sampled_in_windows", "bypass_limit_exclusive", "lfsr_wrong_tap",
                  "register_write_ignores_strobes", "value_one_bit_too_wide"]


#: A mutation site in the design: a comment ``# mutation site: NAME`` at the end of the line
#: where the mutated text begins, or alone on the line before it.
SITE = re.compile(r"#\s*mutation site:\s*([\w-]+)\s*$")


def find_sites(design_dir):
    """``{site: (file name, index of the line the mutated text begins on)}`` of the design
    package in ``design_dir``; a site named twice is refused."""
    sites = {}
    for fname in sorted(os.listdir(design_dir)):
        if not fname.endswith(".py"):
            continue
        with open(os.path.join(design_dir, fname)) as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            match = SITE.search(line)
            if not match:
                continue
            if match.group(1) in sites:
                raise RuntimeError(f"mutation site {match.group(1)!r} named twice in design/")
            alone = not line[:match.start()].strip()
            sites[match.group(1)] = (fname, i + 1 if alone else i)
    return sites


def _pattern(text):
    """``text`` as a regular expression that ignores the whitespace and comments between its
    tokens (words, and each other character): a site's text still matches after reformatting."""
    tokens = re.findall(r"\w+|[^\w\s]", text)
    gap = r"(?:\s|#[^\n]*)"
    pattern = re.escape(tokens[0])
    for before, token in zip(tokens, tokens[1:]):
        words = re.match(r"\w", before) and re.match(r"\w", token)
        pattern += gap + ("+" if words else "*") + re.escape(token)
    return re.compile(r"(?<!\w)" + pattern + r"(?!\w)")


def apply_mutant(name, dest):
    """Copy design/ into ``dest/design`` with mutant ``name`` applied: its old text, which must
    begin on the line of its mutation site, replaced by its new text (whose continuation lines
    are indented relative to that line)."""
    _, desc, site, old, new = MUTANTS[name]
    src = os.path.join(ROOT, "design")
    target = os.path.join(dest, "design")
    shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
    sites = find_sites(target)
    if site not in sites:
        raise RuntimeError(f"mutant {name}: no '# mutation site: {site}' in design/")
    fname, line = sites[site]
    path = os.path.join(target, fname)
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    begin = sum(len(x) + 1 for x in lines[:line])
    end = begin + len(lines[line])
    match = _pattern(old).search(text, begin)
    if not match or match.start() >= end:
        raise RuntimeError(f"mutant {name}: its text does not begin on the line of site "
                           f"{site!r} (design/{fname}:{line + 1}): {old!r}")
    indent = lines[line][:len(lines[line]) - len(lines[line].lstrip())]
    with open(path, "w") as f:
        f.write(text[:match.start()] + new.replace("\n", "\n" + indent) + text[match.end():])
    return dest


#: The mutants that only a long run shows on the default configuration (a full L2 takes 32
#: writes, a burst 16, a max-updates write 255 updates, all after the 32-cycle INIT; the
#: discard count's clearing needs the dual threshold on, a discard and a completed flush
#: barrier, which the free-input check did not reach in minutes), beyond
#: the free-input BMC's reach there. On default each is checked instead by a bounded check of
#: every safety property from reset under a directed stimulus (properties.covers.STIMULI: the
#: inputs are assumed to follow one sequence, so a deep BMC has one run to follow): name ->
#: (stimulus, depth). A counterexample under an assumed stimulus is still a real trace from
#: reset of the mutant design, so it counts as caught. Memories as flip-flops and smtbmc
#: --nounroll, as in the directed cover jobs; no ``skip``: every step's assertions are checked.
DEEP = {
    "max_updates_one_early": ("one_address", 292),
    "l2_push_ready_when_full": ("l2_full", 80),
    "ready_ignores_l2_full": ("l2_full", 80),
    "burst_ends_below_burst_size": ("burst_then_drain", 64),
    "victim_never_moves": ("evict_in_one_set", 48),
    "discard_count_not_cleared": ("discard_then_flush", 56),
    # A write leaves L2 for DRAM at the earliest in step 40 on the pipelined L1 (INIT, five
    # cycles to L2, a flush to start the drain), past the free-input BMC's depth; under the
    # stimulus the one write goes out twice.
    "r_ptr_not_advanced": ("write_then_flush", 56),
    # Within the free-input BMC's depth (40), but found there only in the last steps, after
    # 1-6 minutes each; under a stimulus in seconds (failing in step 39, 39 and 37).
    "push_only_into_empty_l2": ("l2_full", 44),
    "value_truncated_to_l2": ("write_then_flush", 44),
    "forward_ignores_address": ("fill_then_flush", 42),
    # Free-input BMCs still running after 10 minutes each (`--config all`); under a stimulus
    # caught in seconds (failing in step 41 and 44).
    "victim_not_replaced": ("evict_in_one_set", 45),
    "aborted_scan_runs_to_the_end": ("flush_dropped_in_scan", 48),
    # Free-input BMCs timed out (30 minutes; the third 15 minutes, `--config all`); under a
    # stimulus caught in step 43, 40 and 43.
    "evict_strobe_on_flush_writes": ("flush_dropped_in_scan", 48),
    "idle_ignores_l2": ("write_then_flush", 48),
    "scan_does_not_decrement_valid_count": ("flush_dropped_in_scan", 48),
    # Free-input BMCs of 49-54 s (CI); the first misses of the stimulus take
    # free ways.
    "highest_free_way": ("evict_in_one_set", 44),
    "victim_moves_on_free_way_miss": ("evict_in_one_set", 44),
    # A free-input BMC of 81-91 s (CI): no gradient of 0 judged direct is
    # found quickly among the free inputs.
    "direct_zero_skipped": ("direct_zeros", 44),
    # A free-input BMC of 63-84 s: a stochastic write of a negative gradient.
    "stochastic_write_unsigned": ("stochastic_rounding", 44),
}
#: Deep mutants checked on default only with ``--config default`` or ``all``, not in the sample
#: (``make mutants``, part of ``make test``): 255 updates of one entry take a 292-step BMC and
#: a 292-step replay with z3, about 400 s of CPU of ``make test``'s 20 minutes; the sample
#: catches it on small (``max_updates`` 3), and its class on default by other mutants.
ALL_ONLY = {"max_updates_one_early"}
#: Deep mutants that a liveness property catches (progress, termination; DRAM fairness K as
#: in CONFIGS_CHECKED): on default, a BMC of those under a directed stimulus.
DEEP_LIVENESS = {
    "done_never_resumes": ("write_then_flush", 112),
    "no_drain_on_flush": ("write_then_flush", 112),
}
#: Likewise on small: the mutants a free-input BMC finds only in its last steps, after 30 s to
#: over 5 minutes each on the shared machine (the queue overrun of ``ready_ignores_l2_full``,
#: L2's 4 places and the 8 reserved ones exceeded, first in step 16); under a stimulus each
#: takes seconds. Depth: the failing step + 4.
DEEP_SMALL = {
    "ready_ignores_l2_full": ("l2_full", 20),
    "l2_push_ready_when_full": ("l2_full", 16),
    "burst_ends_below_burst_size": ("burst_then_drain", 16),
    "evict_strobe_on_flush_writes": ("flush_dropped_in_scan", 18),
    "aborted_scan_runs_to_the_end": ("flush_dropped_in_scan", 18),
    "discard_count_not_cleared": ("discard_then_flush", 22),
    "r_ptr_not_advanced": ("write_then_flush", 14),
    "idle_ignores_l2": ("write_then_flush", 14),
    # 144 s in the free-input check (CI).
    "scan_does_not_decrement_valid_count": ("flush_dropped_in_scan", 18),
}
#: Bugs that only delay (no safety property can see them): the liveness check runs first, so
#: that the safety BMC, which passes, costs no time when the liveness check catches them.
STALLS = {"done_never_resumes", "no_drain_on_flush"}


def jobs_for(name, design_path, config="small"):
    """The bounded checks from reset that must catch mutant ``name`` on ``config``: every safety
    property, then progress and termination under DRAM fairness; for a mutant of :data:`DEEP`
    (:data:`DEEP_LIVENESS`) on the default configuration (of :data:`DEEP_SMALL` on small), every
    safety property (progress and termination) under its directed stimulus; for one of
    :data:`STALLS`, the liveness check first. A mutant of a component's file is first checked
    by that component's own proofs (:data:`COMPONENT_FILES`); a mutant of the line L1
    (:data:`LINE_FILES`) by the check of the compressor on lines (``lines2-bmc``, whatever
    ``config``), and one of its whole-line decision (:data:`WHOLE_LINE_SITES`) by the check of
    the whole-line L1 alone; a mutant of the one-lane L1's whole-line decision
    (:data:`ONE_LANE_WHOLE_LINE_SITES`) by the check of that L1 alone (whatever ``config``)."""
    site = MUTANTS[name][2]
    fname, _ = find_sites(os.path.join(ROOT, "design"))[site]
    if site in WHOLE_LINE_SITES:
        return [replace(WHOLE_LINE_L1_BMC, name=f"mutant-{name}-l1-whole-lines2",
                        design_path=design_path)]
    if site in ONE_LANE_WHOLE_LINE_SITES:
        return [replace(WHOLE_LINE_ONE_LANE_BMC, name=f"mutant-{name}-l1-whole-small",
                        design_path=design_path, vcd=False)]
    if site in LINE_SYSTEM_SITES:
        return [replace(LINE_SYSTEM_BMC, name=f"mutant-{name}-lines2-small",
                        **LINE_SYSTEM_SITES[site], design_path=design_path)]
    if fname in LINE_FILES:
        # (with the solver's VCD, which the replay of a line job reads: proofs.line_replay)
        return [replace(LINE_L1_BMC, name=f"mutant-{name}-l1-lines2", design_path=design_path),
                replace(LINE_BMC, name=f"mutant-{name}-lines2", design_path=design_path)]
    # The trace a catch shows is its replay's (check_mutant): no VCD of the solver's own.
    return [replace(job, vcd=False) for job in
            _component_jobs(name, design_path, config) + _system_jobs(name, design_path, config)]


#: The design files only the compressor on lines uses.
LINE_FILES = {"line_accumulator.py"}
#: The mutation sites of the line L1's whole-line decision (a line L1 built with
#: ``whole_line``): checked on that L1 alone, with its transfer bound.
WHOLE_LINE_SITES = {"whole-line-evicts", "line-victim-advance"}
#: The mutation sites of the one-lane L1's whole-line decision (``design/l1.py``, only in an
#: L1 built with ``whole_line``): checked on that L1 alone (quicker than the compressor), with its transfer bound (``proofs.jobs.WHOLE_LINE_ONE_LANE_BMC``).
ONE_LANE_WHOLE_LINE_SITES = {"whole-line-allocation", "entry-ahead"}
#: The check of the compressor on lines from reset (proofs.jobs.LINE_JOBS).
LINE_BMC = next(job for job in LINE_JOBS if job.mode == "bmc")
#: The mutation sites that only the compressor on lines reaches, in a file whose one-lane
#: checks cannot see them (the EMA's beat pipeline, the EMA's samples of a beat, ...): each
#: checked by a bounded check from reset of the line system's harness (2 lanes, LINE_SMALL,
#: nothing assumed) of the groups named here (the throughput's on the compressor built with
#: the whole-line rule, where it is stated).
LINE_SYSTEM_SITES = {"line-ema-lag": dict(focus=["ema"]),
                     "line-ema-sample": dict(focus=["ema"]),
                     "line-queue-depth": dict(focus=["throughput"], whole_line=True)}
#: That check: INIT (2 cycles), a few beats and the EMA's three cycles to take them.
LINE_SYSTEM_BMC = Job("mutant-lines2-small", "small", "bmc", 12, lanes=2, geometry=LINE_SMALL,
                      reset="initial", assume_others=False, timeout=900)


#: The design files that hold a component proven alone (properties/component.py), and those
#: components: a mutant of such a file is first checked by their own proofs.
COMPONENT_FILES = {"writeback.py": ["l2"], "queue.py": ["queue"], "registers.py": ["registers"],
                   "modes.py": ["lfsr", "ema", "discards"],
                   "streamer.py": ["streamer"], "line_decision.py": ["line_decision"]}


#: The mutation sites whose mutants only a component's line form can see (one lane never
#: merges): checked by that component alone, not by the file's one-lane components (L2 on
#: lines at both of its value widths: grad_width + 2, and grad_width under the whole-line rule).
COMPONENT_SITES = {"l2-merge-fits": ["l2_lines", "l2_lines_whole"],
                   # the register file's join to the compressor (the file alone is unchanged)
                   "register-join": ["registers_joined"]}


def _component_jobs(name, design_path, config):
    """The bounded checks from reset of the components in the mutant's file (or at its site,
    :data:`COMPONENT_SITES`), alone."""
    jobs = []
    site = MUTANTS[name][2]
    fname, _ = find_sites(os.path.join(ROOT, "design"))[site]
    for component in COMPONENT_SITES.get(site, COMPONENT_FILES.get(fname, [])):
        spec = COMPONENTS[component]
        jobs.append(Job(f"mutant-{name}-{component}-{config}", config, "bmc",
                        spec.bmc_depth(spec.params(CONFIGS[config])), component=component,
                        design_path=design_path, reset="initial", solver=spec.solver,
                        timeout=600))
    return jobs


#: The mutation sites in code that only the seed's policy runs (``whole_line=False``), whose
#: mutants the compressor of the default policy cannot show: checked on the compressor built
#: with the seed's policy (job names ending ``-seed``). ``sum-width``: a one-lane entry's sum
#: on ``grad_width`` bits, which the whole-line rule's sums always fit; the others: the seed's
#: one-lane decision (under the rule, ``LineDecision`` decides: its own mutants), but
#: ``stochastic-write-value``, which under the rule only the discard's error reads, and the
#: seed's policy also writes.
SEED_POLICY_SITES = {"sum-width", "threshold-rule", "max-updates-rule", "allocation",
                     "stochastic-write-value"}


def _system_jobs(name, design_path, config):
    """The bounded checks from reset of the one-lane compressor on ``config``, built by the
    default policy (the whole-line rule), or by the seed's for a mutant of
    :data:`SEED_POLICY_SITES`."""
    jobs = _system_jobs_of_policy(name, design_path, config)
    if MUTANTS[name][2] in SEED_POLICY_SITES:
        return [replace(job, name=job.name + "-seed", whole_line=False) for job in jobs]
    return [replace(job, whole_line=True) for job in jobs]


def _system_jobs_of_policy(name, design_path, config):
    _, K, depth, live_depth = next(c for c in CONFIGS_CHECKED if c[0] == config)
    deep_safety = {"default": DEEP, "small": DEEP_SMALL}.get(config, {})
    if name in deep_safety:
        stimulus, deep = deep_safety[name]
        return [Job(f"mutant-{name}-{config}-{stimulus.replace('_', '-')}", config, "bmc",
                    deep, design_path=design_path, reset="initial", stimulus=stimulus,
                    memories="flops", unroll=False, timeout=1800)]
    if config == "default" and name in DEEP_LIVENESS:
        stimulus, deep = DEEP_LIVENESS[name]
        return [Job(f"mutant-{name}-{config}-{stimulus.replace('_', '-')}-liveness", config,
                    "bmc", deep, focus=["progress", "termination"], fairness=K,
                    design_path=design_path, reset="initial", stimulus=stimulus,
                    memories="flops", unroll=False, timeout=1800)]
    # Memories as flip-flops on small (as most of make bmc's: victim_never_moves caught in 12 s
    # against 18 on arrays, victim_not_replaced 13 against 16), as SMT arrays on default,
    # where flip-flops were slower (tiny_bound_inclusive's catch 38 s against 30).
    memories = "flops" if config == "small" else "arrays"
    jobs = [
        Job(f"mutant-{name}-{config}-safety", config, "bmc", depth, design_path=design_path,
            reset="initial", memories=memories, timeout=1800),
        Job(f"mutant-{name}-{config}-liveness", config, "bmc", live_depth,
            focus=["progress", "termination"], fairness=K, design_path=design_path,
            reset="initial", memories=memories, timeout=1800),
    ]
    return jobs[::-1] if name in STALLS else jobs


def check_mutant(name, tmp, config):
    """Run the checks of ``config`` on mutant ``name`` until one fails with a counterexample.
    Only a failed bounded check from reset counts (never an induction CTI), and only when
    its counterexample, replayed with z3, fails (``proofs.run.replay_with_z3``): the names
    are those of that replay."""
    dest = apply_mutant(name, os.path.join(tmp, name))
    start = time.time()
    last = None
    for job in jobs_for(name, dest, config):
        r = run_job(job)
        last = r
        if r["status"] == "FAIL" and r["vcd"]:
            return {"mutant": name, "config": config, "caught": True, "job": job.name,
                    "result": r, "property": ", ".join(r["failed"]) or "?",
                    "seconds": time.time() - start}
        if r["status"] != "PASS":
            return {"mutant": name, "config": config, "caught": False, "job": job.name,
                    "result": r, "property": f"({r['status']})",
                    "seconds": time.time() - start}
    return {"mutant": name, "config": config, "caught": False, "job": last["job"],
            "result": last, "property": "-", "seconds": time.time() - start}


def main(argv=None):
    configs = [c[0] for c in CONFIGS_CHECKED]
    p = _parser(configs)
    args = p.parse_args(argv)
    names = [n for n in MUTANTS if not args.filter or args.filter in n]
    if not names:
        return usage_error(p.prog, f"-k {args.filter}: no mutant's name contains it")
    try:
        require_extra("prove", "the mutation check")
    except UsageError as error:
        return usage_error(p.prog, error)
    tasks = _tasks(names, args.config, configs)
    start = time.time()
    results = _check_all(names, tasks, configs, args.jobs)
    print()
    text = _results_table(results)
    print(text)
    survivors = [f"{r['mutant']} ({r['config']})" for r in results if not r["caught"]]
    summary = (f"{len(results) - len(survivors)}/{len(results)} mutant checks caught; "
               f"wall time {time.time() - start:.0f} s")
    print("\n" + summary)
    if args.out:
        write_results(args.out, "Mutation check", summary, text)
    for r in results:
        witness = r["result"].get("witness")
        if r["caught"] and witness:
            # a component's counterexample: its trace (the replay simulates the compressor)
            shown = replay_command(witness) or f"trace {os.path.relpath(r['result']['vcd'])}"
            print(f"  {r['mutant']} ({r['config']}): {shown}")
    if survivors:
        print("surviving mutants: " + ", ".join(survivors))
        return 1
    return 0


def _parser(configs):
    p = ArgumentParser(prog="python -m gradient_compressor.proofs.mutants",
                       description="Mutation check: every planted bug must be caught.",
                       epilog="Exit status: 0 every mutant caught, 1 one survived, 2 bad "
                              "argument.")
    p.add_argument("-j", "--jobs", type=positive_integer, default=2)
    p.add_argument("-k", "--filter", default=None, help="only mutants whose name contains this")
    p.add_argument("--config", choices=configs + ["all", "sample"], default="sample",
                   help="configurations to check each mutant on: one of them, all, or "
                        "(default) every mutant on small, and on default one per class "
                        "and the deep ones (DEEP, DEEP_LIVENESS: under a directed "
                        "stimulus) but ALL_ONLY")
    p.add_argument("--out", type=file_name, default=None, metavar="FILE.md",
                   help="also write the table here, with the command, commit and date")
    return p


def _tasks(names, config, configs):
    """The (mutant, configuration) checks that ``--config`` asks for."""
    if config == "sample":
        return [(n, "small") for n in names] + [(n, "default") for n in names
                                                  if (n in DEFAULT_SAMPLE or n in DEEP
                                                      or n in DEEP_LIVENESS)
                                                  and n not in ALL_ONLY]
    chosen = configs if config == "all" else [config]
    return [(n, c) for c in chosen for n in names]


def _check_all(names, tasks, configs, jobs):
    """Check every task on ``jobs`` threads, printing each verdict as it comes; the results
    in the order of the tasks."""
    # Mutant copies are kept (gitignored) so that `python -m gradient_compressor.proofs replay`
    # can rerun a counterexample on the mutant it came from.
    tmp = os.path.join(work_dir(), "mutant-designs")
    shutil.rmtree(tmp, ignore_errors=True)
    # Patch every copy first, so that a rotten patch fails before any proof runs.
    for n in names:
        apply_mutant(n, os.path.join(tmp, "check", n))
    per_config = {c: sum(t[1] == c for t in tasks) for c in configs}
    print("mutation check, bounded checks from reset: " +
          ", ".join(f"{n} mutants on {c}" for c, n in per_config.items() if n), flush=True)

    def one(task):
        n, config = task
        r = check_mutant(n, os.path.join(tmp, config), config)
        print(f"  {'caught  ' if r['caught'] else 'SURVIVED'} {n:30s} {config:8s} "
              f"{r['seconds']:6.1f}s  {r['property']}", flush=True)
        return r

    # The deep checks (a minute or two each) start first, so that they do not run alone at
    # the end; the table keeps the order of the tasks.
    order = sorted(range(len(tasks)), key=lambda i: tasks[i] not in
                   [(n, "default") for n in list(DEEP) + list(DEEP_LIVENESS)])
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = dict(zip(order, pool.map(one, [tasks[i] for i in order])))
    return [done[i] for i in range(len(tasks))]


def _results_table(results):
    rows = [[r["mutant"], MUTANTS[r["mutant"]][0], MUTANTS[r["mutant"]][1], r["config"],
             f"{r['job']}: {r['property']}" if r["caught"] else f"SURVIVED {r['property']}",
             f"{r['seconds']:.0f}"] for r in results]
    return table(rows, ["mutant", "class", "planted bug", "config", "caught by (job: property)",
                        "seconds"], align=["left", "left", "left", "left", "left", "right"])


if __name__ == "__main__":
    sys.exit(main())
