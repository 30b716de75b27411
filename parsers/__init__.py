"""Parsers: one module per format family, listed in `parsers.registry`."""
