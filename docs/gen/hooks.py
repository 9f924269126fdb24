"""mkdocs hook: adds the reference pages generated from the code (``reference.py``) to the site, and
lists the benchmark pages the scripts wrote on the benchmarks index."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).parent))

from reference import benchmark_page_list, reference_pages


def on_files(files: Any, config: Any) -> Any:
    for path, text in reference_pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "benchmarks/index.md":
        return markdown.replace("PAGES", benchmark_page_list(Path(config["docs_dir"]) / "benchmarks"))
    return markdown
