"""The stochastic mode's LFSR's contract (:class:`design.modes.Lfsr`), stated on the LFSR alone
and proven in its own harness (:mod:`.component`), every input free. (In the system proofs
the random bits are free instead: :class:`~properties.harness.FreeRandom`.)

``lfsr``: the LFSR is its definition: after reset its state is ``LFSR_RESET`` (1); a cycle with
``load`` takes ``seed``, or ``LFSR_RESET`` for a seed of 0; else a cycle with ``step`` takes the
Galois successor of the polynomial :data:`~design.params.LFSR_POLYNOMIAL` (computed here bit by
bit from its exponents, not from the design's mask); else the state holds. ``next_state`` is
always the successor of ``state``, and the state is never 0 (an all-zero LFSR never moves).
Hence from any state the LFSR follows the polynomial's sequence.
"""

from amaranth import *

from gradient_compressor.design.params import LFSR_POLYNOMIAL, LFSR_RESET, LFSR_WIDTH

from .base import past

__all__ = ["contract", "covers", "galois_successor"]


def galois_successor(state):
    """The successor of ``state`` in the right-shifting Galois LFSR of
    :data:`~design.params.LFSR_POLYNOMIAL`: shift right, and if the bit shifted out was 1,
    flip bit ``e - 1`` for every term ``x^e`` (the ``x^32`` term enters at the top)."""
    bits = [state[i + 1] if i + 1 < LFSR_WIDTH else Const(0) for i in range(LFSR_WIDTH)]
    return Cat(*(b ^ state[0] if (i + 1) in LFSR_POLYNOMIAL else b
                 for i, b in enumerate(bits)))


def contract(m, P, lfsr):
    ran = past(m, 1, "lfsr_ran")            # 0 in the first cycle and after reset
    load, step = past(m, lfsr.load, "lfsr_load"), past(m, lfsr.step, "lfsr_step")
    seed, state = past(m, lfsr.seed, "lfsr_seed"), past(m, lfsr.state, "lfsr_state")
    expected = Signal(LFSR_WIDTH, name="lfsr_expected_state")
    m.d.comb += expected.eq(Mux(~ran, LFSR_RESET,
                            Mux(load, Mux(seed == 0, LFSR_RESET, seed),
                            Mux(step, galois_successor(state), state))))
    P.check("lfsr", "state_is_reset_load_step_or_hold", lfsr.state == expected)
    P.check("lfsr", "next_state_is_the_successor_of_state",
            lfsr.next_state == galois_successor(lfsr.state))
    P.check("lfsr", "state_never_zero", lfsr.state != 0)


def covers(m, P, lfsr):
    P.cover("lfsr_loaded_with_seed_0", past(m, lfsr.load & (lfsr.seed == 0), "lfsr_zero_load"))
    P.cover("lfsr_stepped_from_a_state_with_bit_0_set",
            past(m, lfsr.step & ~lfsr.load & lfsr.state[0], "lfsr_feedback_step"))
