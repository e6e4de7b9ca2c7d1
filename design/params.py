"""The compressor's default configuration and the checks of its parameters: the one place for
both. The components, the reference model, ``compressor-report``/``compressor-sweep``, the
Verilog export and the formal harness's ``default`` configuration take them from here.

Each check raises an error that names the parameter, the value given and the allowed range, so a
mistake in a configuration script (or on a command line) is found at once and not in a waveform.
"""

from contextlib import contextmanager

__all__ = ["DEFAULTS", "check_config", "check_threshold", "check_int", "check_power_of_two",
           "log2", "checked"]

#: :class:`~design.GradientCompressor`'s default parameters.
DEFAULTS = {
    "addr_width":  32,    # address bits
    "grad_width":  16,    # signed gradient bits (and unsigned threshold bits)
    "sets":        32,    # L1 sets (a power of two)
    "ways":        4,     # L1 ways (a power of two)
    "max_updates": 255,   # updates after which an L1 entry is written out
    "fifo_depth":  32,    # L2 write-back buffer capacity, in writes
    "burst_size":  16,    # L2 level that starts a DRAM burst
}


@contextmanager
def checked(component):
    """Run a component's argument checks. If one fails, the half-made component is marked as
    not meant to be used, so Amaranth does not add an ``UnusedElaboratable`` warning to the
    error that names the bad argument."""
    try:
        yield
    except (TypeError, ValueError):
        component._MustUse__silence = True
        raise


def check_int(name, value, *, minimum=None, maximum=None):
    """Check that ``value`` is an integer in ``[minimum, maximum]`` and return it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def check_power_of_two(name, value):
    """Check that ``value`` is a power of two (1, 2, 4, ...) and return it."""
    check_int(name, value, minimum=1)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two (1, 2, 4, ...), not {value}")
    return value


def log2(value):
    """The base-2 logarithm of a power of two."""
    return value.bit_length() - 1


def check_config(*, addr_width, grad_width, sets, ways, max_updates, fifo_depth, burst_size):
    """Check a whole :class:`~design.GradientCompressor` configuration (the parameters as in
    :data:`DEFAULTS`); raise :class:`TypeError` or :class:`ValueError` naming the first bad one.
    """
    check_power_of_two("sets", sets)
    check_power_of_two("ways", ways)
    check_int("grad_width", grad_width, minimum=2)
    check_int("max_updates", max_updates, minimum=1)
    check_int("addr_width", addr_width, minimum=1)
    if addr_width <= log2(sets):
        raise ValueError(f"addr_width must be greater than log2(sets) = {log2(sets)} "
                         f"so that a tag remains above the set index, not {addr_width}")
    check_int("fifo_depth", fifo_depth, minimum=1)
    check_int("burst_size", burst_size, minimum=1)
    if burst_size > fifo_depth:
        raise ValueError(f"burst_size must be at most fifo_depth ({fifo_depth}), "
                         f"not {burst_size}")


def check_threshold(value, grad_width=DEFAULTS["grad_width"]):
    """Check a run-time threshold (unsigned, ``grad_width`` bits) and return it."""
    return check_int("threshold", value, minimum=0, maximum=2 ** grad_width - 1)
