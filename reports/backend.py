"""Which RTL simulator runs the reports: the compiled CXXRTL one when it is there, otherwise
the Amaranth simulator (with a note on stderr)."""

import sys
import time

from simulation.driver import always, every_other, random_ready

__all__ = ["BACKENDS", "resolve_backend", "run_rtl", "parse_dram", "Progress"]

BACKENDS = ("compiled", "amaranth")


def _compiled():
    """``simulate_compiled`` if the compiled simulator can be used here, else a reason."""
    try:
        from simulation import cxxrtl
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


class Progress:
    """A simple progress bar on stderr (redrawn in place on a terminal, every 10% otherwise)."""

    def __init__(self, total, label, enabled=True, stream=sys.stderr):
        self.total, self.label, self.enabled, self.stream = max(total, 1), label, enabled, stream
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.start = time.monotonic()
        self.shown = -1

    def update(self, done):
        if not self.enabled:
            return
        fraction = min(done / self.total, 1.0)
        if self.tty:
            step = int(fraction * 200)
            if step == self.shown:
                return
            self.shown = step
            filled = int(fraction * 30)
            elapsed = time.monotonic() - self.start
            eta = elapsed / fraction - elapsed if fraction > 0 else 0
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] "
                              f"{fraction:6.1%} {done}/{self.total} ETA {eta:5.0f}s ")
            self.stream.flush()
        else:
            step = int(fraction * 10)
            if step != self.shown:
                self.shown = step
                self.stream.write(f"{self.label}: {step * 10}% ({done}/{self.total})\n")
                self.stream.flush()

    def close(self):
        if self.enabled:
            self.update(self.total)
            if self.tty:
                self.stream.write(f" {time.monotonic() - self.start:.1f}s\n")
            self.stream.flush()


def run_rtl(backend, params, ops, *, dram_ready=always, progress=None, vcd=None,
            vcd_cycles=None):
    """Run ``ops`` through the RTL of the :class:`design.GradientCompressor` ``params`` with
    ``backend`` and return the :class:`~simulation.driver.SimResult`; write the first
    ``vcd_cycles`` cycles to the waveform ``vcd`` (and a .gtkw beside it) if given."""
    if backend == "compiled":
        simulate_compiled, reason = _compiled()
        if simulate_compiled is None:
            raise RuntimeError(f"the compiled simulator is not available: {reason}")
        if progress is not None:
            progress.update(0)      # the compiled run reports only at its end
        result = simulate_compiled(dict(params), ops, dram_ready=dram_ready, vcd=vcd,
                                   vcd_cycles=vcd_cycles)
        if progress is not None:
            progress.close()
        return result
    from design import GradientCompressor
    from simulation.driver import simulate
    dut = GradientCompressor(**params)
    gap = None
    if progress is not None:
        # The driver asks for the gap before offering each gradient: a free progress hook.
        def gap(index):
            progress.update(index)
            return 0
    result = simulate(dut, ops, gap=gap, dram_ready=dram_ready, vcd=vcd, vcd_cycles=vcd_cycles)
    if progress is not None:
        progress.close()
    return result
