"""Policy refinement: for an arbitrary tracked set, the design's writes and its row follow an
abstract model of that set, kept by the harness with the rules of ``model/reference.py``.

The model holds the set's ways (valid, tag, sum, count) and its round-robin victim pointer. It
takes the set's gradients in the order they are accepted (the harness records each one as it
is accepted on ``grad_in``, with the threshold the streamer judged it by (``threshold``, the
EMA's, or 0 in a bypass window: :mod:`.modes` proves which) and the dual-threshold settings in
force then, and applies it when the design commits it: a tiny miss allocates nothing and is
dropped, or written stochastically by the rule of :func:`.modes.stochastic_writes`), and it writes the set out, lowest way first, when the flush scan passes over the
set. Asserted (``policy``):

* every write the design pushes for the tracked set (direct, threshold, max-updates, eviction,
  stochastic or flush) is the model's next write: address, value and cause; a gradient the
  model writes nothing for is pushed nowhere; no other write names the set;
* the gradient in ``s1`` is the one accepted (address, value, the threshold the streamer judged
  it by, the dual-threshold settings);
* outside INIT, the set's row in storage equals the model (valid ways with tag, sum, count;
  the victim pointer), so after INIT the set holds nothing;
* at the commit of a gradient of the set, ``l1_hit`` / ``l1_miss`` / ``discard`` say what the
  model says.

As the tracked set is arbitrary (``AnyConst``), this holds for every set.
"""

from amaranth import *

from design import L1State
from design.layouts import Cause

__all__ = ["add"]


def _lowest(m, bits, width, name):
    index = Signal(range(width), name=name)
    for i in reversed(range(width)):
        with m.If(bits[i]):
            m.d.comb += index.eq(i)
    return index


def add(h, m, P):
    d, l1 = h.dut, h.dut.l1
    W, mu = d.ways, d.max_updates
    run = l1.state == L1State.RUN

    model = Signal(l1.row_layout, name="model_row")
    h.model = model

    # -- the tracked set's gradient between acceptance and commit --------------------------
    g_valid = Signal(name="model_gradient_pending")
    g_addr  = Signal(h.aw, name="model_gradient_addr")
    g_grad  = Signal(signed(h.gw), name="model_gradient_grad")
    g_thr   = Signal(h.gw, name="model_gradient_threshold")
    g_small = Signal(h.gw, name="model_gradient_small_threshold")
    g_stoch = Signal(name="model_gradient_stochastic")
    h.model_pending = g_valid
    commit = Signal(name="model_commit")
    m.d.comb += commit.eq(g_valid & h.s1_commits)
    with m.If(commit):
        m.d.sync += g_valid.eq(0)
    with m.If(h.accept & (h.set_of(d.grad_in.p.addr) == h.track_set)):
        # The threshold the streamer judged it by (threshold, the EMA's, or 0 in a bypass
        # window: the modes group proves which), and the dual-threshold settings in force.
        m.d.sync += [g_valid.eq(1), g_addr.eq(d.grad_in.p.addr), g_grad.eq(d.grad_in.p.grad),
                     g_thr.eq(l1.grad_in.p.threshold), g_small.eq(d.small_threshold),
                     g_stoch.eq(d.stochastic)]

    # -- the model's decision for that gradient (model/reference.py, ReferenceModel.write) -
    tag = g_addr[h.set_bits:]
    match = Cat(w.valid & (w.tag == tag) for w in model.ways)
    free  = Cat(~w.valid for w in model.ways)
    hit_way  = _lowest(m, match, W, "model_hit_way")
    free_way = _lowest(m, free, W, "model_free_way")
    hit      = model.ways[hit_way]
    victim   = model.ways[model.victim]
    hit_sum   = Signal(signed(h.vw + 1), name="model_hit_sum")
    hit_count = Signal(range(mu + 2), name="model_hit_count")
    m.d.comb += [hit_sum.eq(hit.sum + g_grad), hit_count.eq(hit.count + 1)]

    exp_valid = Signal(name="model_writes")
    exp_addr  = Signal(h.aw, name="model_write_addr")
    exp_value = Signal(signed(h.vw + 1), name="model_write_value")
    exp_cause = Signal(Cause, name="model_write_cause")
    exp_hit   = Signal(name="model_hit")
    exp_miss  = Signal(name="model_miss")
    exp_tiny  = Signal(name="model_tiny_miss")
    after = Signal(l1.row_layout, name="model_row_after")
    m.d.comb += after.eq(model)

    def write(addr, value, cause):
        m.d.comb += [exp_valid.eq(1), exp_addr.eq(addr), exp_value.eq(value),
                     exp_cause.eq(cause)]

    def allocate(way):
        m.d.comb += [after.ways[way].valid.eq(1), after.ways[way].tag.eq(tag),
                     after.ways[way].sum.eq(g_grad), after.ways[way].count.eq(1)]

    with m.If(abs(g_grad) >= g_thr):
        write(g_addr, g_grad, Cause.DIRECT)
    with m.Elif(match.any()):
        m.d.comb += exp_hit.eq(1)
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
        # Dual threshold: a tiny miss allocates nothing. The stochastic rule, on the random
        # bits of s1's first cycle, is the harness's s1_decision: applied to s1's copy of the
        # gradient (equal to the model's, asserted below), so that the solver meets the
        # design's multiplier and not a second copy.
        m.d.comb += exp_tiny.eq(1)
        with m.If(g_stoch & h.s1_decision):
            write(g_addr, Mux(g_grad < 0, -g_small, g_small), Cause.STOCHASTIC)
    with m.Elif(free.any()):
        m.d.comb += exp_miss.eq(1)
        if mu == 1:
            write(g_addr, g_grad, Cause.MAX_UPDATES)
        else:
            allocate(free_way)
    with m.Else():
        m.d.comb += exp_miss.eq(1)
        write(Cat(h.track_set, victim.tag), victim.sum, Cause.EVICTION)
        allocate(model.victim)
        m.d.comb += after.victim.eq(Mux(model.victim == W - 1, 0, model.victim + 1))

    # -- the flush scan over the tracked set (ReferenceModel.flush) -------------------------
    scanning = Signal(name="model_set_scanned")
    m.d.comb += scanning.eq((l1.state == L1State.SCAN) & (l1.scan_set == h.track_set))
    held = Cat(w.valid for w in model.ways)
    flush_way = _lowest(m, held, W, "model_flush_way")
    flushed = model.ways[flush_way]

    with m.If(commit):
        m.d.sync += model.eq(after)
    with m.If(scanning & h.push_fire):
        m.d.sync += model.ways[flush_way].valid.eq(0)

    # -- assertions ---------------------------------------------------------------------------
    push = l1.push.p
    P.check("policy", "s1_holds_the_tracked_sets_gradient_as_accepted",
            (g_valid == (run & l1.s1_valid & (h.s1_set == h.track_set))) &
            (~g_valid | ((l1.s1.addr == g_addr) & (l1.s1.grad == g_grad) &
                         (l1.s1.threshold == g_thr) & (l1.s1.small_threshold == g_small) &
                         (l1.s1.stochastic == g_stoch))))
    P.check("policy", "commit_writes_what_the_model_writes",
            ~commit | ((l1.push.valid == exp_valid) &
                       (~exp_valid | ((push.addr == exp_addr) & (push.value == exp_value) &
                                      (push.cause == exp_cause)))))
    P.check("policy", "flush_writes_what_the_model_writes",
            ~(scanning & l1.push.valid) |
            (held.any() & (push.addr == Cat(h.track_set, flushed.tag)) &
             (push.value == flushed.sum) & (push.cause == Cause.FLUSH)))
    P.check("policy", "no_other_write_names_the_tracked_set",
            ~(l1.push.valid & (h.set_of(push.addr) == h.track_set)) | g_valid | scanning)
    row = h.l1_track_port.data
    same = [(r.valid == w.valid) & (~w.valid | ((r.tag == w.tag) & (r.sum == w.sum) &
                                                (r.count == w.count)))
            for r, w in zip(row.ways, model.ways)]
    P.check("policy", "row_in_storage_is_the_model_after_init",
            h.init | (Cat(*same).all() & (row.victim == model.victim)))
    P.check("policy", "model_empty_while_init",
            ~h.init | (~held.any() & (model.victim == 0) & ~g_valid))
    # A flush scan moves on to the next set only under flush: when flush drops, L1 finishes
    # the set it is scanning and goes back to work.
    last_scan_set = Signal.like(l1.scan_set, name="scan_set_last_cycle")
    last_scanning = Signal(name="scanning_without_flush_last_cycle")
    m.d.sync += [last_scan_set.eq(l1.scan_set),
                 last_scanning.eq((l1.state == L1State.SCAN) & ~d.flush)]
    P.check("policy", "scan_stops_after_its_set_when_flush_drops",
            ~last_scanning | (l1.state != L1State.SCAN) | (l1.scan_set == last_scan_set))
    P.check("policy", "hit_miss_and_discard_strobes_are_the_models",
            ~commit | ((d.l1_hit == exp_hit) & (d.l1_miss == exp_miss) &
                       (d.discard == exp_tiny)))
