"""An import-linter contract type the built-in ones lack: a package that imports only the standard library.

Registered in pyproject.toml (``[tool.importlinter] contract_types``) as
``stdlib_only``; ``lint-imports`` (run from the repository root, which it puts
on the import path) loads it. The graph must include external packages
(``include_external_packages = true``) for third-party imports to show.
"""

from __future__ import annotations

import sys

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

__all__ = ["StandardLibraryOnlyContract"]


class StandardLibraryOnlyContract(Contract):
    """Every module of ``package`` imports only the standard library and ``package`` itself (lazy imports too)."""

    type_name = "stdlib_only"

    package = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        package = str(self.package)
        offending = []
        for module in sorted(graph.find_descendants(package) | {package}):
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                top = imported.split(".")[0]
                if top == package or top in sys.stdlib_module_names:
                    continue
                lines = sorted(
                    detail["line_number"] for detail in graph.get_import_details(importer=module, imported=imported)
                )
                offending.append((module, imported, lines))
        return ContractCheck(kept=not offending, metadata={"offending": offending})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, imported, lines in check.metadata["offending"]:
            where = ", ".join(f"l.{line}" for line in lines)
            output.print_error(f"{module} -> {imported} ({where}): not the standard library", bold=False)
            output.new_line()
