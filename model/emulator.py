"""A fast functional emulator of the compressor's policy, bit-exact with the reference models.

:class:`Emulator` takes the place of :class:`model.ReferenceModel` (one gradient at a time) and
:class:`LineEmulator` that of :class:`model.LineModel` (beats of ``lanes`` gradients): the same
constructor parameters, checked with :mod:`design.params`' checks, the same operations
(``("grad", addr, grad, threshold)``, ``("line", line, grads, mask, threshold)``,
``("flush",)``, ``("modes", {...})``, ``("seed", value)``), the same writes (cause for cause, in
order), the same accounted discards, step totals, EMA and LFSR state. Beside the models'
methods they take NumPy arrays (:meth:`LineEmulator.run_gradients`,
:meth:`LineEmulator.run_beats`, :meth:`LineEmulator.run_trace`) and return the writes as
arrays (:class:`WriteArrays`); that is the fast path, tens of millions of gradients per second
on one core, where the models run about a million.

Why a compiled kernel
---------------------
Every L1 set is independent of the others given the address, but within a set the policy is
sequential: each gradient's outcome (hit, allocation, victim, threshold crossing) depends on
every earlier gradient to that set, and the EMA threshold, the LFSR and the discard totals
chain *all* gradients together whatever their set. A NumPy formulation would have to
vectorise across sets and iterate within them, and the EMA mode would serialise it again. A
small C++ kernel (``model/emulator.cc``) that runs the models' decisions one beat after the
other is both the simplest to keep bit-exact (it reads like the models, line for line) and
fast: a beat is a handful of compares on one L1 row that stays in cache. It is compiled on
first use with the machine's ``g++`` (:data:`model.native.CXX`, ``$CXX``) into a shared
library cached beside the compiled simulators (:func:`model.native.default_cache_dir`,
keyed by a hash of the source, the compiler command and its version) and called through
:mod:`ctypes` on NumPy arrays; it is built without ``-march=native`` so that a cache shared
between machines stays valid. Without a compiler it raises
:class:`model.native.CompilerMissing`.

The Python side checks what the models check (parameters, mode settings, seeds) and words the
kernel's errors (a gradient, threshold, line or mask out of range; a seed while L1 holds
entries) as the models do. Differences, deliberate:

* addresses must lie in ``[0, 2**addr_width)`` (``ReferenceModel`` takes any integer); at most
  ``addr_width = 64`` and ``grad_width = 32`` (the kernel's integers; a step's
  ``discard_sum`` is kept in 64 bits, which more than 2**31 discards in one step could
  overflow);
* a bad ``("modes", ...)`` or ``("seed", ...)`` setting, a malformed operation, or a value
  that no 64-bit integer holds, raises before any operation of the call runs (the models raise
  when they reach it); a gradient, threshold, line or mask out of range, and a seed while L1
  holds entries, raise where the models do, the operations before them done (through the
  array methods, values of a type wider than the kernel's are checked before it runs).

Checked write for write against the models by ``tests/test_emulator.py`` (every workload, every
mode, lanes 1 to 32, random operation streams) and by
``python -m gradient_compressor.reports.emulator_check --check`` on whole workloads; ``--bench``
measures it (docs/emulator.md).

Example::

    from gradient_compressor.model.emulator import Emulator
    from gradient_compressor.workloads import get_workload

    emulator = Emulator(sets=32, ways=4)
    writes = emulator.run_trace(get_workload("tiny-embed"))    # a WriteArrays
    print(len(writes), len(emulator.discards))
"""

import ctypes
import fcntl
import hashlib
import itertools
import os
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

import numpy as np

from gradient_compressor.design import params as _params
from gradient_compressor.design.params import (DEFAULTS, WHOLE_LINE, MODES_OFF, LFSR_WIDTH, BYPASS_WINDOWS,
                                               check_bool, check_int, check_lanes, check_modes,
                                               check_power_of_two, ema_fraction_bits)
from .reference import CAUSES, Discard, Write
from .lines import LineWrite

__all__ = ["Emulator", "LineEmulator", "WriteArrays", "NO_CAUSE", "KERNEL_SOURCE",
           "load_kernel"]

#: The kernel's C++ source (package data).
KERNEL_SOURCE = Path(__file__).resolve().parent / "emulator.cc"

#: The cause code of a lane outside a line write's mask in :attr:`WriteArrays.causes` (the
#: others index :data:`model.CAUSES`).
NO_CAUSE = 255

#: The run-time mode settings in the kernel's order (its ``SMALL_THRESHOLD`` ... enum).
_KERNEL_MODES = ("small_threshold", "stochastic", "ema_enable", "ema_per_step", "ema_shift",
                 "ema_scale", "ema_min", "ema_max", "bypass__0__base", "bypass__0__limit",
                 "bypass__0__enable", "bypass__1__base", "bypass__1__limit", "bypass__1__enable")
if set(_KERNEL_MODES) != set(MODES_OFF):   # a new mode must be taught to the kernel first
    raise ImportError(f"model.emulator knows the modes {sorted(_KERNEL_MODES)}, design.params "
                      f"has {sorted(MODES_OFF)}: update the emulator's kernel")
_MODE_INDEX = {name: i for i, name in enumerate(_KERNEL_MODES)}

#: The design's constants that the kernel has built in (model/emulator.cc).
_KERNEL_CONSTANTS = {"LFSR_WIDTH": 32, "LFSR_TAPS": 0x80200003, "LFSR_RESET": 1,
                     "EMA_FRACTION_BITS": 8, "EMA_SCALE_FRACTION_BITS": 4,
                     "BYPASS_WINDOWS": 2, "DISCARD_COUNT_WIDTH": 32, "EMA_LINE_LAG": 2}
_changed = {k: getattr(_params, k) for k, v in _KERNEL_CONSTANTS.items()
            if getattr(_params, k) != v}
if _changed:
    raise ImportError(f"design.params changed constants the emulator's kernel has built in: "
                      f"{_changed}: update model/emulator.cc")

# Kernel events (model/emulator.cc), applied before the beat of their position.
_EV_FLUSH, _EV_MODE, _EV_SEED = 1, 2, 3
# Kernel errors.
_ERR_ADDR, _ERR_LINE_ALIGN, _ERR_MASK, _ERR_GRAD, _ERR_THRESHOLD, _ERR_SEED = range(1, 7)
# gc_get's fields.
(_LFSR, _EMA, _EMA_LATCHED, _DISCARD_COUNT, _DISCARD_SUM, _VALID_COUNT, _EMA_THRESHOLD,
 _CLEAR_DISCARDS, _EMA_JUDGED) = range(9)

#: Writes and discards a call's output arrays hold at first, beside one per beat; they grow
#: (doubling) when the kernel finds them too small for a beat's or a flush's worst case.
_SLACK = 1024

_IDLE_MESSAGE = ("the LFSR is seeded only while the compressor is idle: seed at the start or "
                 "after a flush")

_CAUSE_NAMES = list(CAUSES) + [None] * (256 - len(CAUSES))


class _In(ctypes.Structure):
    """The kernel's ``struct In``."""
    _fields_ = [("n", ctypes.c_int64), ("line", ctypes.c_void_p), ("line_bytes", ctypes.c_int64),
                ("grads", ctypes.c_void_p), ("grad_bytes", ctypes.c_int64),
                ("thr", ctypes.c_void_p), ("thr_bytes", ctypes.c_int64),
                ("thr_stride", ctypes.c_int64), ("mask", ctypes.c_void_p),
                ("ne", ctypes.c_int64), ("ev_pos", ctypes.c_void_p),
                ("ev_kind", ctypes.c_void_p), ("ev_a", ctypes.c_void_p),
                ("ev_b", ctypes.c_void_p)]


class _Out(ctypes.Structure):
    """The kernel's ``struct Out``."""
    _fields_ = [("w_line", ctypes.c_void_p), ("w_mask", ctypes.c_void_p),
                ("w_values", ctypes.c_void_p), ("w_causes", ctypes.c_void_p),
                ("nw", ctypes.c_int64), ("w_capacity", ctypes.c_int64),
                ("d_addr", ctypes.c_void_p), ("d_error", ctypes.c_void_p),
                ("nd", ctypes.c_int64), ("d_capacity", ctypes.c_int64),
                ("addr_bytes", ctypes.c_int64), ("value_bytes", ctypes.c_int64),
                ("s_count", ctypes.c_void_p), ("s_sum", ctypes.c_void_p),
                ("ns", ctypes.c_int64), ("s_capacity", ctypes.c_int64),
                ("beat", ctypes.c_int64), ("event", ctypes.c_int64), ("full", ctypes.c_int64),
                ("error", ctypes.c_int64), ("error_lane", ctypes.c_int64)]


# -- building and loading the kernel -----------------------------------------------------------

_kernel = None


def load_kernel(*, verbose=False):
    """The kernel, built on first use and cached.

    The library is kept in ``<cache>/emulator-<hash>/libemulator.so``, ``<cache>`` being
    :func:`model.native.default_cache_dir` (``$GC_CXXRTL_CACHE`` overrides it), the hash over
    the source, the compiler command and the compiler's version
    (:func:`model.native.compiler_version`: a new compiler builds its own, once); a first build
    announces itself on stderr (a few seconds). Later calls in the process return the loaded
    library.

    Parameters
    ----------
    verbose : bool
        Say on stderr how long a build took.

    Returns
    -------
    ctypes.CDLL

    Raises
    ------
    model.native.CompilerMissing
        There is no C++ compiler (``$CXX``, by default ``g++``); its message is one line.
    RuntimeError
        The build failed (the compiler's messages follow).
    """
    global _kernel
    if _kernel is not None:
        return _kernel
    from . import native
    if not native.compiler_available():
        raise native.CompilerMissing(f"no C++ compiler ({native.CXX}) on the path: the "
                                     f"emulator's kernel needs one (e.g. apt-get install g++)")
    source = KERNEL_SOURCE.read_text()
    command = [native.CXX, *native.CXXFLAGS, "-shared", "-fPIC"]
    h = hashlib.sha256()
    for part in (source, " ".join(command), native.compiler_version()):
        h.update(part.encode())
        h.update(b"\0")
    cache = native.default_cache_dir()
    folder = cache / f"emulator-{h.hexdigest()[:20]}"
    library = folder / "libemulator.so"
    if not library.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not library.exists():
                    print(f"building the emulator's kernel (first use: a few seconds; cached "
                          f"in {folder})", file=sys.stderr, flush=True)
                    _compile(command, folder, library, verbose)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    _kernel = _bind(ctypes.CDLL(str(library)))
    return _kernel


def _compile(command, folder, library, verbose):
    fd, partial = tempfile.mkstemp(prefix="libemulator-", suffix=".so", dir=folder)
    os.close(fd)
    try:
        start = time.perf_counter()
        cmd = [*command, str(KERNEL_SOURCE), "-o", partial]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling the emulator's kernel failed ({' '.join(cmd)}):\n"
                               f"{proc.stderr[-4000:]}")
        if verbose:
            print(f"emulator: {command[0]} {time.perf_counter() - start:.1f} s -> {library}",
                  file=sys.stderr)
        os.replace(partial, library)   # atomic: a reader sees no half-written library
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _bind(lib):
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.gc_new.restype = ptr
    lib.gc_new.argtypes = [i64] * 7
    lib.gc_free.restype = None
    lib.gc_free.argtypes = [ptr]
    lib.gc_run.restype = i64
    lib.gc_run.argtypes = [ptr, ctypes.POINTER(_In), ctypes.POINTER(_Out)]
    lib.gc_get.restype = i64
    lib.gc_get.argtypes = [ptr, i64]
    lib.gc_get_mode.restype = i64
    lib.gc_get_mode.argtypes = [ptr, i64]
    lib.gc_held.restype = i64
    lib.gc_held.argtypes = [ptr, i64, ptr, ptr, ptr]
    return lib


def _address(array):
    return array.ctypes.data if array is not None else None


# -- results as arrays --------------------------------------------------------------------------

class WriteArrays:
    """Line writes as NumPy arrays, in order (one lane: a write per row).

    Attributes
    ----------
    addr : numpy.ndarray of uint32 or uint64, shape (n,)
        The line address (lane 0's address; with one lane, the write's address); uint32 when
        ``addr_width <= 32``.
    values : numpy.ndarray of int32 or int64, shape (n, lanes)
        Each lane's value (0 outside the mask); int32 when ``grad_width <= 30`` (a value has
        ``grad_width + 2`` bits).
    mask : numpy.ndarray of uint32, shape (n,)
        The lanes written.
    causes : numpy.ndarray of uint8, shape (n, lanes)
        Each lane's cause, an index into :data:`model.CAUSES`; :data:`NO_CAUSE` outside the mask.

    The narrow types halve the memory a long run's writes take, most of what the array path
    costs beside the kernel's decisions.
    """

    __slots__ = ("addr", "values", "_mask", "causes")

    def __init__(self, addr, values, mask, causes):
        # mask None: one lane, every write's mask 1 (made when asked for)
        self.addr, self.values, self._mask, self.causes = addr, values, mask, causes

    @property
    def mask(self):
        if self._mask is None:
            return np.ones(len(self.addr), np.uint32)
        return self._mask

    @classmethod
    def empty(cls, lanes):
        """No writes."""
        return cls(np.empty(0, np.uint64), np.empty((0, lanes), np.int64),
                   np.empty(0, np.uint32), np.empty((0, lanes), np.uint8))

    @classmethod
    def concatenate(cls, parts, lanes):
        """One :class:`WriteArrays` of ``parts`` in order."""
        parts = list(parts)
        if not parts:
            return cls.empty(lanes)
        if len(parts) == 1:
            return parts[0]
        return cls(np.concatenate([p.addr for p in parts]),
                   np.concatenate([p.values for p in parts]),
                   None if all(p._mask is None for p in parts) else
                   np.concatenate([p.mask for p in parts]),
                   np.concatenate([p.causes for p in parts]))

    def __len__(self):
        return len(self.addr)

    @property
    def lanes(self):
        return self.values.shape[1]

    @property
    def value(self):
        """With one lane: each write's value."""
        return self.values[:, 0]

    @property
    def cause(self):
        """With one lane: each write's cause code."""
        return self.causes[:, 0]

    def to_writes(self):
        """The writes as :class:`model.Write`\\ s, one per lane written, lane 0 first (as
        :meth:`model.LineWrite.writes`); with one lane, :class:`model.ReferenceModel`'s."""
        if self.lanes == 1:
            return list(map(Write._make, zip(self.addr.tolist(), self.values[:, 0].tolist(),
                                             map(_CAUSE_NAMES.__getitem__,
                                                 self.causes[:, 0].tolist()))))
        rows, lanes = np.nonzero(self.causes != NO_CAUSE)
        addr = (self.addr[rows] + lanes.astype(np.uint64)).tolist()
        return list(map(Write._make, zip(addr, self.values[rows, lanes].tolist(),
                                         map(_CAUSE_NAMES.__getitem__,
                                             self.causes[rows, lanes].tolist()))))

    def to_line_writes(self):
        """The writes as :class:`model.LineWrite`\\ s (:class:`model.LineModel`'s)."""
        names = _CAUSE_NAMES
        return [LineWrite(line, tuple(values), mask, tuple(names[c] for c in causes))
                for line, values, mask, causes in zip(self.addr.tolist(), self.values.tolist(),
                                                      self.mask.tolist(), self.causes.tolist())]


class _Single:
    """The buffers of :meth:`LineEmulator._one`: one beat or one flush in, its writes,
    discards and step totals out."""

    def __init__(self, emulator):
        lanes = emulator.lanes
        self.emulator = emulator
        self.line = np.zeros(1, np.uint64)
        self.grads = np.zeros((1, lanes), np.int32)
        self.thr = np.zeros(1, np.int64)
        self.mask = np.zeros(1, np.uint32)
        self.flush = np.array([0, _EV_FLUSH, 0, 0], np.int64)   # position, kind, a, b
        self.args = _In(1, _address(self.line), 8, _address(self.grads), 4,
                        _address(self.thr), 8, 1, _address(self.mask), 0,
                        *(_address(self.flush[i:]) for i in range(4)))
        self.d = emulator._new_discards(lanes)
        self.s = [np.empty(1, np.int64), np.empty(1, np.int64)]
        self.out = _Out()
        self.out.addr_bytes = np.dtype(emulator._addr_dtype).itemsize
        self.out.value_bytes = np.dtype(emulator._value_dtype).itemsize
        self.out.d_addr, self.out.d_error = map(_address, self.d)
        self.out.d_capacity = lanes
        self.out.s_count, self.out.s_sum = map(_address, self.s)
        self.out.s_capacity = 1
        self.w = None
        self.room(64)

    def room(self, writes):
        """Room for at least ``writes`` writes."""
        if self.w is None or len(self.w[0]) < writes:
            self.w = self.emulator._new_writes(max(writes, 2 * len(self.w[0]) if self.w else 0))
            out = self.out
            out.w_line, out.w_mask, out.w_values, out.w_causes = map(_address, self.w)
            out.w_capacity = len(self.w[0])


# -- the emulators ------------------------------------------------------------------------------

class LineEmulator:
    """The compressor's policy on beats of ``lanes`` gradients, as :class:`model.LineModel`.

    Parameters
    ----------
    lanes : int
        Gradients per line: one of :data:`design.params.LANES`.
    sets, ways : int or None
        L1 geometry in lines (powers of two); ``sets=None``: an unbounded L1 that never evicts.
    max_updates : int
        Beats that update a line before it is written out.
    grad_width : int
        Gradient width, 2 to 32.
    addr_width : int
        Address width, 1 to 64: addresses (and bypass windows) lie in ``[0, 2**addr_width)``.
    whole_line : bool
        The whole-line rule (:class:`model.LineModel`'s ``whole_line``; with one lane,
        :class:`model.ReferenceModel`'s).

    Notes
    -----
    The state lives in the kernel; :attr:`discards`, :attr:`step_discards`,
    :attr:`discard_count`, :attr:`discard_sum`, :attr:`ema`, :attr:`ema_latched`, :attr:`lfsr`,
    :attr:`modes`, :attr:`valid_count` and :meth:`held` read it as the models' attributes do.
    """

    #: Whether :meth:`run` takes ``("line", ...)`` operations.
    _takes_lines = True

    def __init__(self, *, lanes=1, sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], grad_width=DEFAULTS["grad_width"],
                 addr_width=DEFAULTS["addr_width"], whole_line=WHOLE_LINE):
        check_lanes(lanes)
        self._check_params(sets, ways, max_updates, grad_width, addr_width)
        self.lanes = lanes
        self._setup(sets, ways, max_updates, grad_width, addr_width,
                    check_bool("whole_line", whole_line))

    @staticmethod
    def _check_params(sets, ways, max_updates, grad_width, addr_width):
        # The models' checks (design.params), and the kernel's integer widths.
        if sets is not None:
            check_power_of_two("sets", sets)
            check_power_of_two("ways", ways)
        check_int("max_updates", max_updates, minimum=1)
        check_int("grad_width", grad_width, minimum=2, maximum=32)
        check_int("addr_width", addr_width, minimum=1, maximum=64)

    def _setup(self, sets, ways, max_updates, grad_width, addr_width, whole_line):
        self.sets, self.ways = sets, ways
        self.whole_line = whole_line
        self.max_updates = max_updates
        self.grad_min, self.grad_max = -2 ** (grad_width - 1), 2 ** (grad_width - 1) - 1
        self.threshold_max = 2 ** grad_width - 1
        self.grad_width, self.addr_width = grad_width, addr_width
        self._lib = load_kernel()
        # The kernel's integers are 64 bits (ways 31): an L1 beyond them could not be held in
        # memory anyway; a max_updates beyond them is never reached, as in the models.
        too_large = MemoryError(f"an L1 of {sets} x {ways} lines of {self.lanes} lanes does "
                                f"not fit in memory")
        if sets is not None and (ways >= 2 ** 31 or sets * ways * self.lanes >= 2 ** 48):
            raise too_large
        self._state = self._lib.gc_new(self.lanes, 0 if sets is None else sets,
                                       0 if sets is None else ways,
                                       min(max_updates, 2 ** 63 - 1), grad_width, addr_width,
                                       int(self.whole_line))
        if not self._state:
            raise too_large
        weakref.finalize(self, self._lib.gc_free, self._state)
        self._discard_parts = []     # (addr, error) arrays, in order
        self._discard_list = []      # the parts turned into Discards so far
        self._discard_listed = 0     # how many parts that is
        self.step_discards = []
        self._addr_max = 2 ** addr_width - 1
        self._single = None
        # The outputs' types: the narrower where every value fits (see WriteArrays).
        self._addr_dtype = np.uint32 if addr_width <= 32 else np.uint64
        self._value_dtype = np.int32 if grad_width + 2 <= 32 else np.int64

    def __repr__(self):
        # (the constructor's own arguments: Emulator takes no lanes; the policy when not the
        # default)
        lanes = "" if isinstance(self, Emulator) else f"lanes={self.lanes}, "
        return (f"{type(self).__name__}({lanes}sets={self.sets}, ways={self.ways}, "
                f"max_updates={self.max_updates}, grad_width={self.grad_width}, "
                f"addr_width={self.addr_width}" +
                ("" if self.whole_line == WHOLE_LINE else f", whole_line={self.whole_line}") + ")")

    # -- the state, as the models' attributes ----------------------------------------------

    def _get(self, field):
        return self._lib.gc_get(self._state, field)

    @property
    def lfsr(self):
        """The LFSR's state."""
        return self._get(_LFSR)

    @property
    def ema(self):
        """The EMA of ``|grad|``, with :attr:`ema_fraction_bits` fraction bits."""
        return self._get(_EMA)

    @property
    def ema_latched(self):
        """The EMA's value at the last flush barrier."""
        return self._get(_EMA_LATCHED)

    @property
    def ema_judged(self):
        """The EMA a beat is judged by now (outside ``ema_per_step``): with one lane the EMA; on
        lines, the EMA before its last :data:`~design.params.EMA_LINE_LAG` updates."""
        return self._get(_EMA_JUDGED)

    @property
    def ema_threshold(self):
        """The EMA mode's threshold now."""
        return self._get(_EMA_THRESHOLD)

    @property
    def ema_fraction_bits(self):
        """Fraction bits of :attr:`ema`: ``8 + log2(lanes)``."""
        return ema_fraction_bits(self.lanes)

    @property
    def discard_count(self):
        """The step's running count of accounted discards (mod 2**32)."""
        return self._get(_DISCARD_COUNT)

    @property
    def discard_sum(self):
        """The step's running sum of the discards' errors."""
        return self._get(_DISCARD_SUM)

    @property
    def valid_count(self):
        """Number of entries (lines) held."""
        return self._get(_VALID_COUNT)

    @property
    def modes(self):
        """The run-time mode settings in force (a fresh dict)."""
        return {name: self._lib.gc_get_mode(self._state, _MODE_INDEX[name]) % 2 ** 64
                for name in MODES_OFF}

    @property
    def discards(self):
        """Every accounted discard so far, in order, as :class:`model.Discard`\\ s."""
        for addr, error in self._discard_parts[self._discard_listed:]:
            self._discard_list.extend(map(Discard._make, zip(addr.tolist(), error.tolist())))
        self._discard_listed = len(self._discard_parts)
        return self._discard_list

    def discard_arrays(self):
        """Every accounted discard so far as two arrays, ``(addr, error)`` (of the types of
        :attr:`WriteArrays.addr` and :attr:`WriteArrays.values`)."""
        if not self._discard_parts:
            return np.empty(0, self._addr_dtype), np.empty(0, self._value_dtype)
        return (np.concatenate([a for a, _ in self._discard_parts]),
                np.concatenate([e for _, e in self._discard_parts]))

    def take_discard_arrays(self):
        """:meth:`discard_arrays`, then forget them (:attr:`discards` starts again empty): a
        long run that only counts its discards need not hold them all (a drop-mode run of
        10^8 gradients accounts tens of millions)."""
        arrays = self.discard_arrays()
        self._discard_parts, self._discard_list, self._discard_listed = [], [], 0
        return arrays

    def held_lines(self):
        """``[(line, held lanes mask, sums)]`` of every line held, in flush order."""
        n = self.valid_count
        line = np.empty(n, np.uint64)
        held = np.empty(n, np.uint32)
        sums = np.empty((n, self.lanes), np.int64)
        k = self._lib.gc_held(self._state, n, _address(line), _address(held), _address(sums))
        return list(zip(line[:k].tolist(), held[:k].tolist(), sums[:k].tolist()))

    def held(self):
        """``{addr: sum}`` of every lane held."""
        return {line + i: row[i] for line, mask, row in self.held_lines()
                for i in range(self.lanes) if mask >> i & 1}

    def in_bypass_window(self, addr):
        """Whether ``addr`` lies in an enabled bypass window (``base <= addr <= limit``)."""
        modes = self.modes
        return any(modes[f"bypass__{i}__enable"] and
                   modes[f"bypass__{i}__base"] <= addr <= modes[f"bypass__{i}__limit"]
                   for i in range(BYPASS_WINDOWS))

    # -- settings ---------------------------------------------------------------------------

    def set_modes(self, **modes):
        """Change run-time mode settings (keys of :data:`design.params.MODES_OFF`, checked by
        :func:`design.params.check_modes`); those not given keep their values. They apply to
        the gradients that follow."""
        self._execute_ops([("modes", modes)])

    def seed(self, value):
        """Load the LFSR with ``value`` (0 loads 1); only while L1 is empty (the RTL loads it
        only while idle), else :class:`ValueError`."""
        self._execute_ops([("seed", value)])

    # -- the models' operations -------------------------------------------------------------

    def write_line(self, line, grads, mask, threshold):
        """Take one beat, as :meth:`model.LineModel.write_line`.

        Parameters
        ----------
        line : int
            The line address (a multiple of ``lanes``).
        grads : sequence of int
            ``lanes`` gradients (those outside ``mask`` are ignored).
        mask : int
            The lanes in the beat, lane 0 lowest.
        threshold : int
            The ``threshold`` input.

        Returns
        -------
        list of model.LineWrite
            Empty, one or two: the beat's own line first, then a victim line.
        """
        return self.run([("line", line, grads, mask, threshold)])

    def write(self, addr, grad, threshold):
        """Take one gradient (a beat of one lane), as the models' ``write``.

        Parameters
        ----------
        addr, grad, threshold : int
            The gradient's address, value and the ``threshold`` input.

        Returns
        -------
        list
            Its writes (:class:`model.LineWrite`, or :class:`model.Write` for
            :class:`Emulator`).
        """
        return self.run([("grad", addr, grad, threshold)])

    def flush(self):
        """The flush barrier: every held line written out, set by set, lowest way first.

        It ends the step: the EMA is latched (for ``ema_per_step``) and the step's discard
        totals are appended to :attr:`step_discards` (the next gradient clears them).

        Returns
        -------
        list
            The writes, cause ``FLUSH``.
        """
        return self.run([("flush",)])

    def run(self, ops):
        """Run the models' operations, as the models' ``run``.

        Parameters
        ----------
        ops : iterable of tuple
            ``("grad", addr, grad, threshold)``, ``("line", line, grads, mask, threshold)``
            (not for :class:`Emulator`, as not for ReferenceModel), ``("flush",)``,
            ``("modes", {setting: value})`` and ``("seed", value)``.

        Returns
        -------
        list
            Every write, in order: :class:`model.LineWrite`\\ s here, :class:`model.Write`\\ s
            for :class:`Emulator`. :meth:`run_ops` returns them as :class:`WriteArrays`.
        """
        if type(ops) in (list, tuple) and len(ops) == 1:
            nw = self._one(ops[0])
            if nw is not None:
                return self._single_writes(nw)
        return self._as_model_writes(self._execute_ops(ops))

    def _as_model_writes(self, arrays):
        return arrays.to_line_writes()

    def _single_writes(self, nw):
        w = self._single.w
        return WriteArrays(w[0][:nw], w[2][:nw], None if w[1] is None else w[1][:nw],
                           w[3][:nw]).to_line_writes()

    def run_ops(self, ops):
        """As :meth:`run`, but the writes as :class:`WriteArrays`."""
        return self._execute_ops(ops)

    # -- one operation at a time ------------------------------------------------------------

    def _one(self, op):
        """One gradient, beat or flush through buffers kept from call to call, so that the
        models' one-operation-at-a-time use (:meth:`write`, ``run([op])``) costs about what
        the model's does. Returns the number of writes (in the buffers), or None for anything
        else, or anything out of range, which the general path runs (or rejects with the
        model's error)."""
        if type(op) not in (tuple, list) or not op:
            return None
        kind, lanes, b = op[0], self.lanes, self._single
        if b is None:
            b = self._single = _Single(self)
        if kind == "grad" and len(op) == 4:
            _, addr, grad, threshold = op
            if not (type(addr) is int and type(grad) is int and type(threshold) is int and
                    0 <= addr <= self._addr_max and self.grad_min <= grad <= self.grad_max and
                    0 <= threshold <= self.threshold_max):
                return None
            lane = addr & (lanes - 1)
            if lanes > 1:
                b.grads.fill(0)
            b.grads[0, lane] = grad
            b.line[0], b.mask[0], b.thr[0] = addr - lane, 1 << lane, threshold
            b.args.n, b.args.ne = 1, 0
        elif kind == "line" and self._takes_lines and len(op) == 5:
            _, line, grads, mask, threshold = op
            if not (type(line) is int and type(mask) is int and type(threshold) is int and
                    0 <= line <= self._addr_max and 0 <= mask < 1 << lanes and
                    0 <= threshold <= self.threshold_max and len(grads) == lanes and
                    all(type(g) is int and self.grad_min <= g <= self.grad_max
                        for g in grads)):
                return None
            b.grads[0] = grads
            b.line[0], b.mask[0], b.thr[0] = line, mask, threshold
            b.args.n, b.args.ne = 1, 0
        elif kind == "flush":
            b.room(self.valid_count + 2)
            b.args.n, b.args.ne = 0, 1
        else:
            return None
        out = b.out
        out.nw = out.nd = out.ns = out.beat = out.event = out.full = out.error = 0
        self._lib.gc_run(self._state, ctypes.byref(b.args), ctypes.byref(out))
        if out.nd:
            self._discard_parts.append((b.d[0][:out.nd].copy(), b.d[1][:out.nd].copy()))
        if out.ns:
            self.step_discards.append((int(b.s[0][0]), int(b.s[1][0])))
        if out.error:
            self._raise(out, b.line, b.grads, b.thr, b.mask)
        return out.nw

    # -- the fast path ----------------------------------------------------------------------

    def run_gradients(self, addr, grad, threshold, *, events=()):
        """Run gradients, each as a beat of one lane (as ``("grad", addr, grad, threshold)``).

        Parameters
        ----------
        addr, grad : array_like of int, shape (n,)
            Addresses and gradients.
        threshold : int or array_like of int, shape (n,)
            The ``threshold`` input for each gradient.
        events : sequence of (int, tuple)
            ``(position, operation)``, each operation a ``("flush",)``, ``("modes", {...})`` or
            ``("seed", value)``, applied before gradient ``position`` (``n``: after the last);
            positions non-decreasing.

        Returns
        -------
        WriteArrays
        """
        addr = self._column(addr, "address", (np.uint32, np.uint64))
        grad = np.asarray(grad)
        n = len(addr)
        if grad.shape != (n,):
            raise ValueError(f"{n} addresses but gradients of shape {grad.shape}")
        grads = self._grads(grad.reshape(n, 1), None)
        if self.lanes == 1:
            return self._execute(addr, grads, threshold, None, self._events(events, n))
        lane = addr & addr.dtype.type(self.lanes - 1)
        wide = np.zeros((n, self.lanes), grads.dtype)
        wide[np.arange(n), lane.astype(np.intp)] = grads[:, 0]
        return self._execute(addr - lane, wide, threshold,
                             (np.uint32(1) << lane.astype(np.uint32)).astype(np.uint32),
                             self._events(events, n))

    def run_beats(self, line, grads, threshold, *, mask=None, events=()):
        """Run beats (as ``("line", line, grads, mask, threshold)``).

        Parameters
        ----------
        line : array_like of int, shape (n,)
            Line addresses (multiples of ``lanes``).
        grads : array_like of int, shape (n, lanes)
            The lanes' gradients (those outside the mask are ignored).
        threshold : int or array_like of int, shape (n,)
        mask : array_like of int, shape (n,), optional
            The lanes in each beat; every lane if not given.
        events : sequence of (int, tuple)
            As for :meth:`run_gradients`, by beat.

        Returns
        -------
        WriteArrays
        """
        line = self._column(line, "line", (np.uint32, np.uint64))
        n = len(line)
        grads = np.asarray(grads)
        if self.lanes == 1 and grads.shape == (n,):
            grads = grads.reshape(n, 1)
        if grads.shape != (n, self.lanes):
            raise ValueError(f"a beat has {self.lanes} gradients: grads must be of shape "
                             f"({n}, {self.lanes}), not {grads.shape}")
        if mask is not None:
            mask = self._column(mask, "mask", (np.uint32,), maximum=2 ** self.lanes - 1)
            if len(mask) != n:
                raise ValueError(f"{n} lines but {len(mask)} masks")
        return self._execute(line, self._grads(grads, mask), threshold, mask,
                             self._events(events, n))

    def run_trace(self, trace, *, threshold=None, limit=None, prefix=()):
        """Run a trace as ``prefix + trace.ops(threshold, limit)`` would run: its gradients
        (each a beat of one lane), a flush after every step.

        Parameters
        ----------
        trace : workloads.Trace
        threshold : int, optional
            Overrides the trace's thresholds.
        limit : int, optional
            The first ``limit`` gradients (the step in which it falls is cut there and still
            flushed, as :meth:`workloads.Trace.ops` does).
        prefix : sequence of tuple
            ``("modes", ...)``, ``("seed", ...)`` or ``("flush",)`` operations run first.

        Returns
        -------
        WriteArrays
        """
        # A limit below 0 keeps no gradient, as trace.ops (not a slice from the end).
        n = len(trace) if limit is None else min(max(int(limit), 0), len(trace))
        thresholds = trace.thresholds()[:n] if threshold is None else threshold
        events = [(0, op) for op in prefix]
        for start, end in trace.step_bounds():
            if limit is not None and start >= limit:
                break
            events.append((min(end, n), ("flush",)))
        return self.run_gradients(trace.addr[:n], trace.grad[:n], thresholds, events=events)

    # -- encoding ---------------------------------------------------------------------------

    def _column(self, values, name, dtypes, maximum=None):
        """``values`` as a contiguous 1-D array of one of ``dtypes`` (as it is if it is one,
        else the last, its values checked to lie in ``[0, maximum]``)."""
        if maximum is None:
            maximum = 2 ** self.addr_width - 1
        a = np.asarray(values)
        if a.dtype.kind in "fO" and a.ndim == 1 and all(type(v) is int for v in values):
            # Python integers, some above 2**63 (NumPy made them float64 or objects).
            bad = [v for v in values if not 0 <= v <= maximum]
            if bad:
                raise ValueError(f"{name} {bad[0]} is outside [0, {maximum}]")
            a = np.array(values, dtype=np.uint64)
        if a.ndim != 1:
            raise ValueError(f"{name} values must be one-dimensional, not of shape {a.shape}")
        if a.size and a.dtype.kind not in "iub":
            raise TypeError(f"{name} values must be integers, not {a.dtype}")
        if a.dtype in dtypes:
            return np.ascontiguousarray(a)
        if a.size:
            low, high = int(a.min()), int(a.max())
            if low < 0 or high > maximum:
                bad = low if low < 0 else high
                raise ValueError(f"{name} {bad} is outside [0, {maximum}]")
        return np.ascontiguousarray(a, dtype=dtypes[-1])

    def _grads(self, grads, mask):
        """``grads`` (n, lanes) as int16 or int32 (the kernel checks their range); a wider
        type's values checked here in the masked lanes (those outside the mask are ignored,
        as the models ignore them)."""
        if grads.size and grads.dtype.kind not in "iub":
            raise TypeError(f"gradients must be integers, not {grads.dtype}")
        if grads.dtype in (np.int16, np.int32):
            return np.ascontiguousarray(grads)
        if grads.dtype.kind == "b" or np.can_cast(grads.dtype, np.int16):
            return np.ascontiguousarray(grads, dtype=np.int16)
        if np.can_cast(grads.dtype, np.int32):
            return np.ascontiguousarray(grads, dtype=np.int32)
        wide = grads.astype(np.int64)
        bad = (wide < self.grad_min) | (wide > self.grad_max)
        if mask is not None:
            bad &= (mask[:, None] >> np.arange(self.lanes, dtype=np.uint32)) & 1 == 1
        if bad.any():
            row, lane = map(int, np.argwhere(bad)[0])
            raise ValueError(self._grad_message(int(grads[row, lane]), lane))
        return np.ascontiguousarray(np.where(bad, 0, wide), dtype=np.int32)

    def _grad_message(self, grad, lane):
        return f"gradient {grad} (lane {lane}) is outside [{self.grad_min}, {self.grad_max}]"

    def _events(self, events, n):
        """``(position, operation)`` pairs as the kernel's four event columns."""
        rows = []
        last = 0
        for position, op in events:
            if isinstance(position, bool) or not isinstance(position, (int, np.integer)) \
                    or not last <= position <= n:
                raise ValueError(f"event positions must be non-decreasing integers in "
                                 f"[0, {n}], not {position!r} after {last}")
            last = int(position)
            rows.extend((last, kind, a, b) for kind, a, b in self._event_codes(op))
        return rows

    def _event_codes(self, op):
        """The kernel events ``(kind, a, b)`` of a flush, modes or seed operation."""
        kind = _kind(op)
        if kind == "flush":
            return [(_EV_FLUSH, 0, 0)]
        if kind == "modes":
            check_modes(op[1], addr_width=self.addr_width, grad_width=self.grad_width)
            # As int64 (the kernel compares a window's bounds as unsigned).
            return [(_EV_MODE, _MODE_INDEX[name], value if value < 2 ** 63 else value - 2 ** 64)
                    for name, value in op[1].items()]
        if kind == "seed":
            check_int("lfsr_seed", op[1], minimum=0, maximum=2 ** LFSR_WIDTH - 1)
            return [(_EV_SEED, op[1], 0)]
        raise ValueError(f"unknown operation {op!r}")

    def _execute_ops(self, ops):
        """The models' operations as beats and events, run."""
        lines, grads, masks, thresholds, events = [], [], [], [], []
        beats = 0
        for kind, group in itertools.groupby(ops, key=_kind):
            group = list(group)
            if kind == "grad":
                addr, grad, threshold = self._unzip(group, 4, '("grad", addr, grad, threshold)')
                addr = self._addresses(addr, "line", of_line=True)
                lane = addr & np.uint64(self.lanes - 1)
                g = np.zeros((len(group), self.lanes), np.int64)
                g[np.arange(len(group)), lane.astype(np.intp)] = self._ints(grad, "gradient")
                lines.append(addr - lane)
                grads.append(g)
                masks.append((np.uint32(1) << lane.astype(np.uint32)).astype(np.uint32))
                thresholds.append(self._ints(threshold, "threshold"))
                beats += len(group)
            elif kind == "line" and self._takes_lines:
                line, grad, mask, threshold = self._unzip(
                    group, 5, '("line", line, grads, mask, threshold)')
                lines.append(self._addresses(line, "line"))
                mask = self._ints(mask, "mask")
                # A mask above the lanes is the kernel's to reject, at its beat; one outside
                # uint32 cannot reach it.
                if mask.size and (mask.min() < 0 or mask.max() > 2 ** 32 - 1):
                    bad = int(mask.min()) if mask.min() < 0 else int(mask.max())
                    word = "least 0" if bad < 0 else f"most {2 ** self.lanes - 1}"
                    raise ValueError(f"mask must be at {word}, not {bad}")
                masks.append(mask.astype(np.uint32))
                grads.append(self._line_grads(grad))
                thresholds.append(self._ints(threshold, "threshold"))
                beats += len(group)
            else:
                for op in group:
                    events.extend((beats, *code) for code in self._event_codes(op))
        if not lines:
            return self._execute(np.empty(0, np.uint64), np.empty((0, self.lanes), np.int32),
                                 np.empty(0, np.int64), None, events)
        # The gradients as int64: the kernel checks their range at their beat, as the model.
        return self._execute(np.concatenate(lines), np.concatenate(grads),
                             np.concatenate(thresholds), np.concatenate(masks), events)

    @staticmethod
    def _unzip(group, size, form):
        for op in group:
            if len(op) != size:
                raise TypeError(f"an operation is {form}, not {op!r}")
        return list(zip(*group))[1:]

    @staticmethod
    def _ints(values, name):
        """Integers as int64 (gradients, thresholds, masks: any valid one fits)."""
        a = np.array(values)
        if a.dtype.kind in "ib" or (a.dtype.kind == "u" and (not a.size or
                                                              a.max() < 2 ** 63)):
            return a.astype(np.int64)
        if all(type(v) is int for v in values):
            # Beyond int64 (NumPy made them uint64, float64 or objects): out of any range.
            raise ValueError(f"{name} {max(values, key=abs)} is out of range")
        raise TypeError(f"{name}s must be integers, not {a.dtype}")

    def _addresses(self, values, name, of_line=False):
        """Addresses (or lines) as uint64. One above ``addr_width`` is the kernel's to reject,
        at its beat; a negative one, or one beyond 64 bits, raises the model's error here
        (``of_line``: of the line of a gradient's address, as LineModel.write checks it)."""
        a = np.array(values)
        top = 2 ** self.addr_width - 1
        if a.size and (a.dtype.kind not in "iu" or a.min() < 0):
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TypeError(f"{name} must be an integer, not {v!r}")
                if of_line:
                    v -= v % self.lanes
                if not 0 <= v < 2 ** 64:
                    word = "least 0" if v < 0 else f"most {top}"
                    raise ValueError(f"{name} must be at {word}, not {v}")
            # In range, but NumPy may have made them float64 (small ones with some above
            # 2**63): from the integers themselves.
            return np.array(values, dtype=np.uint64)
        return a.astype(np.uint64)

    def _line_grads(self, grads):
        try:
            a = np.array(grads)
        except ValueError:
            a = None
        if a is None or a.ndim != 2 or a.shape[1] != self.lanes:
            for g in grads:
                if len(g) != self.lanes:
                    raise ValueError(f"a beat has {self.lanes} gradients, not {len(g)}")
            raise ValueError("beats' gradients must be integers")
        if a.size and a.dtype.kind not in "iub":
            if a.dtype.kind == "O":
                for row, g in enumerate(grads):
                    for lane, v in enumerate(g):
                        if not self.grad_min <= v <= self.grad_max:
                            raise ValueError(self._grad_message(v, lane))
            raise TypeError(f"gradients must be integers, not {a.dtype}")
        return a.astype(np.int64)

    # -- running the kernel -----------------------------------------------------------------

    def _execute(self, line, grads, threshold, mask, events):
        """Run beats (``line`` uint32 or uint64, ``grads`` int16 or int32 of shape (n, lanes),
        ``mask`` uint32 or None for every lane) and kernel events ``(position, kind, a, b)``;
        return the writes. The output arrays grow when the kernel stops for room."""
        n, lanes = len(line), self.lanes
        if np.ndim(threshold) == 0:
            threshold, stride = np.array([threshold], np.int64), 0
        else:
            threshold, stride = np.asarray(threshold), 1
            if threshold.shape != (n,):
                raise ValueError(f"{n} beats but thresholds of shape {threshold.shape}")
            if threshold.size and threshold.dtype.kind not in "iub":
                raise TypeError(f"thresholds must be integers, not {threshold.dtype}")
            if threshold.dtype not in (np.uint16, np.uint32, np.int64):
                if threshold.size and int(threshold.max()) > self.threshold_max:
                    raise ValueError(f"threshold {int(threshold.max())} is outside "
                                     f"[0, {self.threshold_max}]")
                threshold = threshold.astype(np.int64)
            threshold = np.ascontiguousarray(threshold)
        ev = np.array(events, np.int64).reshape(-1, 4)
        ev_pos, ev_kind = np.ascontiguousarray(ev[:, 0]), np.ascontiguousarray(ev[:, 1])
        ev_a, ev_b = np.ascontiguousarray(ev[:, 2]), np.ascontiguousarray(ev[:, 3])
        flushes = int(np.count_nonzero(ev_kind == _EV_FLUSH))
        args = _In(n, _address(line), line.itemsize, _address(grads), grads.itemsize,
                   _address(threshold), threshold.itemsize, stride, _address(mask),
                   len(ev), _address(ev_pos), _address(ev_kind), _address(ev_a), _address(ev_b))
        w = self._new_writes(n + _SLACK + (self.valid_count if flushes else 0))
        d = self._new_discards(n * lanes // 2 + _SLACK)
        s = [np.empty(flushes + 1, np.int64), np.empty(flushes + 1, np.int64)]
        out = _Out()
        out.beat = out.event = 0
        out.addr_bytes = np.dtype(self._addr_dtype).itemsize
        out.value_bytes = np.dtype(self._value_dtype).itemsize
        while True:
            out.w_line, out.w_mask, out.w_values, out.w_causes = map(_address, w)
            out.w_capacity = len(w[0])
            out.d_addr, out.d_error = map(_address, d)
            out.d_capacity = len(d[0])
            out.s_count, out.s_sum = map(_address, s)
            out.s_capacity = len(s[0])
            self._lib.gc_run(self._state, ctypes.byref(args), ctypes.byref(out))
            if not out.full:
                break
            if out.nw + max(2, self.valid_count) > len(w[0]):
                w = self._grown(w, out.nw, 2 * len(w[0]) + self.valid_count)
            if out.nd + lanes > len(d[0]):
                d = self._grown(d, out.nd, 2 * len(d[0]) + lanes)
        if out.nd:
            self._discard_parts.append((d[0][:out.nd], d[1][:out.nd]))
        self.step_discards.extend(zip(s[0][:out.ns].tolist(), s[1][:out.ns].tolist()))
        if out.error:
            self._raise(out, line, grads, threshold if stride else np.repeat(threshold, n), mask)
        nw = out.nw
        return WriteArrays(w[0][:nw], w[2][:nw], None if w[1] is None else w[1][:nw],
                           w[3][:nw])

    def _new_writes(self, size):
        """Output arrays for ``size`` writes: lines, masks (None with one lane), values,
        causes."""
        lanes = self.lanes
        return [np.empty(size, self._addr_dtype),
                np.empty(size, np.uint32) if lanes > 1 else None,
                np.empty((size, lanes), self._value_dtype), np.empty((size, lanes), np.uint8)]

    def _new_discards(self, size):
        return [np.empty(size, self._addr_dtype), np.empty(size, self._value_dtype)]

    @staticmethod
    def _grown(arrays, used, size):
        """``arrays`` with room for ``size`` rows, the first ``used`` kept."""
        grown = []
        for a in arrays:
            if a is None:
                grown.append(None)
                continue
            b = np.empty((size, *a.shape[1:]), a.dtype)
            b[:used] = a[:used]
            grown.append(b)
        return grown

    def _raise(self, out, line, grads, threshold, mask):
        """The models' error for what stopped the kernel."""
        if out.error == _ERR_SEED:
            raise ValueError(_IDLE_MESSAGE)
        i = out.beat
        if out.error == _ERR_ADDR:
            self._raise_address(int(line[i]))
        if out.error == _ERR_LINE_ALIGN:
            raise ValueError(f"line address {int(line[i])} is not a multiple of lanes "
                             f"({self.lanes})")
        if out.error == _ERR_MASK:
            raise ValueError(f"mask must be at most {2 ** self.lanes - 1}, not {int(mask[i])}")
        if out.error == _ERR_GRAD:
            raise ValueError(self._grad_message(int(grads[i, out.error_lane]), out.error_lane))
        if out.error == _ERR_THRESHOLD:
            raise ValueError(f"threshold {int(threshold[i])} is outside "
                             f"[0, {self.threshold_max}]")
        raise RuntimeError(f"the emulator's kernel stopped with error {out.error}")

    def _raise_address(self, line):
        raise ValueError(f"line must be at most {2 ** self.addr_width - 1}, not {line}")


def _kind(op):
    try:
        return op[0]
    except (TypeError, IndexError):
        raise ValueError(f"unknown operation {op!r}") from None


class Emulator(LineEmulator):
    """The compressor's policy on single gradients, as :class:`model.ReferenceModel`.

    Parameters
    ----------
    sets, ways, max_updates, grad_width, addr_width, whole_line
        As for :class:`LineEmulator` (one lane); ``whole_line`` runs
        :class:`model.ReferenceModel`'s whole-line rule (the kernel's, one lane).

    :meth:`write`, :meth:`flush` and :meth:`run` return :class:`model.Write`\\ s, and
    :meth:`run` takes ReferenceModel's operations (no ``("line", ...)``); the fast path is
    :meth:`run_gradients` and :meth:`run_trace`.
    """

    _takes_lines = False

    def __init__(self, *, sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], grad_width=DEFAULTS["grad_width"],
                 addr_width=DEFAULTS["addr_width"], whole_line=WHOLE_LINE):
        self._check_params(sets, ways, max_updates, grad_width, addr_width)
        self.lanes = 1
        self._setup(sets, ways, max_updates, grad_width, addr_width,
                    check_bool("whole_line", whole_line))

    def _as_model_writes(self, arrays):
        return arrays.to_writes()

    def _single_writes(self, nw):
        if not nw:
            return []
        w = self._single.w
        return [Write(int(w[0][0]), int(w[2][0, 0]), _CAUSE_NAMES[w[3][0, 0]])] if nw == 1 \
            else WriteArrays(w[0][:nw], w[2][:nw], None, w[3][:nw]).to_writes()

    def _grad_message(self, grad, lane):
        return f"gradient {grad} is outside [{self.grad_min}, {self.grad_max}]"

    def _raise_address(self, addr):
        raise ValueError(f"address {addr} is outside [0, {2 ** self.addr_width - 1}]")

    def _addresses(self, values, name, of_line=False):
        try:
            return super()._addresses(values, name)
        except ValueError:
            for v in values:
                if not 0 <= v < 2 ** 64:
                    self._raise_address(v)
            raise

    def held(self):
        """``{addr: sum}`` of what L1 holds."""
        return {line: row[0] for line, _, row in self.held_lines()}


