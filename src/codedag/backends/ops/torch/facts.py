"""What codedag knows about torch functions that user code calls: plain data, no imports.

torch's version is part of every calibration key already: no distributions of its own.
"""

from codedag.backends.facts import FILE_IO, LibraryFacts

FACTS = LibraryFacts(
    name="torch",
    modules=("torch",),
    namespaces=("torch", "torch.nn.functional", "torch.fft", "torch.functional"),
    indexed=("torch", "torch.nn.functional", "torch.fft", "torch.linalg"),
    data_types=(("torch", "Tensor"),),
    non_migratable=dict.fromkeys(("torch.load", "torch.save"), FILE_IO),
    random_prefixes=("torch.rand", "torch.normal"),
)
