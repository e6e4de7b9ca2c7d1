"""The figures of a bandwidth report, computed from a simulation result.

Record formats used for bytes (stated in every report; the sizes are
:mod:`reports.line_costs`'):

* an input gradient is ``4 + 2`` bytes: a 32-bit address and an int16 gradient;
* a DRAM write is, under the whole-line rule (the default policy), ``4 + 2`` bytes: a 32-bit
  address and a value in the gradients' format; under the seed's policy (``whole_line=False``)
  ``4 + 4``: the value, ``grad_width + 2`` = 18 bits signed, padded to 32 bits.

Every figure is taken after the final flush, so every accepted gradient has reached DRAM.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from gradient_compressor.design.params import DEFAULTS, WHOLE_LINE
from gradient_compressor.model import CAUSES, ReferenceModel

from .line_costs import dense_bytes, write_bytes

__all__ = ["BYTES_PER_GRADIENT", "bytes_per_write", "record_format", "Conservation",
           "check_conservation",
           "conservation_json", "bursts", "cross_check", "reference_points", "compute_metrics",
           "split_by_step"]

BYTES_PER_GRADIENT = dense_bytes(1, 1)


def bytes_per_write(whole_line=WHOLE_LINE):
    """Bytes of one DRAM write (a record) under the policy ``whole_line`` names."""
    return write_bytes(whole_line)(1, 1)


def record_format(whole_line=WHOLE_LINE):
    """The record formats, in words, under the policy ``whole_line`` names."""
    value = ("a value in the gradients' format, the whole-line rule's" if whole_line else
             f"a 4-byte value ({DEFAULTS['grad_width'] + 2}-bit signed sum, padded; the "
             f"seed's policy)")
    return (f"input gradient = 4-byte address + 2-byte int16 gradient ({BYTES_PER_GRADIENT} "
            f"bytes); DRAM write = 4-byte address + {value} ({bytes_per_write(whole_line)} "
            f"bytes)")


@dataclass
class Conservation:
    """Result of :func:`check_conservation`."""
    ok: bool
    addresses: int
    #: ``[(addr, sum accepted, sum written), ...]`` for the first mismatching addresses.
    mismatches: list = field(default_factory=list)
    mismatch_count: int = 0
    #: A problem other than per-address sums (gradients not accepted as offered).
    problem: str = ""

    def message(self):
        if self.ok:
            return (f"conservation holds: for each of {self.addresses} addresses, the values "
                    f"written to DRAM add up to the gradients accepted")
        parts = []
        if self.problem:
            parts.append(self.problem)
        if self.mismatch_count:
            shown = ", ".join(f"addr {a:#x}: accepted {g}, written {w}"
                              for a, g, w in self.mismatches)
            parts.append(f"{self.mismatch_count} address(es) where the values written differ "
                         f"from the gradients accepted ({shown})")
        return "CONSERVATION CHECK FAILED: " + "; ".join(parts)


def check_conservation(accepted, writes, offered=None, show=5, discards=()):
    """Per address, the sum of values written plus the accounted discard errors (the dual
    threshold's, ``grad - written`` each) must equal the sum of gradients accepted.

    ``accepted`` is a list of ``(addr, grad, ...)``, ``writes`` and ``discards`` lists of
    ``(addr, value)``; ``offered`` (optional, ``(addr, grad)`` pairs) must equal what was
    accepted, in order.
    """
    sums = defaultdict(int)
    for item in accepted:
        sums[item[0]] += item[1]
    written = defaultdict(int)
    for addr, value in [*writes, *discards]:
        written[addr] += value
    bad = sorted(a for a in set(sums) | set(written) if sums.get(a, 0) != written.get(a, 0))
    problem = ""
    if offered is not None:
        offered = list(offered)
        if len(offered) != len(accepted):
            problem = (f"{len(offered)} gradients were offered but {len(accepted)} were "
                       f"accepted")
        elif any((a[0], a[1]) != (o[0], o[1]) for a, o in zip(accepted, offered)):
            problem = "the gradients accepted differ from those offered"
    return Conservation(ok=not bad and not problem, addresses=len(set(sums) | set(written)),
                        mismatches=[(a, sums.get(a, 0), written.get(a, 0)) for a in bad[:show]],
                        mismatch_count=len(bad), problem=problem)


def conservation_json(conservation):
    """A :class:`Conservation` as the report's JSON holds it (every field and its message)."""
    return {"ok": conservation.ok, "addresses": conservation.addresses,
            "mismatch_count": conservation.mismatch_count,
            "mismatches": [list(m) for m in conservation.mismatches],
            "problem": conservation.problem, "message": conservation.message()}


def bursts(write_cycles):
    """Lengths of the DRAM bursts: runs of writes on consecutive cycles."""
    lengths, run, last = [], 0, None
    for cycle in write_cycles:
        if last is not None and cycle == last + 1:
            run += 1
        else:
            if run:
                lengths.append(run)
            run = 1
        last = cycle
    if run:
        lengths.append(run)
    return lengths


def _ratio(gradients, writes):
    return gradients / writes if writes else None


def _point(gradients, writes, causes, whole_line):
    bytes_in, bytes_out = gradients * BYTES_PER_GRADIENT, writes * bytes_per_write(whole_line)
    return {
        "gradients": gradients, "dram_writes": writes,
        "bytes_in": bytes_in, "bytes_out": bytes_out,
        "compression_ratio": _ratio(gradients, writes),
        "write_reduction": 1 - writes / gradients if gradients else None,
        "bandwidth_reduction": 1 - bytes_out / bytes_in if bytes_in else None,
        "writes_by_cause": {cause: causes.get(cause, 0) for cause in CAUSES},
    }


def reference_points(ops, gradients, max_updates=DEFAULTS["max_updates"],
                     grad_width=DEFAULTS["grad_width"], whole_line=WHOLE_LINE):
    """The two reference points on the same operations: no compression (one DRAM write per
    gradient, as it came: the gradients' format) and the unbounded-L1 oracle of the same
    policy (``ReferenceModel(sets=None)``)."""
    oracle = ReferenceModel(sets=None, max_updates=max_updates, grad_width=grad_width,
                            whole_line=whole_line).run(ops)
    none = _point(gradients, gradients, {}, whole_line=True)
    none["writes_by_cause"] = {cause: 0 for cause in CAUSES}
    return {"no_compression": none,
            "oracle": _point(gradients, len(oracle), Counter(w.cause for w in oracle),
                             whole_line)}


def cross_check(ops, result, sets, ways, max_updates=DEFAULTS["max_updates"],
                grad_width=DEFAULTS["grad_width"], whole_line=WHOLE_LINE):
    """Compare the RTL's writes, causes and accounted discards with :class:`ReferenceModel`
    of the same geometry (``ops`` may set run-time modes).

    Returns ``{"match": bool, "model_writes": n, "first_mismatch": ... or None, ...}``."""
    reference = ReferenceModel(sets=sets, ways=ways, max_updates=max_updates,
                               grad_width=grad_width, whole_line=whole_line)
    model = reference.run(ops)
    expected = [(w.addr, w.value) for w in model]
    causes = [w.cause for w in model]
    first = None
    for i, (e, g) in enumerate(zip(expected, result.writes)):
        if tuple(e) != tuple(g):
            first = {"index": i, "model": list(e), "rtl": list(g)}
            break
    if first is None and len(expected) != len(result.writes):
        n = min(len(expected), len(result.writes))
        first = {"index": n, "model": len(expected), "rtl": len(result.writes),
                 "what": "number of writes differs"}
    cause_match = causes == list(result.causes)
    discards_match = [(d.addr, d.error) for d in reference.discards] == list(result.discards)
    return {"match": first is None and cause_match and discards_match,
            "writes_match": first is None, "causes_match": cause_match,
            "discards_match": discards_match, "model_writes": len(expected),
            "first_mismatch": first}


def split_by_step(trace, result):
    """Writes per step, by cause: a step's writes all leave before the next step's first
    gradient is accepted (the flush barrier drains L1 and L2)."""
    bounds = trace.step_bounds()
    # Cycle at which each step's first gradient was accepted (None for an empty step).
    starts = [result.accept_cycles[s] if e > s else None for s, e in bounds]
    cuts = []   # writes of step i have cycle < cuts[i]
    for i in range(len(bounds)):
        later = [c for c in starts[i + 1:] if c is not None]
        cuts.append(later[0] if later else float("inf"))
    per_step = [Counter() for _ in bounds]
    step = 0
    for cycle, cause in zip(result.write_cycles, result.causes):
        while cycle >= cuts[step]:
            step += 1
        per_step[step][cause] += 1
    return [{cause: c.get(cause, 0) for cause in CAUSES} for c in per_step]


def compute_metrics(trace, result, ops, *, sets, ways, max_updates=DEFAULTS["max_updates"],
                    grad_width=DEFAULTS["grad_width"], whole_line=WHOLE_LINE,
                    conservation=None):
    """Every figure of the report for one workload, as a JSON-able dict.

    If the conservation check fails, the dict says so and holds no ratio."""
    gradients = len(trace)
    if conservation is None:
        conservation = check_conservation(result.accepted, result.writes,
                                          offered=zip(trace.addr.tolist(), trace.grad.tolist()))
    out = {"workload": trace.name, "description": trace.description,
           "trace": trace.summary(), "conservation": conservation_json(conservation)}
    if not conservation.ok:
        return out
    causes = Counter(result.causes)
    point = _point(gradients, len(result.writes), causes, whole_line)
    lengths = bursts(result.write_cycles)
    small = result.hits + result.misses
    out.update(point)
    out.update({
        "l1_hits": result.hits, "l1_misses": result.misses,
        "l1_hit_rate": result.hits / small if small else None,
        "cycles": result.cycles,
        "cycles_per_gradient": result.cycles / gradients if gradients else None,
        "dram_stall_cycles": result.dram_stall_cycles,
        "input_stall_cycles": result.input_stall_cycles,
        "flushes": len(result.flush_cycles),
        "flush_cycles_total": sum(result.flush_cycles),
        "flush_cycles_max": max(result.flush_cycles, default=0),
        "bursts": {"count": len(lengths),
                   "mean_length": sum(lengths) / len(lengths) if lengths else None,
                   "max_length": max(lengths, default=0),
                   "histogram": {str(k): v for k, v in sorted(Counter(lengths).items())}},
        "writes_per_step": split_by_step(trace, result),
    })
    out["reference_points"] = reference_points(ops, gradients, max_updates, grad_width,
                                               whole_line)
    out["cross_check"] = cross_check(ops, result, sets, ways, max_updates, grad_width,
                                     whole_line)
    return out
