"""mkdocs hook: adds the reference pages generated from the code (``reference.py``) to the site, and
lists the benchmark pages the scripts wrote on the benchmarks index."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

# reference.py sits beside this hook, not in an installed package: loaded from its path under a
# name of its own, so nothing on sys.path is shadowed
_spec = importlib.util.spec_from_file_location("forge_docs_reference", Path(__file__).with_name("reference.py"))
assert _spec is not None and _spec.loader is not None
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


def on_files(files: Any, config: Any) -> Any:
    for path, text in reference.reference_pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "benchmarks/index.md":
        return markdown.replace("PAGES", reference.benchmark_page_list(Path(config["docs_dir"]) / "benchmarks"))
    return markdown
