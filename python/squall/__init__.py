"""Squall: tooling for the Squall NFV platform (squallctl, tests, benchmarks)."""

__version__ = "0.1.0"
