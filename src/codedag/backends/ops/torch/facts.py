"""What codedag knows about torch functions that user code calls: plain data, no imports.

torch's version is part of every calibration key already; it is declared here as well for the
values computed through torch (the prefix cache's keys).
"""

from codedag.backends.facts import FILE_IO, FileSource, LibraryFacts

FACTS = LibraryFacts(
    name="torch",
    modules=("torch",),
    namespaces=("torch", "torch.nn.functional", "torch.fft", "torch.functional"),
    indexed=("torch", "torch.nn.functional", "torch.fft", "torch.linalg"),
    data_types=(("torch", "Tensor"),),
    distributions=("torch",),
    non_migratable=dict.fromkeys(("torch.load", "torch.save"), FILE_IO),
    random_prefixes=("torch.rand", "torch.normal"),
    # its functions take any argument with __torch_function__, but torch.from_numpy takes a
    # NumPy array only
    protocols=("__torch_function__",),
    arrays_only=("torch.from_numpy",),
    # precomputed features, one tensor per file
    file_sources={"torch.load": FileSource("f")},
)
