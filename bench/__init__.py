"""seqlower benchmarks (a script, not tests): `python -m bench.run --quick`."""
