"""``compressor-report --lanes N``: a workload run through the RTL on lines, checked and costed.

Each workload's operations (a flush after every step) are packed into beats of ``N`` lanes by
:func:`reports.line_costs.pack_lines`, as an accelerator would write them, and run through
``GradientCompressor(lanes=N)`` at the report's geometry (``sets x ways`` lines). Checks, each
of which makes the command exit 1:

* **conservation** per address over the expanded beats: the beats accepted are the beats
  offered (every masked-in lane's gradient), and per address the values DRAM received add up
  to the gradients accepted;
* **the line model** (:class:`model.LineModel`, same geometry, the same rule: the whole-line
  rule if the parameters hold ``whole_line``): the causes of the line writes entering L2 (the
  cause strobes, one per cause present in a write; ``LINE`` has none) equal those of the
  model's line writes, write for write; and DRAM's writes equal the model's in order up to
  L2's write combining: split into runs of consecutive writes to one line, the same lines in
  the same order, with the same lanes and the same sum per address in each run, in no more
  line writes than the model made. DRAM's writes cannot be compared write for write: L2
  merges a line write into the newest one it holds for the same line (docs/lanes.md, "Write
  combining"), which depends on timing the model does not have; a merge only ever joins
  consecutive writes to one line, which is what the runs allow.

Figures: DRAM transfers and bytes of the three ways of writing of :mod:`reports.line_costs`
(dense write-through of the beats, per-gradient records of the one-lane compressor, masked
line writes), with its byte counts (:data:`reports.line_costs.FORMAT`), the masked line writes
counted from the RTL's DRAM writes; and the causes of the lanes written.
"""

import time
from collections import Counter

from gradient_compressor.console import progress as console_progress
from gradient_compressor.design.params import WHOLE_LINE
from gradient_compressor.model import CAUSES, LineModel

from .backend import parse_dram, run_rtl
from .line_costs import dense_bytes, pack_lines, write_bytes
from .metrics import check_conservation, conservation_json

__all__ = ["run_lines", "line_metrics", "line_cross_check", "line_runs", "expand"]


def run_lines(trace, params, lanes, *, backend, dram="always", threshold=None, progress=True,
              records=None, vcd=None, vcd_cycles=None):
    """Pack ``trace`` into beats of ``lanes``, run them through the RTL with ``params`` (the
    report's geometry) and return :func:`line_metrics`' figures, with the simulation's time.

    ``records`` is the one-lane compressor's DRAM writes on the same trace (the report's own
    run), the per-gradient way of writing; None if that run had none to give. ``vcd``: write
    the run's first ``vcd_cycles`` cycles to this waveform (and a .gtkw beside it)."""
    beats = pack_lines(trace.ops(threshold=threshold), lanes)
    count = sum(op[0] == "line" for op in beats)
    bar = console_progress(len(beats), f"{trace.name} ({count} beats of {lanes} lanes, "
                                       f"{backend})", enabled=progress)
    start = time.monotonic()
    result = run_rtl(backend, dict(params, lanes=lanes), beats, dram_ready=parse_dram(dram),
                     progress=bar, vcd=vcd, vcd_cycles=vcd_cycles)
    seconds = time.monotonic() - start
    metrics = line_metrics(beats, result, lanes=lanes, params=params, records=records)
    metrics["simulation"] = {"backend": backend, "seconds": round(seconds, 3)}
    return metrics


def expand(beats):
    """The gradients of beats ``(line, grads, mask, ...)``, as ``(addr, grad)`` per masked-in
    lane, beat by beat, lane 0 first."""
    return [(line + i, grad) for line, grads, mask, *_ in beats
            for i, grad in enumerate(grads) if mask >> i & 1]


def line_metrics(beats, result, *, lanes, params, records=None):
    """The figures and checks of one workload's run on lines (a JSON-able dict).

    ``beats`` are the operations run (beats and flushes), ``result`` the RTL's
    :class:`~simulation.driver.SimResult`. If conservation fails, the dict says so and holds
    no figure."""
    offered = [op[1:] for op in beats if op[0] == "line"]
    conservation = check_conservation(expand(result.accepted), result.writes,
                                      offered=expand(offered))
    out = {"lanes": lanes, "gradients": result.gradients, "beats": len(result.accepted),
           "conservation": conservation_json(conservation)}
    if not conservation.ok:
        return out
    # The model follows the rule the RTL was built with (``whole_line``, the line policy if
    # the parameters do not name it).
    model = LineModel(lanes=lanes, sets=params["sets"], ways=params["ways"],
                      max_updates=params["max_updates"],
                      whole_line=params.get("whole_line", WHOLE_LINE)).run(beats)
    lane_causes = Counter(cause for write in model for cause in write.causes if cause)
    out.update({
        "costs": _costs(len(offered), records, len(result.write_cycles), lanes,
                        whole_line=params.get("whole_line", WHOLE_LINE)),
        "model_line_writes": len(model),
        "lane_writes": len(result.writes),
        "lane_writes_by_cause": {cause: lane_causes.get(cause, 0) for cause in CAUSES},
        "line_writes_by_cause": {cause: result.causes.count(cause) for cause in CAUSES},
        "cycles": result.cycles,
        "cycles_per_beat": result.cycles / len(offered) if offered else None,
        "flush_cycles_total": sum(result.flush_cycles),
        "dram_stall_cycles": result.dram_stall_cycles,
        "cross_check": line_cross_check(model, result, lanes),
    })
    return out


def _costs(beats, records, line_writes, lanes, *, whole_line=WHOLE_LINE):
    """The three ways of writing as ``{way: {"transfers", "bytes"}}``: ``beats`` dense line
    transfers, ``records`` per-gradient records (None: unknown), ``line_writes`` masked line
    writes (the RTL's DRAM writes); built with ``whole_line``, the records' and the line
    writes' values have the gradients' own width, as the RTL then writes them."""
    def way(transfers, size):
        return {"transfers": transfers, "bytes": size}
    line_bytes = write_bytes(whole_line)
    return {"dense": way(beats, dense_bytes(beats, lanes)),
            "records": way(records, None if records is None else line_bytes(records, 1)),
            "lines": way(line_writes, line_bytes(line_writes, lanes))}


def line_runs(writes, lanes):
    """Per-address writes ``(addr, value)`` as runs of consecutive writes to one line:
    ``[(line, {addr: sum}), ...]`` in order."""
    runs = []
    for addr, value in writes:
        line = addr - addr % lanes
        if not runs or runs[-1][0] != line:
            runs.append((line, Counter()))
        runs[-1][1][addr] += value
    return [(line, dict(sums)) for line, sums in runs]


def line_cross_check(model, result, lanes):
    """Compare the RTL's run on lines with the line model's writes ``model`` (see the module's
    description): ``{"match", "causes_match", "runs_match", "combining_ok", "first_mismatch"}``
    (the first differing cause or run, or None)."""
    # The compressor has a strobe for each cause but LINE (a value carried along by a line
    # write another lane caused, under the whole-line rule): the causes are compared without it.
    causes = [cause for write in model for cause in CAUSES
              if cause in write.causes and cause != "LINE"]
    expected = line_runs([(w.addr, w.value) for write in model for w in write.writes()], lanes)
    runs = line_runs(result.writes, lanes)
    first = (_first_difference("causes", causes, result.causes)
             or _first_difference("runs of writes to one line", expected, runs))
    combining_ok = len(runs) <= len(result.write_cycles) <= len(model)
    return {"match": causes == result.causes and runs == expected and combining_ok,
            "causes_match": causes == result.causes, "runs_match": runs == expected,
            "combining_ok": combining_ok, "first_mismatch": first}


def _first_difference(what, model, rtl):
    """The first index where the lists ``model`` and ``rtl`` (of ``what``, a plural) differ, or
    their lengths, as a JSON-able dict; None if they are equal."""
    for i, (expected, got) in enumerate(zip(model, rtl)):
        if expected != got:
            return {"what": what, "index": i, "model": repr(expected), "rtl": repr(got)}
    if len(model) != len(rtl):
        return {"what": f"the number of {what} differs", "model": len(model), "rtl": len(rtl)}
    return None
