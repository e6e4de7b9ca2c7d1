"""Small helpers on bit vectors, shared by the design and its properties."""

from amaranth.hdl import Cat, Signal, Value

__all__ = ["lowest_index", "lowest_one_hot", "tree_sum"]


def lowest_index(m, bits, name):
    """A signal named ``name``: the index of the lowest set bit of ``bits`` (0 if none)."""
    bits = Value.cast(bits)
    index = Signal(range(len(bits)), name=name)
    for i in reversed(range(len(bits))):
        with m.If(bits[i]):
            m.d.comb += index.eq(i)
    return index


def lowest_one_hot(bits):
    """The lowest set bit of ``bits`` alone (0 if none)."""
    bits = Value.cast(bits)
    return Cat(bits[i] & ~bits[:i].any() for i in range(len(bits)))


def tree_sum(values):
    """The sum of ``values`` (a non-empty list) as a balanced tree of adders, ``log2(n)``
    adders deep (Python's ``sum`` chains ``n - 1`` of them)."""
    values = list(values)
    while len(values) > 1:
        values = [values[i] + values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]
