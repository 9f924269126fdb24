"""forge's version: one literal, read by the package (``forge.__version__``), ``forge --version`` and
the build (pyproject's dynamic version)."""

VERSION = "0.2.0.dev0"
