"""Property bookkeeping shared by the harness and the proof runner.

Every property is registered with :meth:`PropertySet.check` (or ``assume``/``cover``) under a
*group* and a *name*. The source line of the call is recorded, so that when SymbiYosys reports
``Assert failed ... at properties/outputs.py:123`` the runner can name the property.

Focus: a proof job may *focus* on some groups. Properties of the focused groups are asserted;
every other assertion is assumed **for the previous cycles only** (through a register), which
is sound: if some property failed, the first one to fail (at step ``t``) is asserted in its own
job, whose assumptions only speak of steps ``< t``, where every property held.

Same-cycle lemmas: a property may name others it uses *in the same cycle* (``now=``); its job
then proves "those hold now => it holds now" (the assertion is that implication). Sound as
long as the relation "uses now" has no cycle (checked by :meth:`PropertySet.emit`): of the
properties failing first at step ``t``, one uses now only properties that hold at ``t`` (follow
"uses now" from any of them to a failing one; without a cycle this stops), and its own job
would have failed (docs/proofs.md, "Same-cycle lemmas").
"""

import sys
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from amaranth import Signal, Value
from amaranth.hdl import Assert, Assume, Cover

__all__ = ["PropertySet", "Prop", "GROUPS", "COMPONENT_GROUPS", "past", "balance_width"]

#: Property groups, by contract.
GROUPS = {
    # assumptions on inputs
    "input":        "assumption: grad_in stream rule, DRAM fairness (termination jobs)",
    # assertions on outputs
    "stream":       "stream rules on dram_out and on the internal L1->L2 push",
    "conservation": "accepted = written + accounted discard for the tracked address, every "
                    "cycle; at idle exactly",
    "idle":         "idle only when L1, pipeline and L2 are empty; stays up under flush; L2 "
                    "empty during INIT; the LFSR loads only while idle",
    "termination":  "flush: the measure of work left falls every K+1 cycles; idle within B",
    "progress":     "flush low, DRAM fair: an offered gradient is accepted within N cycles",
    "counters":     "event strobes and running counters count the right events",
    "policy":       "the tracked set's writes and row follow the reference model",
    "storage":      "with the whole storage read: the queue's and L2's shadows for the "
                    "tracked address match their storage; neither writes it out unless it "
                    "holds a write for it",
    "fifo":         "L2 is an order-preserving FIFO (one tracked write); on lines, the tracked "
                    "write holds what was pushed into it and merged into it, lane by lane",
    "combine":      "L2 on lines: a push merges only into the newest write in storage, for "
                    "its line, without overflow; the newest write's copy is its slot's",
    "queue":        "L1's output queue is an order-preserving FIFO (one tracked write)",
    "queue_sum":    "L1's output queue on lines: its shadow sum at a tracked address (written "
                    "in less read out) is what its occupied slots hold there",
    "lfsr":         "the LFSR steps through its polynomial's Galois sequence from any state, "
                    "loads a seed (0 loads 1), never sticks at 0",
    "ema_unit":     "the EMA unit's average is the exact EMA of its samples, in range; its "
                    "threshold is the clamp of its scaled source",
    "streamer":     "the streamer passes each gradient on with the threshold it is judged "
                    "against (0 in a bypass window) and the modes' settings",
    "registers_join": "the register file joined to the compressor (CompressorWithRegisters): "
                      "each compressor input a field drives holds what the AXI writes put in "
                      "it; each counter and status field reads the compressor's member",
    "registers":    "the AXI4-Lite register file: handshakes, responses; a write lands only in "
                    "its field; a read returns what was written or counted",
    "bound":        "the whole-line rule on the line L1: line writes sent, waiting and lines "
                    "held, with the beats deciding, never exceed the beats accepted; every "
                    "value pushed fits grad_width",
    "system_bound": "the compressor on lines under the whole-line rule: line transfers to DRAM, "
                    "writes waiting in L1 and L2, lines held and beats deciding never exceed the "
                    "beats accepted",
    "line_decision": "the whole-line rule's decision: a beat writes its line or allocates it, "
                     "never both; a written line carries every pending value; per lane, "
                     "nothing lost or made",
    "discard_totals": "the step's discard count and sum add up the accounted discards since the "
                      "first gradient accepted after the last completed flush barrier",
    "dual_threshold": "a tiny miss (and only it) is discarded: dropped or written as "
                      "+-small_threshold by the random bits' rule, and accounted",
    "ema":          "the EMA is exact, in range, never wraps; the threshold in force is its "
                    "clamp or threshold",
    "bypass":       "a gradient in an enabled window is judged against 0: written once, "
                    "unchanged, as DIRECT",
    "throughput":   "DRAM always ready, flush never high: grad_in.ready in every cycle after "
                    "INIT",
    "lemma":        "assumption proven on paper (docs/proofs.md): valid_count covers a row",
    # internal invariants
    "valid_count":  "valid_count == number of valid L1 entries <= sets*ways",
    "overflow":     "no sum/count/pointer overflow, count < max_updates",
    "unique_tag":   "at most one way of a set holds a given tag",
    "l2":           "L2 stream rules, level/pointer/full/empty/burst invariants, a write per "
                    "cycle in a burst",
    "pipeline":     "L1 pipeline and scan invariants (strengthening)",
    "forwarding":   "each L1 stage works on its set as it is now: rows read, forwarded or "
                    "corrected for s4",
    "system_conservation": "the compressor on lines: a tracked address's gradients accepted "
                           "less its DRAM writes and accounted discards are what L1, its output "
                           "queue and L2 hold for it; 0 at idle",
    "lines":        "the compressor on lines, from reset (bounded): a tracked address's "
                    "gradients accepted = DRAM writes + discards at idle; dram_out's stream "
                    "rules",
    "cover":        "reachability of interesting situations",
}

#: The groups that state a component's own contract (:mod:`properties.component`), proven in
#: that component's harness with every input free, and the component of each. (L1's contract,
#: :data:`properties.harness.L1_GROUPS`, is proven on L1 alone by the system's harness itself,
#: built with ``alone=True``.) The system's
#: jobs do not assert them; like every property outside a job's focus they are assumed there
#: for the past cycles (sound: a fact of every state the component reaches under any inputs
#: holds in every state the system reaches). Assumed in every cycle instead, they slowed some
#: of default's jobs four-fold.
COMPONENT_GROUPS = {"l2": "l2", "fifo": "l2", "combine": "l2_lines", "queue": "queue",
                    "queue_sum": "queue_lines",
                    "lfsr": "lfsr",
                    "ema_unit": "ema", "streamer": "streamer", "discard_totals": "discards",
                    "registers": "registers", "registers_join": "registers_joined",
                    "line_decision": "line_decision"}


def balance_width(value_width, fifo_depth, queue_depth):
    """Width of the tracked address's balances and shadows: at most one L1 entry, the
    pipeline's stages and every queue and L2 entry for one address, each value ``|v| <
    2**(value_width-1)``."""
    return value_width + (fifo_depth + queue_depth + 6).bit_length() + 2


def past(m, value, name):
    """A register holding ``value`` of the cycle before (0 after reset and at power-up, so a
    property ``~past(...) | ...`` says nothing in the first cycle)."""
    value = Value.cast(value)
    reg = Signal(value.shape(), name=f"{name}_last_cycle")
    m.d.sync += reg.eq(value)
    return reg


@dataclass
class Prop:
    kind: str          # "assert", "assume", "cover"
    group: str
    name: str
    test: Value
    src: tuple = field(default=("?", 0))
    now: tuple = ()    # "group/name" of the properties it uses in the same cycle
    only_for: tuple = None   # groups whose jobs assume it for the past (None: every job)

    @property
    def full_name(self):
        return f"{self.group}/{self.name}"


class PropertySet:
    """``alone``: the properties of one component proven in its own harness; what the
    component requires of its inputs (:meth:`require`) is then assumed, where in the system
    it is asserted."""

    def __init__(self, alone=False):
        self.props = []
        self.alone = alone

    def _add(self, kind, group, name, test, now=(), only_for=None):
        assert group in GROUPS, group
        bad = sorted(set(name) & set('<>&"'))
        if bad:
            # SymbiYosys writes the name unescaped into its JUnit report, which then does not
            # parse: the runner would see no result (e.g. a cover job with "0 reached").
            raise ValueError(f"property name {name!r} contains {' '.join(bad)}: SymbiYosys's "
                             f"JUnit report cannot hold <, >, & or \"")
        frame = sys._getframe(2)
        src = (frame.f_code.co_filename, frame.f_lineno)
        prop = Prop(kind, group, name, Value.cast(test), src,
                    tuple(now), None if only_for is None else tuple(only_for))
        self.props.append(prop)
        return prop

    def check(self, group, name, test, now=(), only_for=None):
        """An assertion (or, outside the focus, an assumption on past cycles). ``now``: the
        ``"group/name"`` of assertions it may assume in the same cycle (same-cycle lemmas, each
        proven in its own job; the relation must have no cycle). ``only_for``: groups; outside
        the focus it is assumed only in jobs focused on one of them (a job that drops an
        assumption proves no less), so that the other jobs' solvers do not meet it."""
        return self._add("assert", group, name, test, now, only_for)

    def _check_now(self):
        """Every ``now`` names an assertion, and "uses now" has no cycle."""
        by_name = {}
        for p in self.props:
            if p.kind == "assert":
                by_name.setdefault(p.full_name, []).append(p)
        uses = {n: {u for p in ps for u in p.now} for n, ps in by_name.items()}
        for n, us in uses.items():
            unknown = [u for u in us if u not in by_name]
            assert not unknown, f"{n} uses now {unknown}: no such assertion"
        state = {}

        def visit(n, path):
            if state.get(n) == "done":
                return
            assert state.get(n) != "open", f"same-cycle lemmas form a cycle: {path + [n]}"
            state[n] = "open"
            for u in sorted(uses[n]):
                visit(u, path + [n])
            state[n] = "done"
        for n in uses:
            visit(n, [])
        return by_name

    def assume(self, group, name, test):
        return self._add("assume", group, name, test)

    def require(self, group, name, test):
        """What a component needs of its inputs: assumed in its own harness, asserted in the
        system's (ZipCPU's swap)."""
        return self._add("assume" if self.alone else "assert", group, name, test)

    def cover(self, name, test):
        return self._add("cover", "cover", name, test)

    def focused(self, focus):
        """The test "is this property asserted under ``focus``?" (see :meth:`emit`), a
        function of a :class:`Prop`. A focus entry that names no property is refused."""
        excluded, named = [], []
        if focus is not None:
            excluded = [f[1:] for f in focus if f.startswith("-")]
            named = [f for f in focus if not f.startswith("-")]
            names = [p.full_name for p in self.props]
            unknown = [f for f in focus if f.lstrip("-") not in GROUPS and
                       not any(fnmatchcase(n, f.lstrip("-")) for n in names)]
            assert not unknown, f"focus names no property: {unknown}"

        def in_focus(prop):
            full = prop.full_name
            return (focus is None or ((prop.group in focus or
                                       any(fnmatchcase(full, f) for f in named)) and
                                      not any(fnmatchcase(full, f) for f in excluded)))
        return in_focus

    def emit(self, m, *, focus=None, covers=True, guard=None, assume_others=True):
        """Add the statements to module ``m``.

        ``focus``: set of groups (``"conservation"``) or single properties
        (``"conservation/l2_shadow_sum_matches_storage"``, or a pattern such as
        ``"termination/flush_idle_within_B_*"`` for a name that holds a parameter) asserted
        (``None``: all); an entry ``"-group/name"`` takes that property out of the focus again
        (it is then assumed for the past cycles, like every property outside the focus).
        ``guard``: a signal that, when high, disables every assertion (e.g. the reset cycle).
        """
        in_focus = self.focused(focus)
        by_name = self._check_now()
        past = []
        for prop in self.props:
            if prop.kind == "assume":
                stmt = Assume(prop.test)
            elif prop.kind == "cover":
                if not covers:
                    continue
                stmt = Cover(prop.test)
            elif in_focus(prop):
                test = prop.test
                if prop.now:
                    # Same-cycle lemmas: proven here under the lemmas of this cycle.
                    lemmas = [q.test for u in prop.now for q in by_name[u]]
                    test = ~_all(lemmas if guard is None else [guard | t for t in lemmas]) | test
                stmt = Assert(test if guard is None else (guard | test))
            else:
                if assume_others and (prop.only_for is None or focus is None or
                                      any(g in focus or any(f.startswith(g + "/") for f in focus)
                                          for g in prop.only_for)):
                    past.append(prop.test if guard is None else (guard | prop.test))
                continue
            stmt.src_loc = self.src_loc(prop)
            m.d.comb += stmt
        if past:
            others_ok = Signal(init=1, name="others_held_last_cycle")
            m.d.sync += others_ok.eq(Value.cast(1).all() if not past else
                                     _all(past))
            stmt = Assume(others_ok)
            m.d.comb += stmt

    @staticmethod
    def src_loc(prop):
        # "properties/outputs.py@conservation/name:LINE": SymbiYosys prints the property's
        # group and name with every failure.
        return (f"{prop.src[0]}@{prop.group}/{prop.name}", prop.src[1])

    def by_src(self):
        """``{(basename, line): "group/name"}`` for naming failures reported by SymbiYosys."""
        import os
        out = {}
        for prop in self.props:
            key = (os.path.basename(prop.src[0]), prop.src[1])
            out.setdefault(key, f"{prop.group}/{prop.name}")
        return out


def _all(tests):
    from amaranth import Cat
    return Cat(*[t.bool() for t in tests]).all()
