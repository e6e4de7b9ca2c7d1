"""Reference model of the gradient compressor's policy, with no notion of cycles.

It makes the same decisions as the RTL (same victim choice, same free-way choice, same scan
order on flush), so for the same gradients, thresholds and flush points it returns the same DRAM
writes in the same order. Tests compare the RTL with it write by write; the bandwidth reports
use it as a quick oracle (``sets=None`` gives an unbounded L1 that never evicts).

``whole_line=True`` runs the whole-line rule instead (model/lines.py describes it for lines of
any width; this is its one-lane case, which ``design.L1Accumulator(whole_line=True)`` decides
by, write for write (tests/test_l1_whole_line.py), and so ``GradientCompressor(whole_line=True)``).
It is
the policy
above but in two places:

* a direct gradient that hits a held entry is written with the held sum added, as one record,
  and the entry is freed (the seed's policy writes the gradient alone and the entry keeps
  waiting);
* every value written fits ``grad_width`` bits, the gradients' own format: where the held sum
  plus the gradient would not fit, a direct gradient is written alone and the sum stays held,
  and a small gradient writes the held sum and is held in its place (either way the entry
  stays, as updated once); the stochastic mode rounds to ``min(small_threshold,
  2**(grad_width-1) - 1)``.

So a gradient causes at most one write, and writes sent plus entries held never exceed the
gradients taken. It makes the decisions of ``LineModel(lanes=1, whole_line=True)``, write for
write (tests/test_whole_line_one_lane.py).
"""

from collections import namedtuple

from gradient_compressor.design.params import (DEFAULTS, WHOLE_LINE, LFSR_WIDTH, LFSR_TAPS, LFSR_RESET,
                                               EMA_FRACTION_BITS, EMA_SCALE_FRACTION_BITS,
                                               BYPASS_WINDOWS, BYPASS_WINDOWS_MAX,
                                               DISCARD_COUNT_WIDTH, check_bool, check_int,
                                               check_l1_geometry,
                                               Config, check_modes, modes_off)
from .ops import OpCheck, operations

__all__ = ["ReferenceModel", "Write", "Discard", "CAUSES", "lfsr_step"]

#: Write causes, with the names of :class:`design.Cause` (in its order); ``LINE`` (a pending
#: value carried by a line write that another lane caused) only under the whole-line rule
#: (:class:`model.LineModel`'s ``whole_line``; ``GradientCompressor(lanes=N, whole_line=True)``,
#: ``L1Accumulator(whole_line=True)``).
CAUSES = ("DIRECT", "ACCUM_THRESHOLD", "MAX_UPDATES", "EVICTION", "FLUSH", "STOCHASTIC", "LINE")

#: A write toward DRAM: add ``value`` at ``addr``; ``cause`` is one of :data:`CAUSES`.
Write = namedtuple("Write", "addr value cause")

#: An accounted discard of the dual threshold: ``error = grad - written`` at ``addr`` (the whole
#: gradient in mode ``drop``, the rounding error in mode ``stochastic``).
Discard = namedtuple("Discard", "addr error")


def lfsr_step(state):
    """One step of the stochastic mode's LFSR (:data:`design.params.LFSR_TAPS`)."""
    return (state >> 1) ^ (LFSR_TAPS if state & 1 else 0)


class ReferenceModel:
    """The compressor's policy on a sequence of gradients and flushes.

    Parameters
    ----------
    sets, ways : int or None
        L1 geometry (powers of two, as for the RTL). ``sets=None`` models an unbounded,
        fully associative L1 that never evicts (the oracle of the bandwidth reports).
    max_updates : int
        Updates after which an entry is written out.
    grad_width : int
        Gradient width; gradients must lie in ``[-2**(grad_width-1), 2**(grad_width-1))``.
    addr_width : int
        Address width: addresses lie in ``[0, 2**addr_width)``.
    bypass_windows : int
        Number of bypass windows (mode settings ``bypass__<i>__base``, ...).
    whole_line : bool
        Run the whole-line rule (see the module's description): every value written fits
        ``grad_width`` bits and a direct gradient carries its address's held sum (as
        ``L1Accumulator(whole_line=True)`` does).

    Run-time modes (:mod:`design.modes`) are set with :meth:`set_modes` (or a ``("modes",
    {...})`` operation), all off at first; the LFSR is seeded with :meth:`seed` (or
    ``("seed", value)``). Accounted discards are kept in :attr:`discards` (all of them, in
    order) and in :attr:`discard_count` / :attr:`discard_sum` (the running totals of the step:
    they hold after :meth:`flush` and the next gradient clears them, as in the RTL;
    :attr:`step_discards` keeps their values at each flush).
    """

    def __init__(self, *, sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], grad_width=DEFAULTS["grad_width"],
                 addr_width=DEFAULTS["addr_width"], bypass_windows=BYPASS_WINDOWS,
                 whole_line=WHOLE_LINE):
        # The RTL's own checks (design.params), except that sets=None means unbounded.
        check_int("addr_width", addr_width, minimum=1)
        if sets is not None:
            check_l1_geometry(sets, ways, addr_width=addr_width, lanes=self.lanes)
        check_int("max_updates", max_updates, minimum=1)
        check_int("grad_width", grad_width, minimum=2)
        check_int("bypass_windows", bypass_windows, minimum=0, maximum=BYPASS_WINDOWS_MAX)
        self.whole_line = check_bool("whole_line", whole_line)
        self.sets, self.ways = sets, ways
        self.max_updates = max_updates
        self.grad_width, self.addr_width = grad_width, addr_width
        self.bypass_windows = bypass_windows
        #: The checks of the operations (:mod:`model.ops`: the simulators' checks).
        self.check = OpCheck(kinds=self.OPERATIONS, lanes=self.lanes, addr_width=addr_width,
                             grad_width=grad_width, bypass_windows=bypass_windows)
        self.modes = modes_off(bypass_windows)
        self.lfsr = LFSR_RESET
        self.ema = 0           # EMA of |grad| with EMA_FRACTION_BITS fraction bits
        self.ema_latched = 0   # its value at the last flush barrier
        self.discards = []
        self.discard_count, self.discard_sum = 0, 0
        self.step_discards = []
        self._clear_discards = False   # a flush ended the step: the next gradient clears
        if sets is None:
            self._entries = {}                                  # addr -> [sum, count]
        else:
            self._rows = [[None] * ways for _ in range(sets)]   # way -> [tag, sum, count]
            self._victim = [0] * sets

    #: The :class:`~design.params.Config` parameters the model takes.
    CONFIG_PARAMS = ("sets", "ways", "max_updates", "grad_width", "addr_width", "bypass_windows")

    @property
    def grad_min(self):
        """The least gradient (and value written): ``-2**(grad_width-1)``."""
        return self.check.grad_min

    @property
    def grad_max(self):
        """The greatest gradient (and value written): ``2**(grad_width-1) - 1``."""
        return self.check.grad_max

    def _fits(self, value):
        """Whether ``value`` fits ``grad_width`` signed bits (the whole-line rule writes no
        other)."""
        return self.grad_min <= value <= self.grad_max

    @property
    def _whole_line_level(self):
        """The value the stochastic mode rounds a tiny gradient to under the whole-line rule:
        ``small_threshold``, at most :attr:`grad_max` so that it fits."""
        return min(self.modes["small_threshold"], self.grad_max)

    #: Gradients per beat (:class:`~model.LineModel` takes lines of several).
    lanes = 1
    #: The operations :meth:`run` takes (:mod:`model.ops`).
    OPERATIONS = operations(1)

    @classmethod
    def of(cls, config=None, /, *, whole_line=None, **params):
        """The model of a compressor configuration: ``config`` (a
        :class:`~design.params.Config`, a mapping of some of its parameters, or ``None`` for
        the defaults) with ``params`` in place of its own, checked as the RTL checks it;
        ``whole_line`` as for the constructor, where given (one lane's RTL does not take it
        yet; the configuration's own, on lines)."""
        config = Config.of(config, **params)
        args = {name: config[name] for name in cls.CONFIG_PARAMS}
        args["whole_line"] = config.whole_line if whole_line is None else whole_line
        return cls(**args)

    @property
    def valid_count(self):
        """Number of entries held."""
        if self.sets is None:
            return len(self._entries)
        return sum(entry is not None for row in self._rows for entry in row)

    def held(self):
        """``{addr: sum}`` of what L1 holds."""
        if self.sets is None:
            return {addr: entry[0] for addr, entry in self._entries.items()}
        return {tag * self.sets + index: entry[1]
                for index, row in enumerate(self._rows)
                for entry in row if entry is not None
                for tag in (entry[0],)}

    # -- run-time modes -------------------------------------------------------------------

    def set_modes(self, **modes):
        """Change run-time mode settings (keys of :func:`design.params.modes_off`); those not
        given keep their values. They apply to the gradients that follow."""
        check_modes(modes, addr_width=self.addr_width, grad_width=self.grad_width,
                    bypass_windows=self.bypass_windows)
        self.modes.update(modes)

    def seed(self, value):
        """Load the LFSR (the RTL does so only while idle: L1 must be empty)."""
        self.check.seed(value)
        if self.valid_count:
            raise ValueError("the LFSR is seeded only while the compressor is idle: "
                             "seed at the start or after a flush")
        self.lfsr = value or LFSR_RESET

    #: Fraction bits of :attr:`ema`.
    ema_fraction_bits = EMA_FRACTION_BITS

    @property
    def ema_threshold(self):
        """The EMA mode's threshold now: ``clamp(scale * EMA, ema_min, ema_max)``."""
        ema = self.ema_latched if self.modes["ema_per_step"] else self.ema
        candidate = (ema * self.modes["ema_scale"]) >> (self.ema_fraction_bits +
                                                        EMA_SCALE_FRACTION_BITS)
        if candidate > self.modes["ema_max"]:
            return self.modes["ema_max"]
        if candidate < self.modes["ema_min"]:
            return self.modes["ema_min"]
        return candidate

    def in_bypass_window(self, addr):
        """Whether ``addr`` lies in an enabled bypass window (``base <= addr <= limit``)."""
        return any(self.modes[f"bypass__{i}__enable"] and
                   self.modes[f"bypass__{i}__base"] <= addr <= self.modes[f"bypass__{i}__limit"]
                   for i in range(self.bypass_windows))

    def _update_ema(self, grad):
        diff = (abs(grad) << EMA_FRACTION_BITS) - self.ema
        self.ema += diff >> self.modes["ema_shift"]    # floor, as an arithmetic shift

    def _tiny_miss(self, addr, grad, step=True, level=None):
        """Dual threshold: a tiny gradient that missed in L1 is dropped or rounded to
        ``sign(grad) * level`` (``small_threshold`` unless given; on the LFSR's bits as they
        are; they step after it unless ``step`` is false)."""
        small = self.modes["small_threshold"] if level is None else level
        written, writes = 0, []
        if self.modes["stochastic"]:
            bits = min(self.grad_width, LFSR_WIDTH)
            random = self.lfsr & ((1 << bits) - 1)
            if step:
                self.lfsr = lfsr_step(self.lfsr)
            if random * small < abs(grad) << bits:     # probability ~ |grad| / small
                written = small if grad > 0 else -small
                writes = [Write(addr, written, "STOCHASTIC")]
        self.discards.append(Discard(addr, grad - written))
        self.discard_count = (self.discard_count + 1) % 2 ** DISCARD_COUNT_WIDTH
        self.discard_sum += grad - written
        return writes

    # -- the step's bookkeeping, shared with model.lines ----------------------------------

    def _start_of_input(self):
        """An input accepted: after a flush, it clears the step's running discard totals."""
        if self._clear_discards:
            self.discard_count, self.discard_sum = 0, 0
            self._clear_discards = False

    def _end_step(self):
        """The flush barrier ends the step: the EMA is latched, the discard totals kept."""
        self.ema_latched = self.ema
        self.step_discards.append((self.discard_count, self.discard_sum))
        self._clear_discards = True

    # -- the policy -----------------------------------------------------------------------

    def write(self, addr, grad, threshold):
        """Take one gradient; return the list (empty or of one) of writes it causes.

        ``threshold`` is the ``threshold`` input; in the EMA mode the EMA's threshold is in
        force instead, and in a bypass window 0 (every gradient is written through)."""
        self.check.gradient(addr, grad, threshold)
        self._start_of_input()
        if self.modes["ema_enable"]:
            threshold = self.ema_threshold
        if self.in_bypass_window(addr):
            threshold = 0
        else:
            self._update_ema(grad)
        if self.whole_line:
            return self._write_whole_line(addr, grad, threshold)
        if abs(grad) >= threshold:
            return [Write(addr, grad, "DIRECT")]
        if self.sets is None:
            return self._write_unbounded(addr, grad, threshold)

        index, tag = addr % self.sets, addr // self.sets
        row = self._rows[index]
        for way, entry in enumerate(row):
            if entry is not None and entry[0] == tag:
                entry[1] += grad
                entry[2] += 1
                if abs(entry[1]) >= threshold:
                    row[way] = None
                    return [Write(addr, entry[1], "ACCUM_THRESHOLD")]
                if entry[2] >= self.max_updates:
                    row[way] = None
                    return [Write(addr, entry[1], "MAX_UPDATES")]
                return []
        if abs(grad) < self.modes["small_threshold"]:
            return self._tiny_miss(addr, grad)
        if None in row and self.max_updates == 1:
            # full at once: written instead of held (such an L1 never holds an entry, so a
            # way is always free)
            return [Write(addr, grad, "MAX_UPDATES")]
        return self._allocate_entry(addr, grad)

    def _allocate_entry(self, addr, grad):
        """Allocate an entry for ``addr`` holding ``grad``, updated once: the lowest free way
        of its set, else the set's round-robin victim, which is written (``EVICTION``).
        Returns the writes (empty, or the victim's)."""
        if self.sets is None:
            self._entries[addr] = [grad, 1]
            return []
        index, tag = addr % self.sets, addr // self.sets
        row = self._rows[index]
        if None in row:
            row[row.index(None)] = [tag, grad, 1]
            return []
        victim = self._victim[index]
        old_tag, old_sum, _ = row[victim]
        row[victim] = [tag, grad, 1]
        self._victim[index] = (victim + 1) % self.ways
        return [Write(old_tag * self.sets + index, old_sum, "EVICTION")]

    def _held_entry(self, addr):
        """The entry holding ``addr`` and a function that frees it, or ``(None, None)``. An
        entry is a list ending in its sum and its count of updates (``entry[-2:]``: the
        bounded L1's entries begin with their tag, the unbounded one's do not)."""
        if self.sets is None:
            entry = self._entries.get(addr)
            return (None, None) if entry is None else (entry, lambda: self._entries.pop(addr))
        index, tag = addr % self.sets, addr // self.sets
        row = self._rows[index]
        for way, entry in enumerate(row):
            if entry is not None and entry[0] == tag:
                return entry, lambda: row.__setitem__(way, None)
        return None, None

    def _write_whole_line(self, addr, grad, threshold):
        """One gradient under the whole-line rule (see the module's description), judged
        against ``threshold`` (the one in force); returns its writes, at most one."""
        direct = abs(grad) >= threshold
        entry, free = self._held_entry(addr)
        if entry is None:
            # A miss: as the seed's policy, but a rounded tiny gradient fits grad_width bits.
            if direct:
                return [Write(addr, grad, "DIRECT")]
            if abs(grad) < self.modes["small_threshold"]:
                return self._tiny_miss(addr, grad, level=self._whole_line_level)
            if self.max_updates == 1:
                return [Write(addr, grad, "MAX_UPDATES")]
            return self._allocate_entry(addr, grad)
        held, updates = entry[-2:]
        total = held + grad
        if not self._fits(total):
            # One value of grad_width bits cannot carry both: one leaves, the other stays
            # held, the entry as updated once (a direct gradient leaves, a small one waits).
            if direct:
                entry[-1] = 1
                return [Write(addr, grad, "DIRECT")]
            entry[-2:] = [grad, 1]
            return [Write(addr, held, "ACCUM_THRESHOLD")]
        # The held sum rides along with a direct gradient; a small one adds as in the seed's
        # policy.
        cause = ("DIRECT" if direct else
                 "ACCUM_THRESHOLD" if abs(total) >= threshold else
                 "MAX_UPDATES" if updates + 1 >= self.max_updates else None)
        if cause is None:
            entry[-2:] = [total, updates + 1]
            return []
        free()
        return [Write(addr, total, cause)]

    def _write_unbounded(self, addr, grad, threshold):
        if addr not in self._entries and abs(grad) < self.modes["small_threshold"]:
            return self._tiny_miss(addr, grad)
        entry = self._entries.setdefault(addr, [0, 0])
        entry[0] += grad
        entry[1] += 1
        if abs(entry[0]) >= threshold:
            del self._entries[addr]
            return [Write(addr, entry[0], "ACCUM_THRESHOLD")]
        if entry[1] >= self.max_updates:
            del self._entries[addr]
            return [Write(addr, entry[0], "MAX_UPDATES")]
        return []

    def flush(self):
        """The flush barrier: write every held entry out, set by set, lowest way first.

        It also ends the step: the EMA's value is latched (for ``ema_per_step``) and the running
        discard totals are kept in :attr:`step_discards` (the next gradient clears them)."""
        self._end_step()
        if self.sets is None:
            writes = [Write(addr, entry[0], "FLUSH") for addr, entry in self._entries.items()]
            self._entries.clear()
            return writes
        writes = []
        for index, row in enumerate(self._rows):
            for way, entry in enumerate(row):
                if entry is not None:
                    writes.append(Write(entry[0] * self.sets + index, entry[1], "FLUSH"))
                    row[way] = None
        return writes

    def run(self, ops):
        """Run a sequence of operations and return all the writes: ``("grad", addr, grad,
        threshold)``, ``("flush",)``, ``("modes", {setting: value})``, ``("seed", value)`` and,
        on a :class:`~model.LineModel`, ``("line", line, grads, mask, threshold)``
        (:attr:`OPERATIONS`, :mod:`model.ops`). Each operation is checked (:attr:`check`) as
        it is taken: those before a bad one are done, and it raises there."""
        writes = []
        for op in ops:
            writes += self._run_op(self.check.form(op), op)
        return writes

    def _run_op(self, kind, op):
        """The writes of one operation of the right form (its fields checked as it is taken)."""
        if kind == "grad":
            return self.write(*op[1:])
        if kind == "flush":
            return self.flush()
        if kind == "modes":
            self.set_modes(**op[1])
        else:
            self.seed(op[1])
        return []
