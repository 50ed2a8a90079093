"""Research tooling: corpora, training, evaluation, benchmarks and the results report.

Nothing in the runtime (engine/ outside this package, app/, storage/) imports from here; the runtime
is what `python -m engine infill`, the API and the app need to fill a mask. tests/project/test_layering.py
checks the direction.
"""
