"""SymbiYosys proof jobs for the gradient compressor (see docs/proofs.md).

* :mod:`proofs.jobs` -- the jobs (configuration, mode, depth, property groups);
* :mod:`proofs.gen` -- writes a job's RTLIL, .sby and property map;
* :mod:`proofs.run` -- runs jobs in parallel, summarises, reports failures;
* :mod:`proofs.trace_table` -- VCD traces as cycle-by-cycle tables;
* :mod:`proofs.replay` -- replays a witness in the Amaranth simulator, writes pytest tests;
* :mod:`proofs.mutants` -- the mutation check.
"""
