"""What codedag knows about Python's ``random`` module: plain data, no imports.

Its draws are recorded like any library's calls (the module-level functions through wrappers,
named ``random.uniform``; the methods of a ``random.Random`` a data set holds as
``random.Random.uniform``), so a plan sees where a sample draws random numbers even though the
numbers themselves are Python floats and ints that the tracer does not follow.
"""

from codedag.backends.facts import LibraryFacts

FACTS = LibraryFacts.one_module(
    "random",
    random_prefixes=("random.",),
    # choice, sample and shuffle take a sequence through len() and indexing: a stand-in value
    # reaches them as it is
    protocols=("__len__", "__getitem__"),
)
