"""Policy refinement: for an arbitrary tracked set, the design's writes and its row follow an
abstract model of that set, kept by the harness with the rules of ``model/reference.py``.

The model holds the set's ways (valid, tag, sum, count) and its round-robin victim pointer. It
takes the set's gradients in the order they are accepted (the harness records each one as it
is accepted on ``grad_in``, with the threshold the streamer gave it (``threshold``, the
EMA's, or 0 in a bypass window: :mod:`.modes` proves which) and the dual-threshold settings in
force then, and applies it when the design commits it: a tiny miss allocates nothing and is
dropped, or written stochastically by the rule of :func:`.modes.stochastic_writes`), and it
writes the set out, lowest way first, when the flush scan passes over the set. Asserted
(``policy``):

* every write the design pushes for the tracked set (direct, threshold, max-updates, eviction,
  stochastic or flush) is the model's next write: address, value and cause; a gradient the
  model writes nothing for is pushed nowhere; no other write names the set;
* the gradient in ``s1`` is the one accepted (address, value, the threshold the streamer gave
  it, the dual-threshold settings);
* outside INIT, the set's row in storage equals the model (valid ways with tag, sum, count;
  the victim pointer), so after INIT the set holds nothing;
* at the commit of a gradient of the set, ``l1_hit`` / ``l1_miss`` / ``discard`` say what the
  model says.

On lines (the line L1 alone, :func:`_add_lines`) the model holds lines and the same
properties are stated with line writes; the decision is also stated lane by lane
(``decision_lane<i>_is_the_models``), from which the whole line write and the tracked set's
ways follow in the same cycle.

As the tracked set is arbitrary (``AnyConst``), this holds for every set.
"""

from types import SimpleNamespace

from amaranth import *

from gradient_compressor.design import L1State
from gradient_compressor.design.bits import lowest_index
from gradient_compressor.design.compare import at_least, at_most
from gradient_compressor.design.layouts import Cause, grad_range

__all__ = ["add"]


def add(h, m, P):
    if h.lanes > 1:
        return _add_lines(h, m, P)
    model = Signal(h.dut.l1.row_layout, name="model_row")
    h.model = model
    x = _decide(h, m, model)
    _registered_decision(h, m, x)
    _conservation_terms(h, m, x)
    _model_holds_each_tag_at_most_once(h, P, model)
    _decision_conserves(h, P, x, lambda way: way.sum)

    # -- the flush scan over the tracked set (ReferenceModel.flush) -------------------------
    scanning, held, flushed = _model_flush_scan(h, m, model, x.after, x.commit)
    _model_step(h, m, P, scanning, held, flushed, flushed.sum,
                Mux(h.stage_valid[3] & (x.addr == h.track), x.grad, 0))

    _one_lane_writes(h, P, x, scanning, held, flushed)
    same_row = _tracked_set_is_the_models(
        h, P, model,
        lambda r, w: (r.tag == w.tag) & (r.sum == w.sum) & (r.count == w.count))
    _scan_and_strobes(h, m, P, held, x, x.exp4_tiny, same_row)


def _gradient(h, m, model):
    """The tracked set's gradient deciding in ``s3`` (as accepted: the pipeline group) and
    what the model holds for its address: the way it hits and that way's sum and count after
    it, the way it would take on a miss, the victim."""
    mu = h.dut.max_updates
    g = h.stage[3]
    x = SimpleNamespace(commit=Signal(name="model_commit"), addr=g.addr, grad=g.grad)
    m.d.comb += x.commit.eq(h.stage_valid[3] & (h.set_of(g.addr) == h.track_set))
    x.tag = g.addr[h.set_bits:]
    x.match = Cat(w.valid & (w.tag == x.tag) for w in model.ways)
    x.free  = Cat(~w.valid for w in model.ways)
    x.hit_way  = lowest_index(m, x.match, "model_hit_way")
    x.free_way = lowest_index(m, x.free, "model_free_way")
    x.hit      = model.ways[x.hit_way]
    x.victim   = model.ways[model.victim]
    x.hit_sum   = Signal(signed(h.vw + 1), name="model_hit_sum")
    x.hit_count = Signal(range(mu + 2), name="model_hit_count")
    m.d.comb += [x.hit_sum.eq(x.hit.sum + g.grad), x.hit_count.eq(x.hit.count + 1)]
    return x


def _decide(h, m, model):
    """The model's decision for the tracked set's gradient deciding in ``s3``
    (model/reference.py, ReferenceModel.write): its write, the strobes and the set after
    it."""
    l1, W, mu = h.dut.l1, h.dut.ways, h.dut.max_updates
    x = _gradient(h, m, model)
    g = h.stage[3]
    g_addr, g_grad, g_thr = g.addr, g.grad, h.judged[3]
    g_small, g_stoch = g.small_threshold, g.stochastic
    tag, match, free, hit_way, free_way = x.tag, x.match, x.free, x.hit_way, x.free_way
    victim, hit_sum, hit_count = x.victim, x.hit_sum, x.hit_count

    x.exp_valid = exp_valid = Signal(name="model_writes")
    x.exp_addr  = exp_addr  = Signal(h.aw, name="model_write_addr")
    x.exp_value = exp_value = Signal(signed(h.vw + 1), name="model_write_value")
    x.exp_cause = exp_cause = Signal(Cause, name="model_write_cause")
    x.exp_hit   = Signal(name="model_hit")
    x.exp_miss  = Signal(name="model_miss")
    x.exp_tiny  = Signal(name="model_tiny_miss")
    x.after = after = Signal(l1.row_layout, name="model_row_after")
    m.d.comb += after.eq(model)

    def write(addr, value, cause):
        m.d.comb += [exp_valid.eq(1), exp_addr.eq(addr), exp_value.eq(value),
                     exp_cause.eq(cause)]

    def allocate(way):
        m.d.comb += [after.ways[way].valid.eq(1), after.ways[way].tag.eq(tag),
                     after.ways[way].sum.eq(g_grad), after.ways[way].count.eq(1)]

    if h.whole_line:
        # The whole-line rule (ReferenceModel._write_whole_line): a hit is decided on its
        # entry whether the gradient is direct or small.
        with m.If(match.any()):
            _whole_line_hit(h, m, x, write, abs(g_grad) >= g_thr)
        with m.Elif(abs(g_grad) >= g_thr):
            write(g_addr, g_grad, Cause.DIRECT)
    else:
        with m.If(abs(g_grad) >= g_thr):
            write(g_addr, g_grad, Cause.DIRECT)
        with m.Elif(match.any()):
            m.d.comb += x.exp_hit.eq(1)
            with m.If(abs(hit_sum) >= g_thr):
                write(g_addr, hit_sum, Cause.ACCUM_THRESHOLD)
                m.d.comb += after.ways[hit_way].valid.eq(0)
            with m.Elif(hit_count >= mu):
                write(g_addr, hit_sum, Cause.MAX_UPDATES)
                m.d.comb += after.ways[hit_way].valid.eq(0)
            with m.Else():
                m.d.comb += [after.ways[hit_way].sum.eq(hit_sum),
                             after.ways[hit_way].count.eq(hit_count)]
    with m.Elif(abs(g_grad) < g_small):
        # Dual threshold: a tiny miss allocates nothing. The stochastic rule on the random
        # bits in force now (the harness's s3_rule), rounding to the level (small_threshold,
        # or the whole-line rule's).
        m.d.comb += x.exp_tiny.eq(1)
        level = h.rounding_level(g_small)
        with m.If(g_stoch & h.s3_rule):
            write(g_addr, Mux(g_grad < 0, -level, level), Cause.STOCHASTIC)
    with m.Elif(free.any()):
        m.d.comb += x.exp_miss.eq(1)
        if mu == 1:
            write(g_addr, g_grad, Cause.MAX_UPDATES)
        else:
            allocate(free_way)
    with m.Else():
        m.d.comb += x.exp_miss.eq(1)
        write(Cat(h.track_set, victim.tag), victim.sum, Cause.EVICTION)
        allocate(model.victim)
        m.d.comb += after.victim.eq(Mux(model.victim == W - 1, 0, model.victim + 1))
    return x


def _whole_line_hit(h, m, x, write, direct):
    """The whole-line rule's decision on a hit (``direct`` or not): ``sum + g`` leaves as one
    write if it fits ``grad_width`` bits and is written (direct, crossing the threshold, at
    ``max_updates``), the entry freed; if it does not fit, one value leaves and the other
    stays held, the entry as updated once (a direct gradient leaves, its sum stays; a small
    one stays, its sum leaves as ``ACCUM_THRESHOLD``)."""
    g, mu, gw = h.stage[3], h.dut.max_updates, h.gw
    way = x.after.ways[x.hit_way]
    hit_sum = x.hit_sum
    fits = Signal(name="model_hit_sum_fits")
    m.d.comb += [fits.eq((hit_sum >= -2 ** (gw - 1)) & (hit_sum <= 2 ** (gw - 1) - 1)),
                 x.exp_hit.eq(~direct)]
    with m.If(~fits):
        m.d.comb += way.count.eq(1)
        with m.If(direct):
            write(g.addr, g.grad, Cause.DIRECT)
        with m.Else():
            write(g.addr, x.hit.sum, Cause.ACCUM_THRESHOLD)
            m.d.comb += way.sum.eq(g.grad)
    with m.Elif(direct):
        write(g.addr, hit_sum, Cause.DIRECT)
        m.d.comb += way.valid.eq(0)
    with m.Elif(abs(hit_sum) >= h.judged[3]):
        write(g.addr, hit_sum, Cause.ACCUM_THRESHOLD)
        m.d.comb += way.valid.eq(0)
    with m.Elif(x.hit_count >= mu):
        write(g.addr, hit_sum, Cause.MAX_UPDATES)
        m.d.comb += way.valid.eq(0)
    with m.Else():
        m.d.comb += [way.sum.eq(hit_sum), way.count.eq(x.hit_count)]


def _registered_decision(h, m, x):
    """The decision's write comes out of s4 in the next cycle (into the queue), and so do the
    discard outputs: the model's, registered beside it."""
    x.commit4 = Signal(name="model_commit_s4")
    x.exp4 = Signal(h.dut.l1.probe.write.shape(), name="model_write_s4")
    x.exp4_valid = Signal(name="model_writes_s4")
    x.exp4_tiny = Signal(name="model_tiny_miss_s4")
    m.d.sync += [x.commit4.eq(x.commit), x.exp4_valid.eq(x.exp_valid),
                 x.exp4.addr.eq(x.exp_addr), x.exp4.value.eq(x.exp_value),
                 x.exp4.cause.eq(x.exp_cause), x.exp4_tiny.eq(x.exp_tiny)]


def _conservation_terms(h, m, x):
    """For conservation (properties/outputs.py): what the model holds for the tracked address,
    and what the decision now in s4 passes on for it (its write into the queue, the part a
    tiny miss discards). Stated on the model, the conservation proof is arithmetic on the
    harness's own state; that the design does what the model does is this group's."""
    g4, exp4 = h.stage[4], x.exp4
    h.model_sum = Signal(signed(h.bw), name="model_tracked_sum")
    h.model_s4_sum = Signal(signed(h.bw), name="model_tracked_s4_sum")
    written4 = Mux(x.exp4_valid, exp4.value, 0)
    m.d.comb += [
        h.model_sum.eq(_tracked_sum(h, h.model, lambda way: way.sum)),
        h.model_s4_sum.eq(Mux(x.commit4 & x.exp4_valid & (exp4.addr == h.track), exp4.value, 0) +
                          Mux(x.commit4 & x.exp4_tiny & (g4.addr == h.track),
                              g4.grad - written4, 0)),
    ]
    # The model's own conservation at a decision (_decision_conserves): what is written for
    # the tracked address, what a tiny miss discards of it, the gradient if it is its.
    x.written_t = Mux(x.exp_valid & (x.exp_addr == h.track), x.exp_value, 0)
    x.tiny_t = Mux(x.exp_tiny & (x.addr == h.track),
                   x.grad - Mux(x.exp_valid, x.exp_value, 0), 0)
    x.grad_t = Mux(x.addr == h.track, x.grad, 0)


def _tracked_sum(h, row, sum_of):
    """What ``row`` (the model's, before or after a decision) holds for the tracked address:
    ``sum_of`` the way holding its tag (one lane's sum, or on lines its lane's)."""
    mine = [w.valid & (w.tag == h.track_tag) for w in row.ways]
    return sum(Mux(v, sum_of(w), 0) for v, w in zip(mine, row.ways))


def _model_holds_each_tag_at_most_once(h, P, model):
    """The model is well formed: at most one way per tag (no decision allocates a tag it
    holds). The conservation proofs need it."""
    W = h.dut.ways
    for i in range(W):
        for j in range(i + 1, W):
            P.check("policy", "model_holds_each_tag_at_most_once",
                    ~(model.ways[i].valid & model.ways[j].valid &
                      (model.ways[i].tag == model.ways[j].tag)))


def _decision_conserves(h, P, x, sum_of):
    """The model's own conservation, for the tracked address, at each decision on its set:
    what the set holds for it after, what is written for it and what a tiny miss discards add
    up to what it held before and the gradient (if it is the gradient's)."""
    # (Uses the model's one-way-per-tag fact in the same cycle (with one way there is none): a
    # same-cycle lemma, properties/base.py; without it the induction on default did not
    # finish in 200 s.)
    P.check("conservation", "model_decision_conserves_the_tracked_address",
            ~x.commit | (_tracked_sum(h, x.after, sum_of) + x.written_t + x.tiny_t ==
                         h.model_sum + x.grad_t),
            now=["policy/model_holds_each_tag_at_most_once"] if h.dut.ways > 1 else [])


def _one_lane_writes(h, P, x, scanning, held, flushed):
    """One lane: the write s4 offers is the model's decision's, a flush write of the set the
    model's lowest valid way, and no other write into the queue names the set."""
    probe = h.dut.l1.probe
    w4, exp4 = probe.write, x.exp4
    P.check("policy", "decision_writes_what_the_model_writes",
            ~x.commit4 | ((probe.pushes == x.exp4_valid) &
                          (~x.exp4_valid | ((w4.addr == exp4.addr) & (w4.value == exp4.value) &
                                            (w4.cause == exp4.cause)))))
    queued = probe.queue.w.payload
    P.check("policy", "flush_writes_what_the_model_writes",
            ~(scanning & h.queue_in) |
            (held.any() & (queued.addr == Cat(h.track_set, flushed.tag)) &
             (queued.value == flushed.sum) & (queued.cause == Cause.FLUSH)))
    P.check("policy", "no_other_write_names_the_tracked_set",
            ~(h.queue_in & (h.set_of(queued.addr) == h.track_set)) | x.commit4 | scanning)


def _tracked_set_is_the_models(h, P, model, same_entry, now=()):
    """Outside INIT the tracked set (less the ways the scan has written out) equals the model,
    stated a way at a time (a valid way's entry: ``same_entry``), and the victim pointer: the
    scaled configurations prove each in a job of its own (proofs/jobs.py ONE_JOB_EACH).
    Returns the properties (the strobes' same-cycle lemmas)."""
    row = h.track_held
    same_row = []
    for i, (r, w) in enumerate(zip(row.ways, model.ways)):
        same_row.append(P.check(
            "policy", f"tracked_set_way{i}_is_the_models_after_init",
            h.init | ((r.valid == w.valid) & (~w.valid | same_entry(r, w))), now=now))
    same_row.append(P.check("policy", "tracked_set_victim_is_the_models_after_init",
                            h.init | (row.victim == model.victim)))
    return same_row


def _scan_and_strobes(h, m, P, held, x, tiny4, same_row):
    """The model is empty during INIT; the scan stops after its set when flush drops; the
    hit, miss and tiny-miss strobes of a decision of the tracked set (``x``: the model's),
    and its discard strobe in s4 (``tiny4``), are the model's."""
    d, l1 = h.dut, h.dut.l1
    probe = l1.probe
    P.check("policy", "model_empty_while_init",
            ~h.init | (~held.any() & (h.model.victim == 0)))
    # A flush scan moves on to the next set only under flush: when flush drops, L1 finishes
    # the set it is scanning and goes back to work.
    last_scan_set = Signal.like(probe.scan_set, name="scan_set_last_cycle")
    last_scanning = Signal(name="scanning_without_flush_last_cycle")
    m.d.sync += [last_scan_set.eq(probe.scan_set),
                 last_scanning.eq(h.scan & ~d.flush)]
    P.check("policy", "scan_stops_after_its_set_when_flush_drops",
            ~last_scanning | ~h.scan | (probe.scan_set == last_scan_set))
    # Stated on what s3 decides on (the pipeline group's same-cycle facts: its gradient, its
    # set now and its entry now) and the tracked set now (this group's): from the past cycles
    # alone the induction on default did not finish in 10 minutes.
    P.check("policy", "hit_miss_strobes_are_the_models",
            ~x.commit | ((d.l1_hit == x.exp_hit) & (d.l1_miss == x.exp_miss) &
                         (l1.small_miss == x.exp_tiny)),
            now=["pipeline/s3_holds_the_gradient_as_accepted_judged_by_its_threshold",
                 "pipeline/s3_tiny_is_its_gradients", "forwarding/s3_decides_on_its_set_now",
                 "forwarding/s3_decides_on_the_entry_of_its_address_now",
                 "pipeline/s3_only_in_run"] + [p.full_name for p in same_row])
    P.check("policy", "discard_strobe_is_the_models", ~x.commit4 | (d.discard == tiny4))


def _add_lines(h, m, P):
    """The policy refinement on lines (the line L1, ``design.LineAccumulator``, alone): the
    tracked set's model holds lines (a tag, a sum per lane, the lanes held, the beats that
    updated the line: ``model.LineModel``'s entry), takes the beat deciding in ``s3`` and
    writes the beat's own line write and a victim's; the same properties as on one lane, with
    a line write (address, mask, and per masked lane its value and cause) where one lane has
    a write, and conservation for the tracked address (a lane of a line)."""
    l1, lane = h.dut.l1, h.track_lane
    probe = l1.probe
    model = Signal(l1.row_layout, name="model_row")
    h.model = model
    x = _line_beat(h, m, model)
    h.line_beat = x       # (the dual threshold's random steps read the model's miss)
    (_line_decision_whole if h.whole_line else _line_decision)(h, m, x, model)
    _line_registered_decision(h, m, x)
    _line_conservation_terms(h, m, x)
    _model_holds_each_tag_at_most_once(h, P, model)
    _decision_conserves(h, P, x, lambda way: way.sums[lane])

    # -- the flush scan over the tracked set (LineModel.flush) ------------------------------
    scanning, held, flushed = _model_flush_scan(h, m, model, x.after, x.commit)
    _model_step(h, m, P, scanning, held, flushed,
                Mux(flushed.held.bit_select(lane, 1), flushed.sums[lane], 0),
                Mux(h.stage_valid[3], h.at_track(x.g.addr, x.g.mask, x.g.grads), 0))

    lanes_now = _line_decision_lanes(h, m, P, x, model)
    _line_writes(h, m, P, x, scanning, held, flushed, lanes_now)
    same_row = _tracked_set_is_the_models(
        h, P, model,
        lambda r, w: ((r.tag == w.tag) & (r.sums.as_value() == w.sums.as_value()) &
                      (r.held == w.held) & (r.count == w.count)),
        now=lanes_now)
    _scan_and_strobes(h, m, P, held, x, x.tiny4, same_row)
    if h.covers:
        _line_covers(h, m, P, x.commit4, x.own4, x.vic4, x.tiny4, x.exp_hit, x.crossed,
                     x.held_after)
    # One masked line write per line per beat: the victim's line is never the beat's own.
    # (For a beat of the tracked set, an arbitrary set, so for every beat: the rows of the
    # tracked set are the ones kept well formed. For every set at once, default's 8-lane
    # induction found a state with a miss that its row contradicts.)
    P.check("policy", "no_two_line_writes_for_one_line_in_a_beat",
            ~(x.commit4 & probe.pushes & probe.s4_victim) |
            (probe.write.addr != probe.s4_victim_p.addr))


def _line_beat(h, m, model):
    """The tracked set's beat deciding in ``s3`` (as accepted: the pipeline group): which of
    its lanes are direct and which small, and the model's hit on its line: per lane the hit
    line's new sum, whether it crosses the threshold and stays held, whether the line fills,
    and on a miss which small lanes are tiny and which allocate."""
    probe, N, mu = h.dut.l1.probe, h.lanes, h.dut.max_updates
    g = h.stage[3]
    x = SimpleNamespace(g=g, commit=Signal(name="model_commit"))
    m.d.comb += x.commit.eq(h.stage_valid[3] & (h.set_of(g.addr) == h.track_set))
    x.thr = thr = [h.lane_threshold(h.judged[3], g.bypass[i]) for i in range(N)]
    x.direct, x.small = Signal(N, name="model_direct_lanes"), Signal(N, name="model_small_lanes")
    m.d.comb += [x.direct.eq(Cat(g.mask[i] & (abs(g.grads[i]) >= thr[i]) for i in range(N))),
                 x.small.eq(g.mask & ~x.direct)]

    x.tag = h.tag_of(g.addr)
    x.match = Cat(w.valid & (w.tag == x.tag) for w in model.ways)
    x.free = Cat(~w.valid for w in model.ways)
    x.hit_way = lowest_index(m, x.match, "model_hit_way")
    x.free_way = lowest_index(m, x.free, "model_free_way")
    x.hit, x.victim = model.ways[x.hit_way], model.ways[model.victim]
    x.new_sums = Signal(probe.s4_row.ways[0].sums.shape(), name="model_hit_sums")
    x.crossed = Signal(N, name="model_crossed_lanes")
    for i in range(N):
        m.d.comb += [
            x.new_sums[i].eq(x.hit.sums[i] + Mux(x.small[i], g.grads[i], 0)),
            x.crossed[i].eq(x.small[i] & (abs(x.hit.sums[i] + g.grads[i]) >= thr[i])),
        ]
    x.held_after = Signal(N, name="model_held_after")
    x.fills = Signal(name="model_fills")
    h.model_new_sums, h.model_fills = x.new_sums, x.fills
    m.d.comb += [x.held_after.eq((x.hit.held | x.small) & ~x.crossed),
                 x.fills.eq(x.hit.count + 1 >= mu)]
    x.tiny = Signal(N, name="model_tiny_lanes")
    x.kept = Signal(N, name="model_kept_lanes")
    m.d.comb += [x.tiny.eq(x.small & Cat(abs(g.grads[i]) < g.small_threshold
                                         for i in range(N))),
                 x.kept.eq(x.small & ~x.tiny)]
    return x


def _line_outputs(h, m, x, model):
    """What the model's decision on a line makes: the beat's own line write (``own``), the
    victim's (``vic``), the strobes (``exp_hit``, ``exp_miss``, ``exp_tiny``) and the set
    after it (``after``, the set as it is unless the decision changes it)."""
    l1, N, g = h.dut.l1, h.lanes, x.g
    probe = l1.probe
    write_layout = probe.write.shape()
    x.own = Signal(write_layout, name="model_own_write")
    x.vic = Signal(write_layout, name="model_victim_write")
    x.exp_hit, x.exp_miss = Signal(name="model_hit"), Signal(name="model_miss")
    x.exp_tiny = Signal(N, name="model_tiny_miss")
    x.after = Signal(l1.row_layout, name="model_row_after")
    m.d.comb += [x.after.eq(model), x.own.addr.eq(g.addr),
                 x.vic.addr.eq(h.line_of(h.track_set, x.victim.tag))]
    return x.own, x.vic, x.after


def _line_allocate(h, m, x, model):
    """The beat's kept lanes (``x.kept``) allocate its line: the lowest free way, else the
    round-robin victim, whose held lanes are written (``EVICTION``)."""
    N, W, g, after, vic = h.lanes, h.dut.ways, x.g, x.after, x.vic

    def allocate(way):
        entry = after.ways[way]
        m.d.comb += [entry.valid.eq(1), entry.tag.eq(x.tag), entry.held.eq(x.kept),
                     entry.count.eq(1)]
        m.d.comb += [entry.sums[i].eq(Mux(x.kept[i], g.grads[i], 0)) for i in range(N)]
    with m.If(x.free.any()):
        allocate(x.free_way)
    with m.Else():
        m.d.comb += [vic.mask.eq(x.victim.held), vic.values.eq(x.victim.sums),
                     *[c.eq(Cause.EVICTION) for c in vic.causes]]
        allocate(model.victim)
        m.d.comb += after.victim.eq(Mux(model.victim == W - 1, 0, model.victim + 1))


def _line_decision(h, m, x, model):
    """The model's decision (model/lines.py, LineModel.write_line): the beat's own line write
    (``own``), the victim's (``vic``), the strobes and the set after it (``after``)."""
    N, g = h.lanes, x.g
    own, vic, after = _line_outputs(h, m, x, model)
    # Direct lanes are written as they are (a direct lane's held sum joins it at max_updates).
    for i in range(N):
        with m.If(x.direct[i]):
            m.d.comb += [own.mask[i].eq(1), own.values[i].eq(g.grads[i]),
                         own.causes[i].eq(Cause.DIRECT)]
    with m.If(x.small.any() & x.match.any()):
        _line_hit(h, m, x)
    with m.Elif(x.small.any()):
        _line_miss(h, m, x, model)
    x.evicts = Signal(name="model_evicts")
    m.d.comb += x.evicts.eq(vic.mask.any())


def _line_hit(h, m, x):
    """A hit: the small lanes add into the line's sums; a lane that crosses is written and
    cleared; at max_updates every lane still held is written; the line leaves when it fills
    or holds no lane."""
    N, g, own, after = h.lanes, x.g, x.own, x.after
    m.d.comb += x.exp_hit.eq(1)
    leaves = x.fills | ~x.held_after.any()
    for i in range(N):
        with m.If(x.crossed[i]):
            m.d.comb += [own.mask[i].eq(1), own.values[i].eq(x.new_sums[i]),
                         own.causes[i].eq(Cause.ACCUM_THRESHOLD)]
        with m.Elif(x.fills & x.held_after[i]):
            with m.If(x.direct[i]):
                m.d.comb += own.values[i].eq(g.grads[i] + x.hit.sums[i])
            with m.Else():
                m.d.comb += [own.mask[i].eq(1), own.values[i].eq(x.new_sums[i]),
                             own.causes[i].eq(Cause.MAX_UPDATES)]
    way = after.ways[x.hit_way]
    m.d.comb += [way.valid.eq(~leaves), way.held.eq(x.held_after),
                 way.count.eq(x.hit.count + 1)]
    m.d.comb += [way.sums[i].eq(Mux(x.crossed[i], 0, x.new_sums[i])) for i in range(N)]


def _line_miss(h, m, x, model):
    """A miss: tiny lanes dropped or rounded (one draw of the random bits for the beat: the
    harness's s3_rule, per lane), the others allocate the line (with max_updates 1 they are
    written instead), a full set's victim line is written."""
    N, mu = h.lanes, h.dut.max_updates
    g, own = x.g, x.own
    m.d.comb += [x.exp_tiny.eq(x.tiny), x.exp_miss.eq(x.kept.any())]
    for i in range(N):
        with m.If(x.tiny[i] & g.stochastic & h.s3_rule[i]):
            m.d.comb += [own.mask[i].eq(1),
                         own.values[i].eq(Mux(g.grads[i] < 0, -g.small_threshold,
                                              g.small_threshold)),
                         own.causes[i].eq(Cause.STOCHASTIC)]
        if mu == 1:
            with m.If(x.kept[i]):
                m.d.comb += [own.mask[i].eq(1), own.values[i].eq(g.grads[i]),
                             own.causes[i].eq(Cause.MAX_UPDATES)]
    if mu > 1:
        with m.If(x.kept.any()):
            _line_allocate(h, m, x, model)


def _line_decision_whole(h, m, x, model):
    """The model's decision by the whole-line rule (model/lines.py, LineModel._whole_line):
    a beat writes its line, carrying every pending value of it (each held lane's sum, each
    lane of the beat with its gradient added), or allocates it; a lane whose value would not
    fit ``grad_width`` bits writes its held sum and keeps its gradient (small) or writes its
    gradient and keeps its held sum (direct)."""
    N, mu, gw, g = h.lanes, h.dut.max_updates, h.gw, x.g
    own, vic, after = _line_outputs(h, m, x, model)
    active, hit = g.mask.any(), x.match.any()
    lo, hi = grad_range(gw)
    total = [Signal(signed(gw + 2), name=f"model_total{i}") for i in range(N)]
    unfit = Signal(N, name="model_unfit_lanes")
    m.d.comb += [t.eq(Mux(x.hit.held[i], x.hit.sums[i], 0) + Mux(g.mask[i], g.grads[i], 0))
                 for i, t in enumerate(total)]
    m.d.comb += unfit.eq(Cat((t < lo) | (t > hi) for t in total))
    x.unfit = unfit
    # (the seed's crossings and held lanes, made by _line_beat, are replaced by the rule's)
    x.crossed = Signal(N, name="model_crossed_lanes_whole_line")
    m.d.comb += x.crossed.eq(Cat(x.small[i] & ((abs(total[i]) >= x.thr[i]) | unfit[i])
                                 for i in range(N)))
    x.held_after = Signal(N, name="model_held_after_whole_line")
    with m.If(active & hit):
        m.d.comb += x.exp_hit.eq(x.small.any())
        way = after.ways[x.hit_way]
        with m.If(x.direct.any() | x.crossed.any() | x.fills):
            left = x.hit.held & g.mask & unfit      # (a lane not held always fits)
            m.d.comb += [own.mask.eq(x.hit.held | g.mask), x.held_after.eq(left),
                         way.valid.eq(left.any()), way.held.eq(left), way.count.eq(1)]
            for i in range(N):
                m.d.comb += [
                    own.values[i].eq(Mux(~unfit[i], total[i],
                                         Mux(x.direct[i], g.grads[i], x.hit.sums[i]))),
                    own.causes[i].eq(Mux(x.direct[i], Cause.DIRECT,
                                     Mux(x.crossed[i], Cause.ACCUM_THRESHOLD,
                                     Mux(x.fills, Cause.MAX_UPDATES, Cause.LINE)))),
                    way.sums[i].eq(Mux(left[i], Mux(x.direct[i], x.hit.sums[i], g.grads[i]),
                                       0)),
                ]
        with m.Else():
            m.d.comb += [x.held_after.eq(x.hit.held | x.small), way.held.eq(x.held_after),
                         way.count.eq(x.hit.count + 1)]
            m.d.comb += [way.sums[i].eq(Mux(x.small[i], total[i], x.hit.sums[i]))
                         for i in range(N)]
    with m.Elif(active):
        m.d.comb += x.exp_miss.eq(x.kept.any())
        as_it_came = x.direct.any() | (x.kept.any() if mu == 1 else 0)
        rounded = x.tiny & Mux(g.stochastic, h.s3_rule, 0)
        level = h.rounding_level(g.small_threshold)
        with m.If(as_it_came):
            m.d.comb += own.mask.eq(g.mask)
            for i in range(N):
                m.d.comb += [own.values[i].eq(g.grads[i]),
                             own.causes[i].eq(Mux(x.direct[i], Cause.DIRECT,
                                              Mux(x.kept[i] & (mu == 1), Cause.MAX_UPDATES,
                                                  Cause.LINE)))]
        with m.Else():
            m.d.comb += x.exp_tiny.eq(x.tiny)
            with m.If(rounded.any()):
                m.d.comb += own.mask.eq(rounded | x.kept)
                for i in range(N):
                    m.d.comb += [own.values[i].eq(Mux(rounded[i], Mux(g.grads[i] < 0, -level,
                                                                      level), g.grads[i])),
                                 own.causes[i].eq(Mux(rounded[i], Cause.STOCHASTIC,
                                                      Cause.LINE))]
            with m.Elif(x.kept.any() if mu > 1 else 0):
                _line_allocate(h, m, x, model)
    x.evicts = Signal(name="model_evicts")
    m.d.comb += x.evicts.eq(vic.mask.any())


def _line_registered_decision(h, m, x):
    """The decision's writes come out of s4 a cycle later (into the queue), and so do the
    discard outputs: the model's, registered beside them."""
    write_layout = h.dut.l1.probe.write.shape()
    x.commit4 = Signal(name="model_commit_s4")
    x.own4 = Signal(write_layout, name="model_own_write_s4")
    x.vic4 = Signal(write_layout, name="model_victim_write_s4")
    x.tiny4 = Signal(h.lanes, name="model_tiny_miss_s4")
    m.d.sync += [x.commit4.eq(x.commit), x.own4.eq(x.own), x.vic4.eq(x.vic),
                 x.tiny4.eq(x.exp_tiny)]


def _line_conservation_terms(h, m, x):
    """For conservation (properties/outputs.py, unchanged): what the model holds for the
    tracked address (its lane of the tracked line) and what the decision now in s4 passes on
    for it (its writes into the queue, the part a tiny lane discards); and at the decision
    (_decision_conserves) what it writes and discards of it and the beat's gradient there."""
    g, g4, lane, tline = x.g, h.stage[4], h.track_lane, h.track_line
    own, own4 = x.own, x.own4
    h.model_sum = Signal(signed(h.bw), name="model_tracked_sum")
    h.model_s4_sum = Signal(signed(h.bw), name="model_tracked_s4_sum")
    written4 = Mux(own4.mask.bit_select(lane, 1), own4.values[lane], 0)
    m.d.comb += [
        h.model_sum.eq(_tracked_sum(h, h.model, lambda way: way.sums[lane])),
        h.model_s4_sum.eq(Mux(x.commit4, h.write_at_track(own4) + h.write_at_track(x.vic4), 0) +
                          Mux(x.commit4 & x.tiny4.bit_select(lane, 1) & (g4.addr == tline),
                              g4.grads[lane] - written4, 0)),
    ]
    x.written_t = h.write_at_track(own) + h.write_at_track(x.vic)
    x.tiny_t = Mux(x.exp_tiny.bit_select(lane, 1) & (g.addr == tline),
                   g.grads[lane] - Mux(own.mask.bit_select(lane, 1), own.values[lane], 0), 0)
    x.grad_t = h.at_track(g.addr, g.mask, g.grads)


def _line_decision_lanes(h, m, P, x, model):
    """The decision lane by lane: lane ``i`` of the beat's own line write (in its mask or not;
    if in, its value and cause) and of the entry the decision keeps (the row s4 writes, in
    its way: the lane held and its sum, whether the line stays or leaves) is the model's.
    One job each on default: the eight lanes' adders and compares at once did not finish in
    5 minutes (two lanes together neither), one lane takes seconds. The whole write and the
    tracked set's ways are stated on them in the same cycle (same-cycle lemmas). Returns
    their names."""
    probe, N = h.dut.l1.probe, h.lanes
    actual, expected = probe.write, x.own4
    kept, modelled = probe.s4_row.ways[probe.s4_way], model.ways[probe.s4_way]
    lane_now = [[] for _ in range(N)]
    if h.whole_line:
        lane_now = _whole_line_decision_lemmas(h, m, P, x)
    names = []
    for i in range(N):
        write_ok = ((actual.mask[i] == expected.mask[i]) &
                    (~expected.mask[i] | ((actual.values[i] == expected.values[i]) &
                                          (actual.causes[i] == expected.causes[i]))))
        # (The model took the decided row as this cycle began: its way s4_way is the one
        # the decision kept, valid or left.)
        kept_ok = ((kept.held[i] == modelled.held[i]) & (kept.sums[i] == modelled.sums[i]))
        names.append(P.check("policy", f"decision_lane{i}_is_the_models",
                             ~x.commit4 | (write_ok & (~h.s4_writes | kept_ok)),
                             now=lane_now[i]).full_name)
    return names


def _whole_line_decision_lemmas(h, m, P, x):
    """Under the whole-line rule, whether a line is written hangs on every lane's tests, so a
    lane's decision stated alone meets them all (at 8 lanes on default a lane's job had not
    finished in 12 minutes). Stated first, for the decision that left ``s3`` into ``s4``: per
    lane, its tests on a hit are the model's (made from the ports of
    :class:`~design.line_decision.LineDecision`, its entry and bounds, as it makes them:
    ``crossed``, a small lane crossing or not fitting; ``unfit``, a lane of the beat not
    fitting); for the decision in ``s3``, on a hit, the count it takes is the model's (on the
    same cycle's facts about its entry, its row and the tracked set); from them, the line is
    written iff the model writes it. A lane's decision is then stated on its own tests and the
    written bit.
    Returns, per lane, the names of the lemmas its decision uses in the same cycle."""
    probe, N, dec = h.dut.l1.probe, h.lanes, h.dut.l1.probe.decision
    crossed, unfit = Signal(N, name="decision_crossed"), Signal(N, name="decision_unfit")
    for i in range(N):
        held = dec.entry.sums[i]
        beyond = at_least(held, dec.high[i]) | at_most(held, dec.low[i])
        fits = at_least(held, dec.fit_low[i]) & at_most(held, dec.fit_high[i])
        m.d.comb += [crossed[i].eq(dec.mask[i] & ~dec.direct[i] & (beyond | ~fits)),
                     unfit[i].eq(dec.mask[i] & ~fits)]
    registered = {}
    for name, value, width in (("crossed", crossed, N), ("unfit", unfit, N),
                               ("model_crossed", x.crossed, N), ("model_unfit", x.unfit, N),
                               ("model_hit", x.match.any(), 1)):
        registered[name] = Signal(width, name=f"{name}_s4")
        m.d.sync += registered[name].eq(value)
    tests = []
    for i in range(N):
        tests.append(P.check(
            "policy", f"decision_lane{i}_tests_are_the_models",
            ~(x.commit4 & registered["model_hit"]) |
            ((registered["crossed"][i] == registered["model_crossed"][i]) &
             (registered["unfit"][i] == registered["model_unfit"][i]))).full_name)
    # The count the decision tests is the model's: stated as the decision takes it, on this
    # cycle's facts about the entry it takes, its row and the tracked set (from the past
    # cycles alone, the written bit's induction did not finish in 25 minutes).
    W = h.dut.ways
    P.check("policy", "decision_count_is_the_models",
            ~(x.commit & x.match.any()) | (dec.entry.count == x.hit.count),
            now=["forwarding/s3_hit_entry_is_its_hit_way_now",
                 "forwarding/s3_decides_on_its_set_now",
                 "forwarding/s3_decides_on_the_entry_of_its_address_now",
                 *[f"policy/tracked_set_way{i}_is_the_models_after_init" for i in range(W)]])
    written = P.check("policy", "decision_writes_its_line_iff_the_model_does",
                      ~x.commit4 | (probe.pushes == x.own4.mask.any()), now=tests).full_name
    return [[written, test] for test in tests]


def _line_writes(h, m, P, x, scanning, held, flushed, lanes_now):
    """On lines: the beat's own line write and the victim's are the model's (the own write on
    its lanes, ``lanes_now``, in the same cycle), a flush write of the set the model's lowest
    valid line, and no other write into the queue names the set."""
    probe, N = h.dut.l1.probe, h.lanes

    def same_write(actual, expected):
        """Two line writes are the same: address, mask, and each masked lane's value and
        cause (a lane outside the mask carries nothing)."""
        lanes = [~expected.mask[i] | ((actual.values[i] == expected.values[i]) &
                                      (actual.causes[i] == expected.causes[i]))
                 for i in range(N)]
        return (actual.addr == expected.addr) & (actual.mask == expected.mask) & Cat(*lanes).all()

    own4, vic4 = x.own4, x.vic4
    P.check("policy", "decision_writes_what_the_model_writes",
            ~x.commit4 | ((probe.pushes == own4.mask.any()) &
                          (~own4.mask.any() | same_write(probe.write, own4))),
            now=lanes_now)
    P.check("policy", "decision_evicts_what_the_model_evicts",
            ~x.commit4 | ((probe.s4_victim == vic4.mask.any()) &
                          (~vic4.mask.any() | same_write(probe.s4_victim_p, vic4))))
    queued = probe.queue.w.payload
    exp_flush = Signal(probe.write.shape(), name="model_flush_write")
    m.d.comb += [exp_flush.addr.eq(h.line_of(h.track_set, flushed.tag)),
                 exp_flush.mask.eq(flushed.held), exp_flush.values.eq(flushed.sums),
                 *[c.eq(Cause.FLUSH) for c in exp_flush.causes]]
    P.check("policy", "flush_writes_what_the_model_writes",
            ~(scanning & h.queue_in) |
            (held.any() & same_write(queued.own, exp_flush) & (queued.victim.mask == 0)))

    def names_tracked_set(write):
        return write.mask.any() & (h.set_of(write.addr) == h.track_set)
    P.check("policy", "no_other_write_names_the_tracked_set",
            ~(h.queue_in & (names_tracked_set(queued.own) | names_tracked_set(queued.victim))) |
            x.commit4 | scanning)


def _model_flush_scan(h, m, model, after, commit):
    """The model of the tracked set (one lane's or lines'): it takes the decision's ``after``
    on ``commit``, and the flush scan writes out its lowest held way. Returns ``(scanning,
    held, flushed)``: the scan reads the tracked set, which ways the model holds, the way it
    writes out."""
    scanning = Signal(name="model_set_scanned")
    m.d.comb += scanning.eq(h.scan & (h.dut.l1.probe.scan_set == h.track_set))
    held = Cat(w.valid for w in model.ways)
    flush_way = lowest_index(m, held, "model_flush_way")
    flushed = model.ways[flush_way]
    with m.If(commit):
        m.d.sync += model.eq(after)
    with m.If(scanning & h.queue_in):
        m.d.sync += model.ways[flush_way].valid.eq(0)
    return scanning, held, flushed


def _model_step(h, m, P, scanning, held, flushed, flushed_value, s3_value):
    """The model's step for the tracked address, per cycle (conservation): what it holds and
    what the decision in s4 passes on now add up to what it held the cycle before, plus the
    gradient that decided then if it is the tracked address's (``s3_value``), minus what the
    flush scan wrote out of it then (``model_flush_out``: ``flushed_value`` of the way
    ``flushed``). The conservation of the balance uses this in the same cycle
    (properties/outputs.py)."""
    h.model_flush_out = Signal(signed(h.bw), name="model_tracked_flush_out")
    m.d.comb += h.model_flush_out.eq(
        Mux(scanning & h.queue_in & held.any() & (flushed.tag == h.track_tag),
            flushed_value, 0))
    h.stage3_sum = Signal(signed(h.bw), name="tracked_s3_grad")
    m.d.comb += h.stage3_sum.eq(s3_value)
    model_before = Signal(signed(h.bw), name="model_tracked_sum_to_be")
    m.d.sync += model_before.eq(h.model_sum + h.stage3_sum - h.model_flush_out)
    model_now = Signal(signed(h.bw), name="model_tracked_sum_now")
    m.d.comb += model_now.eq(h.model_sum + h.model_s4_sum)
    P.check("conservation", "model_step_conserves_the_tracked_address",
            model_now == model_before, only_for=["conservation"])


def _line_covers(h, m, P, commit4, own4, vic4, tiny4, exp_hit, crossed, held_after):
    """Covers of the line policy (from reset): each of its per-lane cases is reached on the
    tracked set, so that the properties above are not vacuous."""
    l1, N = h.dut.l1, h.lanes
    probe = l1.probe
    pushes = commit4 & probe.pushes
    causes = probe.write.causes
    mask = probe.write.mask

    only = None if h.covers is True else set(h.covers)
    cover = P.cover if only is None else (lambda name, test: name in only and P.cover(name, test))

    def lane_cause(cause):
        return Cat(mask[i] & (causes[i] == cause) for i in range(N)).any()
    kept_sums = Cat(held_after[i] & (h.model_new_sums[i] != 0) for i in range(N)).any()
    cover("line_one_lane_crosses_another_stays_held",
            h.stage_valid[3] & (h.set_of(h.stage[3].addr) == h.track_set) & exp_hit &
            crossed.any() & kept_sums & ~h.model_fills)
    cover("line_max_updates_write", pushes & lane_cause(Cause.MAX_UPDATES))
    cover("line_direct_and_accumulated_lanes_in_one_write",
            pushes & lane_cause(Cause.DIRECT) & lane_cause(Cause.ACCUM_THRESHOLD))
    cover("line_victim_of_two_lanes_evicted",
            commit4 & probe.s4_victim & (probe.s4_victim_p.mask == (1 << N) - 1))
    cover("line_tiny_lane_discarded_beside_an_allocating_lane",
            commit4 & tiny4.any() & probe.s4_alloc)
    cover("line_stochastic_write", pushes & lane_cause(Cause.STOCHASTIC))
    cover("line_flush_write_of_the_tracked_set",
            h.scan & (probe.scan_set == h.track_set) & h.queue_in)
    cover("line_own_and_victim_writes_leave_one_after_the_other",
            l1.push.valid & l1.push.ready & ~probe.out_last)
    cover("line_tracked_address_conserved_after_a_write_and_a_discard",
            h.dut.idle & h.tracked_written & h.tracked_discarded)
