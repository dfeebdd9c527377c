"""squall-bench: Squall's evaluation harness (issue 5).

An experiment is a definition in ``bench/experiments/NAME.py`` (an
:class:`~squall.bench.experiment.Experiment` named ``EXPERIMENT``). ``squall-bench
run NAME`` runs it and writes ``results/NAME/<time>.json`` (raw samples, the
exact commands, machine facts, a ``summary`` of named figures next to their
``targets``) and one PNG per figure; ``squall-bench report`` renders the
latest runs as markdown. See docs/bench.md.
"""
