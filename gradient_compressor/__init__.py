"""A formally verified gradient compressor in Amaranth: the one name this project installs.

Its subpackages are the folders at the repository's root (pyproject.toml maps them):

* :mod:`gradient_compressor.design` -- the RTL: streamer, L1 accumulator, L2 write-back buffer,
  the run-time modes, the register interface, the Verilog export;
* :mod:`gradient_compressor.model` -- the reference model and the fast emulator;
* :mod:`gradient_compressor.properties` -- the formal properties and harnesses;
* :mod:`gradient_compressor.proofs` -- the proof jobs, their runner, replay and mutation check;
* :mod:`gradient_compressor.simulation` -- simulation drivers (Amaranth and CXXRTL), benchmarks;
* :mod:`gradient_compressor.workloads` -- gradient traces, synthetic and recorded;
* :mod:`gradient_compressor.reports` -- the bandwidth, sizing and training reports;
* :mod:`gradient_compressor.synth` -- the ECP5 flow and its timing analysis.
"""
