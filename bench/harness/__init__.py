"""bench/run's experiments (docs/results.md)."""
