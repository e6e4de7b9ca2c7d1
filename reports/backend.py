"""Which RTL simulator runs the reports: the compiled CXXRTL one when it is there, otherwise
the Amaranth simulator (with a note on stderr)."""

import sys

from gradient_compressor.simulation.driver import always, every_other, random_ready

__all__ = ["BACKENDS", "resolve_backend", "run_rtl", "parse_dram"]

BACKENDS = ("compiled", "amaranth")


def _compiled():
    """``simulate_compiled`` if the compiled simulator can be used here, else a reason."""
    try:
        from gradient_compressor.simulation import cxxrtl
    except Exception as error:      # not written yet, or broken
        return None, f"simulation.cxxrtl is not importable ({error.__class__.__name__}: {error})"
    simulate_compiled = getattr(cxxrtl, "simulate_compiled", None)
    if simulate_compiled is None:
        return None, "simulation.cxxrtl has no simulate_compiled"
    available = getattr(cxxrtl, "compiler_available", None)
    if available is not None and not available():
        return None, "no C++ compiler for the compiled simulator"
    return simulate_compiled, None


def resolve_backend(requested=None, note=True):
    """``"compiled"`` or ``"amaranth"``. ``requested=None`` means compiled when available;
    asking for ``"compiled"`` when it is not available falls back with a printed note."""
    if requested == "amaranth":
        return "amaranth"
    function, reason = _compiled()
    if function is not None:
        return "compiled"
    if note:
        print(f"note: using the Amaranth simulator (~2000 cycles/s): {reason}", file=sys.stderr)
    return "amaranth"


def parse_dram(text):
    """``always``, ``every-other`` or ``random:P[:SEED]`` -> a ``dram_ready`` callable."""
    if text == "always":
        return always
    if text == "every-other":
        return every_other
    if text.startswith("random:"):
        parts = text.split(":")
        try:
            probability = float(parts[1])
            seed = int(parts[2]) if len(parts) > 2 else 0
        except (ValueError, IndexError):
            raise ValueError(f"bad --dram {text!r}: use random:P or random:P:SEED") from None
        if not 0 < probability <= 1 or len(parts) > 3:
            raise ValueError(f"bad --dram {text!r}: P must be in (0, 1]")
        return random_ready(seed, probability)
    raise ValueError(f"bad --dram {text!r}: use always, every-other or random:P[:SEED]")


def run_rtl(backend, params, ops, *, dram_ready=always, progress=None, vcd=None,
            vcd_cycles=None):
    """Run ``ops`` through the RTL of the :class:`design.GradientCompressor` ``params`` with
    ``backend`` and return the :class:`~simulation.driver.SimResult`; write the first
    ``vcd_cycles`` cycles to the waveform ``vcd`` (and a .gtkw beside it) if given.
    ``progress``, if given, is a progress bar (:func:`gradient_compressor.console.progress`) over
    ``len(ops)`` operations: both simulators advance it as they go, and it is closed at the
    end."""
    def advance(done):
        progress.update(done - progress.n)

    try:
        if backend == "compiled":
            simulate_compiled, reason = _compiled()
            if simulate_compiled is None:
                raise RuntimeError(f"the compiled simulator is not available: {reason}")
            return simulate_compiled(dict(params), ops, dram_ready=dram_ready,
                                     progress=advance if progress is not None else None,
                                     vcd=vcd, vcd_cycles=vcd_cycles)
        from gradient_compressor.design import GradientCompressor
        from gradient_compressor.simulation.driver import simulate
        dut = GradientCompressor(**params)
        gap = None
        if progress is not None:
            # The driver asks for the gap before offering each gradient: a free progress hook.
            def gap(index):
                advance(index)
                return 0
        result = simulate(dut, ops, gap=gap, dram_ready=dram_ready, vcd=vcd,
                          vcd_cycles=vcd_cycles)
        if progress is not None:
            advance(len(ops))
        return result
    finally:
        if progress is not None:
            progress.close()
