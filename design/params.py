"""The compressor's configuration (:class:`Config`: its defaults and its checks, in one place),
the run-time modes' constants, and the checks of parameters. The components, the reference
model, ``compressor-report``/``compressor-sweep``, the Verilog export and the formal harness's
configurations take them from here.

Each check raises an error that names the parameter, the value given and the allowed range, so a
mistake in a configuration script (or on a command line) is found at once and not in a waveform.
"""

import dataclasses
import itertools
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from amaranth.hdl import Elaboratable, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Config", "DEFAULTS", "modes_signature", "window_signature", "MODES_OFF",
           "MODE_INPUTS", "modes_off", "mode_inputs", "port_name", "port_shapes", "port",
           "LFSR_LOAD_INPUTS",
           "LFSR_WIDTH", "LFSR_POLYNOMIAL", "LFSR_TAPS", "LFSR_RESET",
           "EMA_FRACTION_BITS", "EMA_SHIFT_WIDTH", "EMA_SCALE_WIDTH", "EMA_SCALE_FRACTION_BITS",
           "BYPASS_WINDOWS", "BYPASS_WINDOWS_MAX", "WHOLE_LINE", "LANES", "EMA_LINE_LAG", "check_lanes",

           "L1_ENTRIES_MAX", "check_l1_geometry",
           "ema_fraction_bits",
           "DISCARD_COUNT_WIDTH", "check_threshold", "check_int", "check_bool",
           "check_power_of_two", "check_modes", "log2", "checked", "unused"]


@dataclass(frozen=True)
class Config(Mapping):
    """A compressor configuration: its geometry, checked once, when it is made.

    Every component takes one (each reads the parameters it needs), and so do the reference
    model, the formal harness's configurations and the commands' geometry options. A
    :class:`Config` is also a read-only mapping of its parameters' names to their values, so
    ``dict(config)`` and ``**config`` give keyword arguments.

    Raises :class:`TypeError` or :class:`ValueError` naming the first bad parameter, the value
    given and the allowed range.
    """
    addr_width:  int = 32    # address bits
    grad_width:  int = 16    # signed gradient bits (and unsigned threshold bits)
    sets:        int = 32    # L1 sets (a power of two; sets * ways <= L1_ENTRIES_MAX)
    ways:        int = 4     # L1 ways (a power of two)
    max_updates: int = 255   # updates after which an L1 entry is written out
    fifo_depth:  int = 32    # L2 write-back buffer capacity, in writes
    burst_size:  int = 16    # L2 level that starts a DRAM burst
    lanes:       int = 1     # gradients per beat (a line): one of LANES
    bypass_windows: int = 2  # run-time bypass windows: 0 to BYPASS_WINDOWS_MAX
    whole_line:  bool = True  # L1 decides by the whole-line rule (docs/lanes.md); False:
                              # the seed's policy, values of grad_width + 2 bits

    def __post_init__(self):
        _check_config(self)

    @classmethod
    def of(cls, config=None, **params):
        """``config`` (a :class:`Config`, a mapping of some of its parameters, or ``None`` for
        the defaults) with ``params`` in place of its own."""
        if config is None:
            return cls(**params)
        if isinstance(config, cls):
            return dataclasses.replace(config, **params) if params else config
        if isinstance(config, Mapping):
            return cls(**{**config, **params})
        raise TypeError(f"config must be a Config or a mapping of its parameters, "
                        f"not {config!r}")

    def replace(self, **params):
        """This configuration with ``params`` in place of its own (checked again)."""
        return dataclasses.replace(self, **params)

    # -- a mapping of the parameters' names to their values ------------------------------------

    def __iter__(self):
        return (field.name for field in dataclasses.fields(self))

    def __len__(self):
        return len(dataclasses.fields(self))

    def __getitem__(self, name):
        if name not in self.__dataclass_fields__:
            raise KeyError(name)
        return getattr(self, name)


#: :class:`~design.GradientCompressor`'s default geometry (the parameters of :class:`Config`
#: but the lanes, the bypass windows' count and the line policy's rule).
DEFAULTS = {field.name: field.default for field in dataclasses.fields(Config)
            if field.name not in ("lanes", "bypass_windows", "whole_line")}


# -- run-time modes (docs in design/modes.py) ----------------------------------------------------

#: The stochastic mode's random bits: a Galois LFSR of this many bits, shifting right, one step
#: per stochastic decision: ``state = (state >> 1) ^ (LFSR_TAPS if state & 1 else 0)``.
LFSR_WIDTH = 32
#: The LFSR's feedback polynomial, by the exponents of its terms: x^32 + x^22 + x^2 + x + 1
#: (maximal length, Xilinx XAPP052; ``tests/test_modes.py`` checks that it is primitive).
LFSR_POLYNOMIAL = (32, 22, 2, 1, 0)
#: Its Galois feedback mask: bit ``e - 1`` for each term ``x^e`` but the constant.
LFSR_TAPS = sum(1 << (e - 1) for e in LFSR_POLYNOMIAL if e)
#: The LFSR state after reset (a seed of 0 also loads this: the all-zero state never moves).
LFSR_RESET = 1
#: Fraction bits of the EMA of ``|grad|`` (so its floor rounding loses less than one unit).
EMA_FRACTION_BITS = 8
#: The numbers of lanes (gradients per beat, a line) the line-rate design takes.
LANES = (1, 2, 4, 8, 16, 32)
#: The most L1 entries (``sets * ways``; on lines, lines) a configuration may have: 16 times
#: the large configuration the proofs cover (1024 x 4). The simulators and the reference model
#: hold every entry in memory (the Amaranth design's RTLIL grows by about 200 bytes an entry
#: and takes seconds per thousand sets to make), so a larger L1 would exhaust the machine
#: before it simulated a gradient.
L1_ENTRIES_MAX = 2 ** 16
#: On lines (more than one lane), a beat is judged by the EMA as it was before the updates of
#: the last ``EMA_LINE_LAG`` beats that updated it: the RTL takes that many cycles to form a
#: beat's update (the bypass windows' compares, then the lanes' sum), outside the EMA's loop.
EMA_LINE_LAG = 2


def ema_fraction_bits(lanes=1):
    """Fraction bits of the EMA on beats of ``lanes`` gradients: ``log2(lanes)`` more than
    :data:`EMA_FRACTION_BITS`, so that a lane's share of one update does not round away."""
    return EMA_FRACTION_BITS + lanes.bit_length() - 1


#: Width of the EMA's run-time ``ema_shift`` input ``k`` (alpha = 2**-k, k = 0 .. 7).
EMA_SHIFT_WIDTH = 3
#: Width of the run-time ``ema_scale`` input, unsigned fixed point ...
EMA_SCALE_WIDTH = 8
#: ... with this many fraction bits (``ema_scale = 16`` is a scale of 1.0).
EMA_SCALE_FRACTION_BITS = 4
#: The default number of run-time bypass windows (``bypass[i]``: a :class:`Config` parameter) ...
BYPASS_WINDOWS = Config.bypass_windows
#: L1's policy by default: the whole-line rule (a :class:`Config` parameter; docs/lanes.md).
WHOLE_LINE = Config.whole_line
#: ... and the most a configuration may have.
BYPASS_WINDOWS_MAX = 8
#: Width of the running ``discard_count`` (it wraps, like ``accepted_count``).
DISCARD_COUNT_WIDTH = 32


def window_signature(addr_width=DEFAULTS["addr_width"]):
    """One bypass window, ``base <= addr <= limit`` if ``enable``, as its source drives it (a
    compressor takes it flipped: ``In(window_signature(...))``, as a stream's sink does)."""
    return wiring.Signature({"base": Out(addr_width), "limit": Out(addr_width),
                             "enable": Out(1)})


def modes_signature(addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                    bypass_windows=BYPASS_WINDOWS):
    """The run-time mode inputs of :class:`~design.GradientCompressor` (beside ``threshold``):
    their names, shapes and order, the one list of them. The compressor's signature, the
    Verilog export's ports, the formal harness's free inputs, the replay's and the simulators'
    inputs and the checks of mode settings all derive from it (docs/modes.md). The bypass
    windows are an array, ``bypass[i]`` (ports ``bypass__<i>__base``, ...: :func:`port_name`),
    absent with none."""
    members = {
        "small_threshold": In(grad_width),       # dual threshold: 0 disables it
        "stochastic":      In(1),                # 0: drop (and account) a tiny miss; 1: round
        "lfsr_seed":       In(LFSR_WIDTH),       # the stochastic mode's LFSR, loaded ...
        "lfsr_load":       In(1),                # ... in a cycle with this high, while idle
        "ema_enable":      In(1),                # 1: the threshold follows the EMA
        "ema_per_step":    In(1),                # 1: ... and moves only at flush barriers
        "ema_shift":       In(EMA_SHIFT_WIDTH),  # alpha = 2**-ema_shift
        "ema_scale":       In(EMA_SCALE_WIDTH),  # EMA_SCALE_FRACTION_BITS fraction bits
        "ema_min":         In(grad_width),       # the EMA threshold's clamp bounds
        "ema_max":         In(grad_width),
    }
    if bypass_windows:
        members["bypass"] = In(window_signature(addr_width)).array(bypass_windows)
    return wiring.Signature(members)


def port_name(path):
    """A member's port name from its path in a signature, as Amaranth names the port:
    ``("bypass", 0, "base")`` -> ``bypass__0__base``."""
    return "__".join(map(str, path))


def port_shapes(signature):
    """``{port name: shape}`` of every port member of ``signature``, nested ones flattened, in
    order (streams and other interfaces included, as Amaranth names their ports)."""
    return dict(_ports(signature.members, ()))


def _ports(members, path):
    for name, member in members.items():
        for index in itertools.product(*map(range, member.dimensions)):
            if member.is_port:
                yield port_name((*path, name, *index)), member.shape
            else:
                yield from _ports(member.signature.members, (*path, name, *index))


def port(obj, name):
    """The port member of ``obj`` (a component or an interface) named ``name``
    (:func:`port_name`): ``port(dut, "bypass__0__base")`` is ``dut.bypass[0].base`` (or
    ``dut.bypass__0__base``, a flat member of that name)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    for step in name.split("__"):
        obj = obj[int(step)] if step.isdigit() else getattr(obj, step)
    return obj


def mode_inputs(bypass_windows=BYPASS_WINDOWS):
    """Every run-time mode input's port name, with ``bypass_windows`` windows: the settings,
    then the LFSR's load (:data:`LFSR_LOAD_INPUTS`)."""
    names = list(port_shapes(modes_signature(bypass_windows=bypass_windows)))
    return (*[n for n in names if n not in LFSR_LOAD_INPUTS], *LFSR_LOAD_INPUTS)


def modes_off(bypass_windows=BYPASS_WINDOWS):
    """The run-time mode settings (every mode input but :data:`LFSR_LOAD_INPUTS`) with every
    mode off, with ``bypass_windows`` windows: the keys of the reference model's
    ``("modes", {...})``."""
    return {name: 0 for name in mode_inputs(bypass_windows) if name not in LFSR_LOAD_INPUTS}


#: The mode inputs that load the LFSR: commands, not settings.
LFSR_LOAD_INPUTS = ("lfsr_seed", "lfsr_load")
#: :func:`modes_off` and :func:`mode_inputs` with the default number of bypass windows.
MODES_OFF = modes_off()
MODE_INPUTS = mode_inputs()


@contextmanager
def checked(component):
    """Run a component's argument checks. If one fails, the half-made component is marked as
    not meant to be used (:func:`unused`)."""
    try:
        yield
    except (TypeError, ValueError):
        unused(component)
        raise


def unused(component):
    """Mark ``component`` and the elaboratables it holds (its submodules, its memories) as not
    meant to be used, so that Amaranth does not add ``UnusedElaboratable`` warnings to the
    error that stopped it from being elaborated."""
    todo, seen = [component], set()
    while todo:
        obj = todo.pop()
        if id(obj) not in seen:
            seen.add(id(obj))
            obj._MustUse__silence = True
            todo += [value for value in vars(obj).values() if isinstance(value, Elaboratable)]


def check_int(name, value, *, minimum=None, maximum=None):
    """Check that ``value`` is an integer in ``[minimum, maximum]`` and return it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def check_bool(name, value):
    """Check that ``value`` is ``True`` or ``False`` and return it (a flag given as anything
    else, 1 included, is a :class:`TypeError`, as :func:`check_int` refuses a bool)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


def check_power_of_two(name, value):
    """Check that ``value`` is a power of two (1, 2, 4, ...) and return it."""
    check_int(name, value, minimum=1)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two (1, 2, 4, ...), not {value}")
    return value


def check_lanes(value):
    """Check that ``value`` is one of :data:`LANES` and return it."""
    check_power_of_two("lanes", value)
    if value not in LANES:
        raise ValueError(f"lanes must be one of {', '.join(map(str, LANES))}, not {value}")
    return value


def log2(value):
    """The base-2 logarithm of a power of two."""
    return value.bit_length() - 1


def check_l1_geometry(sets, ways, *, addr_width, lanes=1):
    """Check an L1 geometry of ``sets`` x ``ways`` entries (each a line of ``lanes``) on
    ``addr_width``-bit addresses (an integer, at least 1): powers of two, a tag above the set
    index, and no more entries than :data:`L1_ENTRIES_MAX`. (More ways than a set has tags,
    ``2**tag_bits``, is allowed: the ways beyond never fill, and the geometry sweep proves
    such L1s correct.)
    Raises :class:`ValueError` naming the parameter to change and the bound."""
    check_power_of_two("sets", sets)
    check_power_of_two("ways", ways)
    if sets > L1_ENTRIES_MAX:
        raise ValueError(f"sets must be at most {L1_ENTRIES_MAX}, not {sets}: sets x ways is "
                         f"at most {L1_ENTRIES_MAX} L1 entries")
    index_bits = log2(sets) + log2(lanes)
    if addr_width <= index_bits:
        what = "log2(sets)" if lanes == 1 else "log2(sets) + log2(lanes)"
        raise ValueError(f"addr_width must be greater than {what} = {index_bits} so that a tag "
                         f"remains above the set index, not {addr_width}")
    if sets * ways > L1_ENTRIES_MAX:
        raise ValueError(f"ways must be at most {L1_ENTRIES_MAX // sets} with {sets} sets, "
                         f"not {ways}: sets x ways is at most {L1_ENTRIES_MAX} L1 entries")
    return sets, ways


def _check_config(config):
    """:class:`Config`'s checks, each parameter before those whose range depends on it."""
    check_int("grad_width", config.grad_width, minimum=2)
    check_int("max_updates", config.max_updates, minimum=1)
    check_int("addr_width", config.addr_width, minimum=1)
    check_lanes(config.lanes)
    check_l1_geometry(config.sets, config.ways, addr_width=config.addr_width, lanes=config.lanes)
    check_int("fifo_depth", config.fifo_depth, minimum=1)
    check_int("burst_size", config.burst_size, minimum=1)
    check_int("bypass_windows", config.bypass_windows, minimum=0, maximum=BYPASS_WINDOWS_MAX)
    if config.burst_size > config.fifo_depth:
        raise ValueError(f"burst_size must be at most fifo_depth ({config.fifo_depth}), "
                         f"not {config.burst_size}")
    check_bool("whole_line", config.whole_line)


def check_threshold(value, grad_width=DEFAULTS["grad_width"]):
    """Check a run-time threshold (unsigned, ``grad_width`` bits) and return it."""
    return check_int("threshold", value, minimum=0, maximum=2 ** grad_width - 1)


def check_modes(modes, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                bypass_windows=BYPASS_WINDOWS):
    """Check a dict of run-time mode settings (keys of :func:`modes_off`); return it complete,
    the missing keys at their "off" values."""
    off = modes_off(bypass_windows)
    unknown = sorted(set(modes) - set(off))
    if unknown:
        raise ValueError(f"unknown mode setting {unknown[0]!r}; known: {', '.join(off)}")
    shapes = port_shapes(modes_signature(addr_width, grad_width, bypass_windows))
    full = dict(off, **modes)
    for name, value in full.items():
        check_int(name, value, minimum=0, maximum=2 ** Shape.cast(shapes[name]).width - 1)
    return full
