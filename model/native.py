"""Native code built at first use: the C++ compiler, the folder built programs are cached in,
and the compiler's version that their cache keys include. The emulator's kernel
(:mod:`model.emulator`) and the compiled simulators (:mod:`simulation.cxxrtl`) are built with
them."""

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["CXX", "CXXFLAGS", "CompilerMissing", "compiler_available", "compiler_version",
           "default_cache_dir"]

#: The C++ compiler (``$CXX``, by default ``g++``) and its flags.
CXX = os.environ.get("CXX", "g++")
CXXFLAGS = ["-O3", "-std=c++17", "-w"]


class CompilerMissing(RuntimeError):
    """No C++ compiler to build native code with."""


def compiler_available():
    """Whether the C++ compiler (:data:`CXX`) is on the path."""
    return shutil.which(CXX) is not None


def default_cache_dir():
    """Where built programs are kept: ``$GC_CXXRTL_CACHE``, else the user's cache folder
    (never inside the installed package, which may not be writable)."""
    from platformdirs import user_cache_path
    return Path(os.environ.get("GC_CXXRTL_CACHE") or
                user_cache_path("gradient-compressor") / "cxxrtl")


_versions = {}


def compiler_version():
    """The first line of ``CXX --version`` ("" if it does not run), asked once per compiler."""
    if CXX not in _versions:
        try:
            out = subprocess.run([CXX, "--version"], capture_output=True, text=True).stdout
        except OSError:
            out = ""
        _versions[CXX] = out.splitlines()[0] if out else ""
    return _versions[CXX]
