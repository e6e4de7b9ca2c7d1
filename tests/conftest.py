import os

from hypothesis import Phase, settings

# The compiled simulators are built at -O1 (gradient_compressor.simulation.cxxrtl.optimisation):
# about half the build time of -O3, and the tests' runs are short. A level set outside is kept.
os.environ.setdefault("GC_CXXRTL_OPT", "-O1")

# Hypothesis' "explain" phase traces every line of a failing example; through the simulator
# that takes minutes. Report the shrunk failing example without it.
settings.register_profile("project", phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                             Phase.shrink], deadline=None)
settings.load_profile("project")
