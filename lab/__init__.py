"""Research tooling: corpora, training, evaluation, benchmarks and the results report.

A top-level package beside engine/. Nothing in the runtime (engine/, app/, storage/) imports from
here (`python -m engine train|bench|eval|data|report` names these modules as strings, imported only
when called); the runtime is what `python -m engine infill`, the API and the app need to fill a mask.
tests/project/test_layering.py checks the direction.
"""
