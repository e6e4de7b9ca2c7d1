"""The EMA unit's contract (:class:`design.modes.EmaThreshold`), stated on the unit alone and
proven in its own harness (:mod:`.component`), every input free but ``magnitude``, which it
requires to be a gradient's: at most ``2**(grad_width - 1)``. (The system harness does not
build this contract: its ``ema`` group proves the EMA exact on the system's own inputs.)

``ema_unit``: ``average`` equals an exact EMA kept here in arithmetic wide enough never to
wrap (a sample adds ``((magnitude << 8) - ema) >> shift``, an arithmetic shift: floor), and
lies in ``[0, 2**(grad_width - 1) << 8]``; ``latched_average`` is its value at the last
``latch``; ``source`` is the one of the two that ``per_step`` picks, and ``threshold`` is
``clamp((source * scale) >> 12, minimum, maximum)`` (:func:`.modes.ema_threshold`).
"""

from amaranth import *

from gradient_compressor.design.params import EMA_FRACTION_BITS

from .modes import ema_threshold

__all__ = ["contract", "covers"]


def contract(m, P, ema):
    gw, F = ema.grad_width, EMA_FRACTION_BITS
    top = 2 ** (gw - 1) << F            # the largest |grad| << F
    P.require("ema", "magnitude_at_most_2**(grad_width-1)",
              ~ema.sample | (ema.magnitude <= 2 ** (gw - 1)))
    exact   = Signal(signed(gw + F + 3), name="ema_unit_exact")
    latched = Signal(signed(gw + F + 3), name="ema_unit_exact_latched")
    with m.If(ema.sample):
        m.d.sync += exact.eq(exact + (((ema.magnitude << F) - exact) >> ema.shift))
    with m.If(ema.latch):
        m.d.sync += latched.eq(exact)
    P.check("ema_unit", "average_is_the_exact_ema", ema.average == exact)
    P.check("ema_unit", "latched_average_is_the_exact_ema_at_the_last_latch",
            ema.latched_average == latched)
    P.check("ema_unit", "ema_within_0..2**(grad_width-1+8)",
            (exact >= 0) & (exact <= top) & (latched >= 0) & (latched <= top))
    P.check("ema_unit", "source_is_the_average_per_step_picks",
            ema.source == Mux(ema.per_step, ema.latched_average, ema.average))
    P.check("ema_unit", "threshold_is_the_clamped_scaled_source",
            ema.threshold == ema_threshold(None, ema.source, ema.scale, ema.minimum,
                                           ema.maximum))


def covers(m, P, ema):
    P.cover("ema_at_its_maximum", ema.average == 2 ** (ema.grad_width - 1) << EMA_FRACTION_BITS)
    P.cover("ema_threshold_between_its_bounds",
            (ema.threshold > ema.minimum) & (ema.threshold < ema.maximum))
