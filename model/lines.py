"""Reference model of the policy on lines of ``lanes`` gradients: the line-rate compressor.

A beat is a line address (lane 0's address, a multiple of ``lanes``), ``lanes`` signed
gradients and a lane mask (which lanes carry a gradient; lane ``i`` is the gradient at address
``line + i``). An L1 entry holds one tag, a sum per lane, which lanes hold a sum, and the
number of beats that updated it. The policy, per beat:

* The threshold in force is the one before the beat (``threshold``, or the EMA's); a lane in an
  enabled bypass window is judged against 0. The EMA is then updated once by the beat's masked
  lanes outside the bypass windows, each weighing ``1 / lanes`` of a gradient
  (:meth:`LineModel._update_ema_by_beat`). With more than one lane, a beat is judged by the EMA
  as it was before the last :data:`~design.params.EMA_LINE_LAG` (2) updates
  (:attr:`LineModel.ema_judged`; ``ema_per_step`` judges by the EMA latched at the last flush,
  as with one lane).
* A lane with ``|g| >= threshold`` is written straight on (``DIRECT``).
* The other (small) lanes of a line that hits add into their lane sums, and the beat counts as
  one update of the line (a lane holds a sum once a gradient was added into it, even if the
  sum is 0, as with one lane). A lane whose ``|sum| >= threshold`` is written and cleared
  (``ACCUM_THRESHOLD``); a line left with no lane held is freed; else, at ``max_updates``
  beats, every held lane is written (``MAX_UPDATES``) and the line freed.
* On a miss, a small lane with ``|g| < small_threshold`` is dropped or rounded (the dual
  threshold, per lane; in the stochastic mode every tiny lane of the beat is tested on the
  same random bits, one draw per beat, the LFSR stepping once after it), even when other
  lanes of the beat allocate the line; the rest allocate it (a free way,
  or the victim's, whose held lanes are written as ``EVICTION``). With ``max_updates == 1``
  they are written (``MAX_UPDATES``) instead.
* The writes of the beat's own line leave as **one masked line write**; a victim line is a
  second. So one beat causes at most two line writes, never two for one line. A lane written
  twice in one beat (a direct gradient and its held sum written by ``MAX_UPDATES``) is one
  value, their sum, with the cause ``DIRECT``.
* ``flush`` writes every held line (its held lanes, ``FLUSH``), set by set, lowest way first.

With ``lanes = 1`` it makes exactly the decisions of :class:`model.ReferenceModel`: a beat is
one gradient and a line write one write (tests check it write for write, under the whole-line
rule too).

**The whole-line rule** (``whole_line=True``; the RTL's ``GradientCompressor(lanes=N,
whole_line=True)``, whose L2 may still merge two values into a wider one) makes the
compressor never move more DRAM bytes than writing the beats straight through: every value
written fits ``grad_width`` bits (the input's own format), and a beat causes at most one line
write. Thresholds, the EMA, the bypass windows and the LFSR are as above; per beat:

* **Hit.** The small lanes' new sums are formed (held sum plus gradient). The line is
  *written* if the beat has a direct lane, a small lane crosses its threshold or would leave
  ``grad_width`` bits, or the line reaches ``max_updates`` beats. A written line's one line
  write carries every pending value: each held lane's sum and each lane of the beat, its
  gradient added to its held sum (causes: ``DIRECT``, ``ACCUM_THRESHOLD`` for a lane that
  crossed, ``MAX_UPDATES`` for the rest when the line filled, else ``LINE``: carried along).
  The line is then free, but for a lane whose value would not fit ``grad_width`` bits: a
  small lane writes its held sum and holds its new gradient; a direct lane writes its
  gradient and keeps its held sum. Such a line stays, holding those lanes, as updated once.
  A line not written takes the small lanes' new sums and one more update.
* **Miss.** The line is written if the beat has a direct lane, or small lanes to keep with
  ``max_updates == 1``: every lane of the beat is written as it came (the tiny lanes of the
  dual threshold too, which are dropped only where dropping saves a transfer), and nothing
  is allocated. Otherwise the tiny lanes are dropped or rounded as above (the rounding level
  is ``small_threshold`` at most ``2**(grad_width-1) - 1``, so that it fits); if one is rounded
  the line is written with it and the small lanes it would have allocated (``LINE``), the
  lanes not rounded being dropped (writing them would bias the rounding); else the small
  lanes allocate the line (a victim line is written as ``EVICTION``).
* ``flush`` and evictions write held lines as above: every held sum fits ``grad_width`` bits.

So line writes sent and due, plus lines held, never exceed the beats taken (a beat writes
its own line, or allocates it and evicts at most one victim); tests check this beat by beat.
"""

from collections import namedtuple

from gradient_compressor.design.params import (BYPASS_WINDOWS, DEFAULTS, WHOLE_LINE, EMA_LINE_LAG,
                                               EMA_SCALE_FRACTION_BITS,
                                               LANES, check_lanes, ema_fraction_bits)
from .reference import ReferenceModel, Write, lfsr_step

__all__ = ["LineModel", "LineWrite", "LANES"]

class LineWrite(namedtuple("LineWrite", "line values mask causes")):
    """A masked line write toward DRAM: for each lane ``i`` in ``mask``, add ``values[i]`` at
    address ``line + i``; ``causes[i]`` says why (``None`` outside the mask)."""

    def writes(self):
        """The lanes written, as one :class:`~model.Write` each, lane 0 first."""
        return [Write(self.line + i, value, cause)
                for i, (value, cause) in enumerate(zip(self.values, self.causes))
                if self.mask >> i & 1]


class _Line:
    """The lanes of one line being written in a beat."""

    def __init__(self, lanes):
        self.values, self.causes = [0] * lanes, [None] * lanes

    def add(self, lane, value, cause):
        if self.causes[lane] is None:
            self.values[lane], self.causes[lane] = value, cause
        else:   # a direct gradient and its lane's held sum: one value, cause DIRECT
            self.values[lane] += value
            self.causes[lane] = "DIRECT"

    def write(self, line):
        mask = sum(1 << i for i, cause in enumerate(self.causes) if cause is not None)
        return [LineWrite(line, tuple(self.values), mask, tuple(self.causes))] if mask else []


class LineModel(ReferenceModel):
    """The compressor's policy on beats of ``lanes`` gradients (see the module's description).

    Parameters
    ----------
    lanes : int
        Gradients per line: one of :data:`LANES`.
    sets, ways, max_updates, grad_width, addr_width
        As for :class:`~model.ReferenceModel`; ``sets`` counts lines (``sets=None``: an
        unbounded L1 that never evicts). ``max_updates`` counts beats that updated a line.
    whole_line : bool
        Run the whole-line rule (see the module's description); with one lane it is
        :class:`~model.ReferenceModel`'s ``whole_line``.

    The run-time modes, the LFSR and the discard accounting are :class:`~model.ReferenceModel`'s
    (per address: a discard names a lane's address).
    """

    CONFIG_PARAMS = ("lanes", "whole_line", *ReferenceModel.CONFIG_PARAMS)
    OPERATIONS = ("line", *ReferenceModel.OPERATIONS)

    def __init__(self, *, lanes=1, sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], grad_width=DEFAULTS["grad_width"],
                 addr_width=DEFAULTS["addr_width"], bypass_windows=BYPASS_WINDOWS,
                 whole_line=WHOLE_LINE):
        self.lanes = check_lanes(lanes)     # before the geometry's checks, which count lines
        super().__init__(sets=sets, ways=ways, max_updates=max_updates, grad_width=grad_width,
                         addr_width=addr_width, bypass_windows=bypass_windows,
                         whole_line=whole_line)
        # The EMA after each of the last EMA_LINE_LAG updates and before them, oldest first
        # (lines: a beat is judged by the oldest).
        self._ema_recent = [self.ema] * (EMA_LINE_LAG + 1)
        # An entry: [tag, sums (one per lane), held (the set of lanes holding a sum), updates]
        # (unbounded: line -> the same, its tag None).

    def held(self):
        """``{addr: sum}`` of every lane held."""
        return {line + lane: sums[lane] for line, (_, sums, held, _) in self._held_lines()
                for lane in held}

    def _held_lines(self):
        """``(line, entry)`` of every line held, set by set, lowest way first."""
        if self.sets is None:
            return list(self._entries.items())
        return [(self._line(index, entry[0]), entry)
                for index, row in enumerate(self._rows) for entry in row if entry]

    def _line(self, index, tag):
        return (tag * self.sets + index) * self.lanes

    # -- the policy -----------------------------------------------------------------------

    def write_line(self, line, grads, mask, threshold):
        """Take one beat; return the list (empty, of one or of two) of line writes it
        causes: the beat's own line first, then a victim line."""
        self.check.beat(line, grads, mask, threshold)
        lanes = [i for i in range(self.lanes) if mask >> i & 1]
        if not lanes:
            return []
        self._start_of_input()
        judged = self.ema_threshold if self.modes["ema_enable"] else threshold
        bypassed = {i for i in lanes if self.in_bypass_window(line + i)}
        thresholds = {i: 0 if i in bypassed else judged for i in lanes}
        self._update_ema_by_beat([grads[i] for i in lanes if i not in bypassed])
        if self.whole_line:
            return self._whole_line(line, grads, lanes, thresholds)
        out = _Line(self.lanes)
        small = []
        for i in lanes:
            if abs(grads[i]) >= thresholds[i]:
                out.add(i, grads[i], "DIRECT")
            else:
                small.append(i)
        victim = []
        if small:
            victim = self._small(line, grads, small, thresholds, out)
        return out.write(line) + victim

    def _small(self, line, grads, small, thresholds, out):
        """The small lanes of a beat: accumulate on a hit, else allocate (or drop)."""
        entry, free = self._find(line)
        if entry is not None:
            sums, held = entry[1], entry[2]
            for i in small:
                sums[i] += grads[i]
                held.add(i)
            entry[3] += 1
            for i in small:
                if abs(sums[i]) >= thresholds[i]:
                    out.add(i, sums[i], "ACCUM_THRESHOLD")
                    sums[i] = 0
                    held.discard(i)
            if held and entry[3] >= self.max_updates:
                for i in sorted(held):
                    out.add(i, sums[i], "MAX_UPDATES")
                held.clear()
            if not held:
                free()
            return []
        kept, tiny = [], []
        for i in small:
            (tiny if abs(grads[i]) < self.modes["small_threshold"] else kept).append(i)
        # One draw of the random bits for the beat: every tiny lane is tested on them, and
        # the LFSR steps once after.
        for i in tiny:
            for write in self._tiny_miss(line + i, grads[i], step=False):
                out.add(i, write.value, write.cause)
        if tiny and self.modes["stochastic"]:
            self.lfsr = lfsr_step(self.lfsr)
        if not kept:
            return []
        if self.max_updates == 1:
            for i in kept:
                out.add(i, grads[i], "MAX_UPDATES")
            return []
        sums = [0] * self.lanes
        for i in kept:
            sums[i] = grads[i]
        return self._allocate(line, sums, set(kept))

    # -- the whole-line rule --------------------------------------------------------------

    def _whole_line(self, line, grads, lanes, thresholds):
        """A beat under the whole-line rule (see the module's description): its line writes."""
        direct = {i for i in lanes if abs(grads[i]) >= thresholds[i]}
        small = [i for i in lanes if i not in direct]
        entry, free = self._find(line)
        if entry is None:
            return self._whole_line_miss(line, grads, direct, small)
        sums, held = entry[1], entry[2]    # sums[i] == 0 where lane i holds nothing
        new = {i: sums[i] + grads[i] for i in small}
        crossed = {i for i in small if abs(new[i]) >= thresholds[i] or not self._fits(new[i])}
        fills = entry[3] + 1 >= self.max_updates
        if not (direct or crossed or fills):
            for i in small:
                sums[i] = new[i]
                held.add(i)
            entry[3] += 1
            return []
        out, left = _Line(self.lanes), {}
        for i in sorted(held | set(lanes)):
            if i in direct:
                if self._fits(sums[i] + grads[i]):
                    out.add(i, sums[i] + grads[i], "DIRECT")
                else:           # the gradient alone; the held sum stays
                    out.add(i, grads[i], "DIRECT")
                    left[i] = sums[i]
            elif i in small and not self._fits(new[i]):
                out.add(i, sums[i], "ACCUM_THRESHOLD")    # the held sum; the gradient stays
                left[i] = grads[i]
            else:
                value = new[i] if i in small else sums[i]
                out.add(i, value, "ACCUM_THRESHOLD" if i in crossed else
                        "MAX_UPDATES" if fills else "LINE")
        if left:    # the line stays, holding what did not fit, as updated once
            entry[1] = [left.get(i, 0) for i in range(self.lanes)]
            entry[2], entry[3] = set(left), 1
        else:
            free()
        return out.write(line)

    def _whole_line_miss(self, line, grads, direct, small):
        """A beat that missed, under the whole-line rule: its line writes."""
        tiny = [i for i in small if abs(grads[i]) < self.modes["small_threshold"]]
        kept = [i for i in small if i not in tiny]
        out = _Line(self.lanes)
        if direct or (kept and self.max_updates == 1):
            for i in sorted(direct | set(small)):
                out.add(i, grads[i], "DIRECT" if i in direct else
                        "MAX_UPDATES" if i in kept and self.max_updates == 1 else "LINE")
        else:
            for i in tiny:      # one draw for the beat's tiny lanes
                for write in self._tiny_miss(line + i, grads[i], step=False,
                                             level=self._whole_line_level):
                    out.add(i, write.value, write.cause)
            if any(cause is not None for cause in out.causes):
                for i in kept:
                    out.add(i, grads[i], "LINE")
                kept = []
        if tiny and self.modes["stochastic"]:
            self.lfsr = lfsr_step(self.lfsr)
        writes = out.write(line)
        if writes or not kept:
            return writes
        sums = [0] * self.lanes
        for i in kept:
            sums[i] = grads[i]
        return self._allocate(line, sums, set(kept))

    @property
    def ema_judged(self):
        """The EMA a beat is judged by now (outside ``ema_per_step``): with one lane the EMA;
        on lines, the EMA before its last :data:`~design.params.EMA_LINE_LAG` updates."""
        return self.ema if self.lanes == 1 else self._ema_recent[0]

    @property
    def ema_threshold(self):
        """The EMA mode's threshold now: ``clamp(scale * EMA, ema_min, ema_max)``, of
        :attr:`ema_judged` (or of the EMA latched at the last flush, ``ema_per_step``)."""
        if self.lanes == 1:
            return super().ema_threshold
        ema = self.ema_latched if self.modes["ema_per_step"] else self.ema_judged
        candidate = (ema * self.modes["ema_scale"]) >> (self.ema_fraction_bits +
                                                        EMA_SCALE_FRACTION_BITS)
        return (self.modes["ema_max"] if candidate > self.modes["ema_max"] else
                self.modes["ema_min"] if candidate < self.modes["ema_min"] else candidate)

    def _update_ema_by_beat(self, grads):
        """One EMA update for the beat's ``k`` lanes outside the bypass windows, each weighing
        ``1 / lanes`` of one gradient's update (an adder tree, a multiply by ``k <= lanes`` and
        a shift in hardware, where ``k`` updates in a row would chain ``k`` adders in the EMA's
        loop). The EMA keeps ``log2(lanes)`` more fraction bits (:attr:`ema_fraction_bits`),
        so that the smaller step does not round away::

            ema += ((sum(|g|) << F) - k * ema) >> (ema_shift + log2(lanes)),  F = 8 + log2(lanes)

        With one lane it is :meth:`ReferenceModel._update_ema`; with every lane in, it moves
        the EMA toward the beat's mean ``|g|`` by one gradient's step."""
        if not grads:
            return
        diff = (sum(abs(g) for g in grads) << self.ema_fraction_bits) - len(grads) * self.ema
        self.ema += diff >> (self.modes["ema_shift"] + self._lane_bits)
        self._ema_recent = self._ema_recent[1:] + [self.ema]

    @property
    def ema_fraction_bits(self):
        """Fraction bits of :attr:`ema`: ``8 + log2(lanes)``."""
        return ema_fraction_bits(self.lanes)

    @property
    def _lane_bits(self):
        return self.lanes.bit_length() - 1

    def _find(self, line):
        """The entry of ``line`` (``None`` on a miss) and a function that frees it."""
        if self.sets is None:
            return self._entries.get(line), lambda: self._entries.pop(line)
        index, tag = self._index_tag(line)
        row = self._rows[index]
        for way, entry in enumerate(row):
            if entry is not None and entry[0] == tag:
                return entry, lambda way=way: row.__setitem__(way, None)
        return None, None

    def _index_tag(self, line):
        number = line // self.lanes
        return number % self.sets, number // self.sets

    def _allocate(self, line, sums, held):
        if self.sets is None:
            self._entries[line] = [None, sums, held, 1]
            return []
        index, tag = self._index_tag(line)
        row = self._rows[index]
        new = [tag, sums, held, 1]
        if None in row:
            row[row.index(None)] = new
            return []
        victim = self._victim[index]
        old = row[victim]
        row[victim] = new
        self._victim[index] = (victim + 1) % self.ways
        return _held_write(self._line(index, old[0]), old[1], old[2], self.lanes, "EVICTION")

    def flush(self):
        """The flush barrier: write every held line out, set by set, lowest way first (see
        :meth:`model.ReferenceModel.flush` for the end of the step)."""
        self._end_step()
        writes = [write for line, (_, sums, held, _) in self._held_lines()
                  for write in _held_write(line, sums, held, self.lanes, "FLUSH")]
        if self.sets is None:
            self._entries.clear()
        else:
            self._rows = [[None] * self.ways for _ in range(self.sets)]
        return writes

    def write(self, addr, grad, threshold):
        """One gradient as a beat with one lane (any ``lanes``), checked as that beat; returns
        its line writes."""
        line = addr - addr % self.lanes
        grads = [0] * self.lanes
        grads[addr - line] = grad
        return self.write_line(line, grads, 1 << (addr - line), threshold)

    def _run_op(self, kind, op):
        if kind == "line":
            return self.write_line(*op[1:])
        return super()._run_op(kind, op)


def _held_write(line, sums, held, lanes, cause):
    out = _Line(lanes)
    for i in sorted(held):
        out.add(i, sums[i], cause)
    return out.write(line)
