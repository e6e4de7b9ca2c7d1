"""Reference model of the gradient compressor's policy, with no notion of cycles.

It makes the same decisions as the RTL (same victim choice, same free-way choice, same scan
order on flush), so for the same gradients, thresholds and flush points it returns the same DRAM
writes in the same order. Tests compare the RTL with it write by write; the bandwidth reports
use it as a quick oracle (``sets=None`` gives an unbounded L1 that never evicts).
"""

from collections import namedtuple

from design.params import DEFAULTS, check_int, check_power_of_two

__all__ = ["ReferenceModel", "Write", "CAUSES"]

#: Write causes, with the names of :class:`design.Cause`.
CAUSES = ("DIRECT", "ACCUM_THRESHOLD", "MAX_UPDATES", "EVICTION", "FLUSH")

#: A write toward DRAM: add ``value`` at ``addr``; ``cause`` is one of :data:`CAUSES`.
Write = namedtuple("Write", "addr value cause")


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
    """

    def __init__(self, *, sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], grad_width=DEFAULTS["grad_width"]):
        # The RTL's own checks (design.params), except that sets=None means unbounded.
        if sets is not None:
            check_power_of_two("sets", sets)
            check_power_of_two("ways", ways)
        check_int("max_updates", max_updates, minimum=1)
        check_int("grad_width", grad_width, minimum=2)
        self.sets, self.ways = sets, ways
        self.max_updates = max_updates
        self.grad_min, self.grad_max = -2 ** (grad_width - 1), 2 ** (grad_width - 1) - 1
        self.threshold_max = 2 ** grad_width - 1
        if sets is None:
            self._entries = {}                                  # addr -> [sum, count]
        else:
            self._rows = [[None] * ways for _ in range(sets)]   # way -> [tag, sum, count]
            self._victim = [0] * sets

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

    def write(self, addr, grad, threshold):
        """Take one gradient; return the list (empty or of one) of writes it causes."""
        if not self.grad_min <= grad <= self.grad_max:
            raise ValueError(f"gradient {grad} is outside [{self.grad_min}, {self.grad_max}]")
        if not 0 <= threshold <= self.threshold_max:
            raise ValueError(f"threshold {threshold} is outside [0, {self.threshold_max}]")
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
        if None in row:
            if self.max_updates == 1:
                return [Write(addr, grad, "MAX_UPDATES")]
            row[row.index(None)] = [tag, grad, 1]
            return []
        victim = self._victim[index]
        old_tag, old_sum, _ = row[victim]
        row[victim] = [tag, grad, 1]
        self._victim[index] = (victim + 1) % self.ways
        return [Write(old_tag * self.sets + index, old_sum, "EVICTION")]

    def _write_unbounded(self, addr, grad, threshold):
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
        """The flush barrier: write every held entry out, set by set, lowest way first."""
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
        """Run a sequence of ``("grad", addr, grad, threshold)`` and ``("flush",)`` operations
        and return all the writes."""
        writes = []
        for op in ops:
            if op[0] == "grad":
                writes += self.write(*op[1:])
            elif op[0] == "flush":
                writes += self.flush()
            else:
                raise ValueError(f"unknown operation {op!r}")
        return writes
