"""Runnable comparisons and throughput measurements; results land in files under benchmarks/results."""
