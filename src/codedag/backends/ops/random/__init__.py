"""Python's ``random`` module: no backends, only the facts the tracer and the optimizer read.

* :mod:`.facts`: What codedag knows about Python's ``random`` module: plain data, no imports
"""
