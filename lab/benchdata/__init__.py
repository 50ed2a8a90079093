"""Data of `python -m engine bench fills`: sentences, small Python functions and proteins written
for the benchmark (none taken from the training corpora). See lab/bench_fills.py."""
