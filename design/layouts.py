"""Payload layouts and the write-cause encoding shared by the design's components."""

from amaranth.lib import enum

from amaranth import unsigned, signed
from amaranth.lib import data

from .params import EMA_FRACTION_BITS, EMA_SCALE_WIDTH, WHOLE_LINE, ema_fraction_bits

__all__ = ["Cause", "gradient_layout", "classified_layout", "write_layout", "dram_layout",
           "line_layout", "classified_line_layout", "line_write_layout", "line_pair_layout",
           "line_dram_layout", "grad_range", "value_width", "line_value_width",
           "discard_error_width", "discard_sum_width"]


class Cause(enum.Enum, shape=3):
    """Why a value is written toward DRAM."""
    #: ``|grad| >= threshold``: sent straight on (L1 does not touch it).
    DIRECT          = 0
    #: An L1 hit made ``|sum| >= threshold``.
    ACCUM_THRESHOLD = 1
    #: An L1 entry's update count reached ``max_updates``.
    MAX_UPDATES     = 2
    #: A miss in a full set pushed out the set's round-robin victim.
    EVICTION        = 3
    #: The flush barrier's scan wrote a valid entry out.
    FLUSH           = 4
    #: Dual threshold, stochastic mode: a tiny gradient that missed in L1 was rounded to
    #: ``sign(grad) * small_threshold`` (see :mod:`design.modes`).
    STOCHASTIC      = 5
    #: The whole-line rule (:mod:`design.line_decision`): a pending value carried by a line
    #: write that another lane of the line caused.
    LINE            = 6


def value_width(grad_width):
    """Width of an accumulated sum and of a DRAM value (signed).

    A sum held in L1 always has ``|sum| < threshold <= 2**grad_width - 1`` (otherwise it would
    have been written out), and a gradient routed to L1 has ``|grad| <= 2**(grad_width - 1)``.
    So ``|sum + grad| < 2**grad_width + 2**(grad_width - 1) < 2**(grad_width + 1)``: a signed
    value of ``grad_width + 2`` bits holds every sum for every threshold, and every gradient.
    """
    return grad_width + 2


def grad_range(grad_width):
    """``(lowest, highest)``: the values a signed ``grad_width``-bit gradient takes, the range
    every value the whole-line rule holds or writes stays in."""
    return -2 ** (grad_width - 1), 2 ** (grad_width - 1) - 1


def line_value_width(grad_width, whole_line=WHOLE_LINE):
    """Width of the values L1 writes (signed), from L1's decision to ``dram_out``: a line
    write's values, and with one lane a record's value (a line of one lane). The one place
    that chooses it.

    Under the whole-line rule (``whole_line``) every value L1 writes fits ``grad_width`` bits
    (docs/lanes.md, "The whole-line rule"), so a write has the input's format (a gradient per
    lane: AXI's WDATA as wide as TDATA; with one lane, a record is an address and a
    gradient's width); L2's merges on lines keep it (it merges a lane only where both values
    fit a bit less). Else :func:`value_width`.
    """
    return grad_width if whole_line else value_width(grad_width)


def discard_error_width(grad_width):
    """Width of one accounted discard ``grad - written`` (signed). A tiny gradient has
    ``|grad| < small_threshold <= 2**grad_width - 1`` and a stochastic write has the sign of the
    gradient, so ``|grad - written| < 2**grad_width``."""
    return grad_width + 1


def discard_sum_width(grad_width):
    """Width of the running sum of accounted discards (signed): enough for ``2**32`` of them
    (``discard_count`` wraps first)."""
    return discard_error_width(grad_width) + 32


def gradient_layout(addr_width, grad_width):
    """A gradient as the compute core sends it."""
    return data.StructLayout({
        "addr": unsigned(addr_width),
        "grad": signed(grad_width),
    })


def classified_layout(addr_width, grad_width):
    """A gradient with the threshold it is judged against, and the dual-threshold and EMA
    settings in force when it was accepted. L1 makes the verdict (``|grad| >= threshold``) in
    its pipeline.

    With ``ema`` set, the gradient is judged against the EMA threshold of ``ema_source``,
    ``ema_scale``, ``ema_min`` and ``ema_max`` (:func:`design.modes.ema_candidate`,
    :func:`design.modes.ema_clamp`) instead of ``threshold``: L1 computes it in its pipeline
    too (a multiply and a clamp take two stages)."""
    return data.StructLayout({
        "addr":            unsigned(addr_width),
        "grad":            signed(grad_width),
        "threshold":       unsigned(grad_width),
        "small_threshold": unsigned(grad_width),
        "stochastic":      unsigned(1),
        "ema":             unsigned(1),
        "ema_source":      unsigned(grad_width + EMA_FRACTION_BITS),
        "ema_scale":       unsigned(EMA_SCALE_WIDTH),
        "ema_min":         unsigned(grad_width),
        "ema_max":         unsigned(grad_width),
    })


def dram_layout(addr_width, grad_width, value_width=None):
    """A write toward DRAM: the address and the value to add there (``value_width`` bits,
    signed; by default :func:`value_width`)."""
    return data.StructLayout({
        "addr":  unsigned(addr_width),
        "value": signed(_values(grad_width, value_width)),
    })


def write_layout(addr_width, grad_width, value_width=None):
    """A write from L1 to the write-back buffer, with its cause (for the event strobes); its
    value is ``value_width`` bits (signed; by default :func:`value_width`)."""
    return data.StructLayout({
        "addr":  unsigned(addr_width),
        "value": signed(_values(grad_width, value_width)),
        "cause": Cause,
    })


# -- lines: beats of ``lanes`` gradients (design.line_accumulator) ------------------------------------------

def line_layout(addr_width, grad_width, lanes):
    """A beat as the compute core sends it: a line address (lane 0's, a multiple of
    ``lanes``), a gradient per lane (lane ``i``'s address is ``addr + i``) and the lanes that
    carry one (``mask``; AXI4-Stream's TDATA and TKEEP)."""
    return data.StructLayout({
        "addr":  unsigned(addr_width),
        "grads": data.ArrayLayout(signed(grad_width), lanes),
        "mask":  unsigned(lanes),
    })


def classified_line_layout(addr_width, grad_width, lanes):
    """A beat with the settings in force when it was accepted (as :func:`classified_layout`
    for one gradient): ``threshold`` is the beat's (or the EMA's, with ``ema``), and a lane in
    an enabled bypass window (``bypass``) is judged against 0 instead. The EMA's value has
    ``log2(lanes)`` more fraction bits (:func:`~design.params.ema_fraction_bits`)."""
    return data.StructLayout({
        "addr":            unsigned(addr_width),
        "grads":           data.ArrayLayout(signed(grad_width), lanes),
        "mask":            unsigned(lanes),
        "bypass":          unsigned(lanes),
        "threshold":       unsigned(grad_width),
        "small_threshold": unsigned(grad_width),
        "stochastic":      unsigned(1),
        "ema":             unsigned(1),
        "ema_source":      unsigned(grad_width + ema_fraction_bits(lanes)),
        "ema_scale":       unsigned(EMA_SCALE_WIDTH),
        "ema_min":         unsigned(grad_width),
        "ema_max":         unsigned(grad_width),
    })


def line_write_layout(addr_width, grad_width, lanes, value_width=None):
    """A masked line write: for each lane ``i`` in ``mask``, add ``values[i]`` at address
    ``addr + i`` (``causes[i]`` says why). Its values are ``value_width`` bits (signed; by
    default :func:`line_value_width` of the line policy)."""
    return data.StructLayout({
        "addr":   unsigned(addr_width),
        "values": data.ArrayLayout(signed(_line_values(grad_width, value_width)), lanes),
        "mask":   unsigned(lanes),
        "causes": data.ArrayLayout(Cause, lanes),
    })


def line_pair_layout(addr_width, grad_width, lanes, value_width=None):
    """A place of the line L1's output queue: a beat's own line write and its victim line's (a
    mask of 0: none), values of ``value_width`` bits (as :func:`line_write_layout`)."""
    write = line_write_layout(addr_width, grad_width, lanes, value_width)
    return data.StructLayout({"own": write, "victim": write})


def line_dram_layout(addr_width, grad_width, lanes, value_width=None):
    """A masked line write toward DRAM (AXI4's write data and strobes): for each lane ``i`` in
    ``mask``, add ``values[i]`` at address ``addr + i``; values of ``value_width`` bits (as
    :func:`line_write_layout`)."""
    return data.StructLayout({
        "addr":   unsigned(addr_width),
        "values": data.ArrayLayout(signed(_line_values(grad_width, value_width)), lanes),
        "mask":   unsigned(lanes),
    })


def _values(grad_width, width):
    """The width of a write's values: ``width``, or by default :func:`value_width`'s."""
    return value_width(grad_width) if width is None else width


def _line_values(grad_width, width):
    """The width of a line write's values: ``width``, or by default the line policy's
    (:func:`line_value_width`)."""
    return line_value_width(grad_width) if width is None else width
