from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .params import checked, check_int

__all__ = ["WriteQueue"]


class WriteQueue(wiring.Component):
    """A synchronous FIFO of writes: L1's output queue.

    Like :class:`amaranth.lib.fifo.SyncFIFO` (a :class:`~amaranth.lib.memory.Memory` with a
    combinational read port, so the head is on ``r_data`` in the cycle it arrives), but its
    ``storage`` is made in the constructor and its pointers are named, so that the proofs can
    read every entry and follow one (``properties/pipeline.py``).

    Invariants (proven in ``properties/``)
    --------------------------------------
    * ``level <= depth`` and ``w_ptr == (r_ptr + level) % depth``.

    Parameters
    ----------
    shape : shape-like
        Shape of a write.
    depth : int
        Number of writes held (``>= 1``).

    Members
    -------
    w : ``In(stream.Signature(shape))``
        Writes in; ``ready`` is ``level < depth``.
    r : ``Out(stream.Signature(shape))``
        Writes out, oldest first; ``valid`` is ``level > 0``.
    level : ``Out(range(depth + 1))``
        Number of writes held.
    """

    def __init__(self, shape, *, depth):
        with checked(self):
            self.depth = check_int("depth", depth, minimum=1)
        self.storage = Memory(shape=shape, depth=depth, init=[])
        super().__init__({
            "w":     In(stream.Signature(shape)),
            "r":     Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        })
        self.w_ptr = Signal(range(depth))
        self.r_ptr = Signal(range(depth))

    def _next(self, ptr):
        return Mux(ptr == self.depth - 1, 0, ptr + 1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = self.storage
        write = self.storage.write_port()
        read  = self.storage.read_port(domain="comb")
        w_fire = Signal()
        r_fire = Signal()
        m.d.comb += [
            self.w.ready.eq(self.level != self.depth),
            self.r.valid.eq(self.level != 0),
            w_fire.eq(self.w.valid & self.w.ready),
            r_fire.eq(self.r.valid & self.r.ready),
            write.en.eq(w_fire),
            write.addr.eq(self.w_ptr),
            write.data.eq(self.w.payload),
            read.addr.eq(self.r_ptr),
            self.r.payload.eq(read.data),
        ]
        with m.If(w_fire):
            m.d.sync += self.w_ptr.eq(self._next(self.w_ptr))
        with m.If(r_fire):
            m.d.sync += self.r_ptr.eq(self._next(self.r_ptr))
        m.d.sync += self.level.eq(self.level + w_fire - r_fire)
        return m
