"""Read SymbiYosys/smtbmc VCD traces (with pyvcd's tokenizer) and print them as cycle-by-cycle
tables."""

from vcd.reader import TokenKind, VCDParseError, tokenize

from gradient_compressor.simulation.waves import COLUMNS

__all__ = ["read_vcd", "Trace", "TraceError", "print_table", "COLUMNS"]


class Trace:
    """Values per step: ``trace[name]`` is a list of ints (None when unknown)."""

    def __init__(self, signals, steps):
        self.signals = signals      # full name -> (width, [value per step])
        self.steps = steps

    def find(self, key):
        """The signal whose name is ``key`` or ends with ``.key`` (shortest match)."""
        if key in self.signals:
            return key
        cands = [n for n in self.signals if n.endswith("." + key) or n.endswith(" " + key)]
        if not cands:
            return None
        return min(cands, key=len)

    def values(self, key, signed=False):
        name = self.find(key)
        if name is None:
            return None
        width, vals = self.signals[name]
        if not signed:
            return vals
        out = []
        for v in vals:
            if v is not None and width and v >= 1 << (width - 1):
                v -= 1 << width
            out.append(v)
        return out


class TraceError(ValueError):
    """A file that is not a readable VCD trace."""


def read_vcd(path):
    """Read an smtbmc VCD trace (step ``k`` at time ``10 * k``) into a :class:`Trace`.

    Signal names are dotted scope paths below the top module. Raises :class:`TraceError` if
    ``path`` cannot be read or is not a VCD file with at least one variable."""
    scopes, codes, changes = [], {}, {}
    time = 0
    try:
        with open(path, "rb") as f:
            for token in tokenize(f):
                kind = token.kind
                if kind is TokenKind.SCOPE:
                    scopes.append(token.data.ident)
                elif kind is TokenKind.UPSCOPE:
                    scopes.pop()
                elif kind is TokenKind.VAR:
                    var = token.data
                    full = ".".join(scopes[1:] + [var.reference])  # drop the top module
                    codes.setdefault(var.id_code, []).append(full)
                    changes[full] = (var.size, [])
                elif kind is TokenKind.CHANGE_TIME:
                    time = token.data
                elif kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR):
                    value = token.data.value
                    if isinstance(value, str):      # a scalar, or a vector with x or z bits
                        try:
                            value = int(value, 2)
                        except ValueError:
                            value = None
                    for full in codes.get(token.data.id_code, []):
                        changes[full][1].append((time, value))
    except OSError as error:
        raise TraceError(f"{path}: {error.strerror or error}") from None
    except (VCDParseError, UnicodeDecodeError, IndexError) as error:
        raise TraceError(f"{path}: not a VCD file ({error})") from None
    if not changes:
        raise TraceError(f"{path}: not a VCD trace (no variables in it)")
    # smtbmc: step k is at time 10*k.
    last = max([t for _, ch in changes.values() for t, _ in ch] or [0])
    steps = last // 10 + 1
    signals = {}
    for name, (width, ch) in changes.items():
        vals, cur, i = [], None, 0
        for k in range(steps):
            while i < len(ch) and ch[i][0] <= 10 * k:
                cur = ch[i][1]
                i += 1
            vals.append(cur)
        signals[name] = (width, vals)
    if "smt_step" in signals:     # the last timestamp only closes the trace
        known = [v for v in signals["smt_step"][1] if v is not None]
        if known:
            steps = max(known) + 1
            signals = {n: (w, v[:steps]) for n, (w, v) in signals.items()}
    return Trace(signals, steps)


STATES = {0: "INIT", 1: "RUN", 2: "SCAN", 3: "DONE"}
CAUSES = {0: "DIR", 1: "ACC", 2: "MAX", 3: "EVI", 4: "FLU", 5: "STO", 6: "LIN"}


def print_table(trace, columns=COLUMNS, file=None, start=0):
    """Print ``trace`` one cycle a line, from cycle ``start``: the :data:`COLUMNS` it has
    (``|`` marks the first column of a group), states and causes by name, ``?`` unknown."""
    import sys
    from gradient_compressor.console import table
    cols = []
    for head, key, signed in columns:
        vals = trace.values(key, signed)
        if vals is None:
            continue
        if key.endswith("state"):
            vals = [STATES.get(v, v) for v in vals]
        if key.endswith("cause"):
            vals = [CAUSES.get(v, v) for v in vals]
        cols.append((head, ["?" if v is None else v for v in vals]))
    heads = ["cyc"] + [h for h, _ in cols]
    rows = [[k] + [c[1][k] for c in cols] for k in range(start, trace.steps)]
    print(table(rows, heads, fmt="compact", align=["right"] * len(heads)), file=file or sys.stdout)
