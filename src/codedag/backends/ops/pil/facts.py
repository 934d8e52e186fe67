"""What codedag knows about Pillow (PIL) besides its backends: plain data, no imports."""

from codedag.backends.facts import CODEC, FILE_IO, FileSource, LibraryFacts, Requirement

FACTS = LibraryFacts(
    name="pil",
    modules=("PIL",),
    namespaces=("PIL.Image", "PIL.ImageOps"),
    data_types=(("PIL.Image", "Image"),),
    distributions=("pillow",),
    non_migratable={
        **dict.fromkeys(("PIL.Image.open", "PIL.Image.Image.save"), FILE_IO),
        **dict.fromkeys(("PIL.Image.frombytes", "PIL.Image.Image.tobytes"), CODEC),
    },
    file_sources={"PIL.Image.open": FileSource("fp", reads_later=True)},
    requirement=Requirement("pillow", "PIL", "PIL pipelines"),
)
