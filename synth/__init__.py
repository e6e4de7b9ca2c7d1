"""``python -m gradient_compressor.synth``: the ECP5 synthesis flow and its report (LUTs, RAM,
Fmax, critical path).

See :mod:`synth.flow` for the flow, :mod:`synth.netlist` for what is read from the netlist and
:mod:`synth.report` for the report.
"""
