"""The operations a run is made of, and their one check.

The reference models (:class:`~model.ReferenceModel`, :class:`~model.LineModel`) and both
simulators (:func:`simulation.driver.simulate`, :func:`simulation.cxxrtl.simulate_compiled`)
take the same operations:

* ``("grad", addr, grad, threshold)``: one gradient;
* ``("line", line, grads, mask, threshold)``: a beat on lines of ``lanes`` gradients (lane
  ``i`` is the gradient at ``line + i``, taken if bit ``i`` of ``mask`` is set);
* ``("flush",)``: the flush barrier;
* ``("modes", {setting: value})``: run-time mode settings (keys of
  :func:`design.params.modes_off`);
* ``("seed", value)``: load the stochastic mode's LFSR.

A port keeps the low bits of a value, so a simulator would wrap a gradient, an address or a
threshold that does not fit, and on lines round a line address down or drop the lanes of a
mask wider than the line. :class:`OpCheck` refuses such an operation instead, with a
:class:`ValueError` that names it (a :class:`TypeError` for a line, a mask or a setting that
is not an integer). The models check each operation as they take it (those before a bad one
are done; :class:`~model.LineModel` checks a gradient as the beat of one lane it takes it as),
the simulators every operation of a run before its first cycle, with this one class, so they
refuse the same operations with the same messages.
"""

from gradient_compressor.design.params import (BYPASS_WINDOWS, DEFAULTS, LFSR_WIDTH, check_int,
                                               check_modes)

__all__ = ["FIELDS", "operations", "OpCheck", "check_ops"]

#: Each operation's fields after its kind.
FIELDS = {"grad": ("addr", "grad", "threshold"),
          "line": ("line", "grads", "mask", "threshold"),
          "flush": (),
          "modes": ("settings",),
          "seed": ("value",)}


def operations(lanes=1):
    """The operations the compressor of ``lanes`` lanes takes: gradients (on lines, beats),
    flushes, mode settings and seeds."""
    return ("grad" if lanes == 1 else "line", "flush", "modes", "seed")


class OpCheck:
    """The checks of the operations of one configuration: call it on an operation, or use
    :meth:`all`, :meth:`gradient`, :meth:`beat` and :meth:`seed`.

    Parameters
    ----------
    kinds : tuple of str
        The operations taken (of :data:`FIELDS`); any other is unknown.
    lanes : int
        Gradients per beat.
    addr_width, grad_width, bypass_windows : int
        The configuration's (:class:`design.params.Config`): addresses in
        ``[0, 2**addr_width)``, signed gradients and unsigned thresholds of ``grad_width``
        bits, the mode settings of ``bypass_windows`` windows.
    """

    def __init__(self, *, kinds=tuple(FIELDS), lanes=1, addr_width=DEFAULTS["addr_width"],
                 grad_width=DEFAULTS["grad_width"], bypass_windows=BYPASS_WINDOWS):
        self.kinds, self.lanes = kinds, lanes
        self.addr_width, self.grad_width = addr_width, grad_width
        self.bypass_windows = bypass_windows
        self.addr_max = 2 ** addr_width - 1
        self.grad_min, self.grad_max = -2 ** (grad_width - 1), 2 ** (grad_width - 1) - 1
        self.threshold_max = 2 ** grad_width - 1

    def all(self, ops):
        """Check every operation of ``ops`` and return them as a list (an error names the first
        bad one)."""
        ops = ops if isinstance(ops, list) else list(ops)
        for op in ops:
            self(op)
        return ops

    def form(self, op):
        """Check an operation's kind and length; return its kind."""
        kind = op[0] if isinstance(op, (tuple, list)) and op else None
        if kind not in self.kinds:
            raise ValueError(f"unknown operation {op!r}")
        if len(op) != 1 + len(FIELDS[kind]):
            form = ", ".join([repr(kind), *FIELDS[kind]]) + ("" if FIELDS[kind] else ",")
            raise ValueError(f"a {kind!r} operation is ({form}), not {op!r}")
        return kind

    def __call__(self, op):
        """Check one operation: its form and its fields."""
        kind = self.form(op)
        if kind == "grad":
            self.gradient(op[1], op[2], op[3])
        elif kind == "line":
            self.beat(op[1], op[2], op[3], op[4])
        elif kind == "modes":
            check_modes(op[1], addr_width=self.addr_width, grad_width=self.grad_width,
                        bypass_windows=self.bypass_windows)
        elif kind == "seed":
            self.seed(op[1])

    def gradient(self, addr, grad, threshold):
        """Check a gradient operation's fields."""
        if not 0 <= addr <= self.addr_max:
            raise ValueError(f"address {addr} is outside [0, {self.addr_max}]")
        if not self.grad_min <= grad <= self.grad_max:
            raise ValueError(f"gradient {grad} is outside [{self.grad_min}, {self.grad_max}]")
        self._threshold(threshold)

    def beat(self, line, grads, mask, threshold):
        """Check a beat's fields: a line address (a multiple of ``lanes``), exactly ``lanes``
        gradients (those in the mask in range), a mask of ``lanes`` bits, a threshold."""
        check_int("line", line, minimum=0, maximum=self.addr_max)
        if line % self.lanes:
            raise ValueError(f"line address {line} is not a multiple of lanes ({self.lanes})")
        check_int("mask", mask, minimum=0, maximum=2 ** self.lanes - 1)
        if len(grads) != self.lanes:
            raise ValueError(f"a beat has {self.lanes} gradients, not {len(grads)}")
        for i, grad in enumerate(grads):
            if mask >> i & 1 and not self.grad_min <= grad <= self.grad_max:
                raise ValueError(f"gradient {grad} (lane {i}) is outside "
                                 f"[{self.grad_min}, {self.grad_max}]")
        self._threshold(threshold)

    @staticmethod
    def seed(value):
        """Check an LFSR seed (:data:`design.params.LFSR_WIDTH` bits, unsigned)."""
        check_int("lfsr_seed", value, minimum=0, maximum=2 ** LFSR_WIDTH - 1)

    def _threshold(self, threshold):
        if not 0 <= threshold <= self.threshold_max:
            raise ValueError(f"threshold {threshold} is outside [0, {self.threshold_max}]")


def check_ops(ops, **config):
    """Check every operation of ``ops`` for a configuration (:class:`OpCheck`'s parameters)
    and return them as a list: an error names the first bad one."""
    return OpCheck(**config).all(ops)
