"""What a candidate may read of the user's project: its Python, never what the project keeps beside it.

The op's folder, the candidate's, the working directory and the import path's folders outside
the Python installation are a *project*: beside the op file a project keeps a ``.env`` with its
API keys, a ``.git``, TLS keys, credentials, a bank. A candidate needs the op file, its own file
and the Python the op imports from beside it. So a project folder is granted as:

- the folder itself listable (Python's import system lists a folder on its path before it finds a
  module there; a name is all a listing shows);
- its Python files (``.py``, ``.pyi``, compiled extensions), each by a rule on that file, and the
  files named after the op (``NAME.inputs.pt`` beside ``NAME.py``);
- its packages (a folder holding ``__init__.py`` or, a namespace package, any module): whole where
  nothing beneath is hidden or named like a key, a credential or a bank; else file by file,
  without those. A Python file named so (``secrets.py``, ``credentials.py``) is withheld too.

Symbolic links are not followed out of a project: a link at its top is not granted, and a
package's links are granted where the package is whole (Landlock checks a link's target by path).

A hidden file or folder, a secret-looking name, and anything else in the folder (data, a bank, a
README) stay unreadable: a candidate that opens one is refused with the path named.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

PYTHON_SUFFIXES = (".py", ".pyi", ".so", ".pyd")
# Names a package file may not have: keys, certificates' private halves, credential stores, banks.
SECRET_NAMES = (
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.kdbx",
    "*.keystore",
    "*.jks",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*credential*",
    "*secret*",
    "*password*",
    "*passwd*",
    "*api_key*",
    "*apikey*",
    "*_token",
    "*_token.*",
    "token",
    "token.*",
    "*.token",
    "*.env",
    "*.db",
    "*.sqlite",
    "*.sqlite3",
)


@dataclass
class ProjectReads:
    """Of the user's projects: folders a candidate may list, trees and files it may read."""

    listable: set[str] = field(default_factory=set)
    trees: set[str] = field(default_factory=set)  # a package folder with nothing to withhold, whole
    files: set[str] = field(default_factory=set)

    def add_folder(self, folder: Path) -> None:
        """``folder`` as a project: listable, its Python files and its packages' files readable."""
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        self.listable.add(str(folder))
        for entry in entries:
            if not _readable(entry.name) or entry.is_symlink():  # a link may lead out of the project
                continue
            if entry.is_file() and entry.name.endswith(PYTHON_SUFFIXES):
                self.files.add(entry.path)
            elif entry.is_dir() and _is_package(Path(entry.path)):
                self._add_package(entry.path)

    def add_file(self, path: Path) -> None:
        """One file the candidate needs (the op, its own source), whatever its name, and the files
        beside it named after it (an op carved from a model keeps its recorded inputs in
        ``NAME.inputs.pt`` beside ``NAME.py``), unless hidden or named like a secret."""
        if not path.is_file():
            return
        self.files.add(str(path))
        with os.scandir(path.parent) as entries:
            for entry in entries:
                named = entry.name.startswith(path.stem + ".") and _readable(entry.name)
                if named and entry.is_file(follow_symlinks=False):
                    self.files.add(entry.path)

    def _add_package(self, package: str) -> None:
        """A package whole where nothing beneath is withheld (one rule: a project's large packages
        stay a few rules), else listable, its readable files one by one, its folders the same way."""
        clean = _clean_folders(package)
        todo = [package]
        while todo:
            folder = todo.pop()
            if clean.get(folder, False):
                self.trees.add(folder)
                continue
            self.listable.add(folder)
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not _readable(entry.name):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        self.files.add(entry.path)


def _readable(name: str) -> bool:
    """Not hidden, and not named like a key, a credential or a bank (``secrets.py`` neither)."""
    return not name.startswith(".") and not looks_secret(name)


def _is_package(folder: Path) -> bool:
    """A folder Python imports from: ``__init__.py`` in it, or (a namespace package) a module."""
    try:
        return any(e.name.endswith(PYTHON_SUFFIXES) and e.is_file() for e in os.scandir(folder))
    except OSError:
        return False


def _clean_folders(top: str) -> dict[str, bool]:
    """For each folder under ``top`` (``top`` too): whether nothing beneath it is withheld."""
    clean: dict[str, bool] = {}
    for root, dirs, names in os.walk(top, topdown=False):
        kids = all(_readable(d) and clean.get(os.path.join(root, d), True) for d in dirs)
        clean[root] = kids and all(_readable(n) for n in names)
    return clean


def looks_secret(name: str) -> bool:
    """Whether a file's name says it holds a key, a credential or a bank."""
    lowered = name.lower()
    return any(fnmatch.fnmatch(lowered, pattern) for pattern in SECRET_NAMES)
