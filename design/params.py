"""Constructor argument checks shared by the design's components.

Each check raises an error that names the parameter, the value given and the allowed range, so a
mistake in a configuration script is found at construction and not in a waveform.
"""

from contextlib import contextmanager

__all__ = ["check_int", "check_power_of_two", "log2", "checked"]


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
