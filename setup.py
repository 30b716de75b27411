"""The compiled line scanners of the parsers (`parsers/_fastscan.c`: C, no dependency but the Python headers);
the project's metadata and everything else are in pyproject.toml.

Optional: where the module cannot be built (no C compiler), the install goes on and the parsers read those
lines with their regexes, with the same results (`tests/parsers/test_fastscan.py` holds the two together).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("parsers._fastscan", ["parsers/_fastscan.c"], extra_compile_args=["-O2"], optional=True),
    ]
)
