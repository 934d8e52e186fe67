"""``codedag cache info|clear``: what the prefix cache holds, and emptying it."""

from __future__ import annotations

import argparse

from codedag.cli.args import folder_action
from codedag.cli.output import print_json, stdout_console


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``cache`` subcommand (``cache info``, ``cache clear``)."""
    parser = subparsers.add_parser(
        "cache",
        parents=[parent],
        help="show or empty the prefix cache (RAM and disk tiers)",
        description=(
            "The prefix cache keeps each sample's deterministic prefix (docs/cache.md): a RAM "
            "tier in shared memory and a disk tier in a folder. `cache info` shows what each "
            "holds; `cache clear` deletes both."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (("info", "what each tier holds"), ("clear", "delete both tiers")):
        action = actions.add_parser(name, parents=[parent], help=text, description=text)
        folder_action(
            action,
            "--prefix-cache-dir",
            "the cache's folder (default: $CODEDAG_PREFIX_CACHE_DIR or prefix/ in the user cache)",
            run,
        )


def run(args: argparse.Namespace) -> int:
    """Print the tiers (``info``) or delete them (``clear``)."""
    from pathlib import Path

    from rich.table import Table

    from codedag.errors import UsageError
    from codedag.store.tiers import PrefixStore, StoreSettings

    folder = Path(args.folder) if args.folder else None
    if folder is not None and folder.exists() and not folder.is_dir():
        raise UsageError(f"--prefix-cache-dir {folder} is a file; expected a folder")
    settings = StoreSettings(folder=folder, ram_budget_bytes=1 << 20, disk_budget_bytes=1 << 20)
    store = PrefixStore.open(settings)
    where = settings.resolved_folder()
    if args.action == "clear":
        freed = store.clear()
        if args.json:
            print_json({"folder": str(where), "freed_bytes": freed})
        else:
            print(f"cleared the prefix cache of {where}: {freed / 1e6:.1f} MB freed")
        return 0
    tiers = [t for t in store.info() if Path(t.path).exists()]
    store.close()
    if args.json:
        print_json({"folder": str(where), "tiers": [t.__dict__ for t in tiers]})
        return 0
    console = stdout_console(140)
    if not tiers:
        console.print(f"the prefix cache of {where} is empty", markup=False)
        return 0
    table = Table(title=f"prefix cache of {where}")
    for column in ("tier", "folder", "values", "intermediates", "MB used", "MB on storage", "runs"):
        table.add_column(
            column, justify="right" if column.startswith(("MB", "v", "i", "r")) else "left"
        )
    for tier in tiers:
        table.add_row(
            tier.kind,
            tier.path,
            str(tier.entries),
            str(tier.metas),
            f"{tier.used_bytes / 1e6:.1f}",
            f"{tier.allocated_bytes / 1e6:.1f}",
            str(tier.generation),
        )
    console.print(table)
    return 0
