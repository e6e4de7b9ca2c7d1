from hypothesis import Phase, settings

# Hypothesis' "explain" phase traces every line of a failing example; through the simulator
# that takes minutes. Report the shrunk failing example without it.
settings.register_profile("project", phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                             Phase.shrink], deadline=None)
settings.load_profile("project")
