"""Drivers that run gradient streams through the RTL and record what comes out."""

from .driver import SimResult, simulate, always, every_other, random_ready, periodic_ready

__all__ = ["SimResult", "simulate", "always", "every_other", "random_ready", "periodic_ready"]
