"""The docs site's reference pages, generated from the code they describe: one page per `forge`
command (from the installed click tree), the settings (from `ForgeSettings` and the environment-only
variables) and the exit codes (from `ExitCode`). mkdocs builds them through `hooks.py`; the tests
call these functions to check that nothing is left out."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import typer.main

from forge.core.errors import ForgeError
from forge.core.exit_codes import EXIT_CODE_MEANINGS, ExitCode
from forge.core.settings import ENVIRONMENT_ONLY, ForgeSettings
from forge.entry import app

CLI_DIR = "reference/cli"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# typer builds its commands on a click of its own (typer._click): read them by what they have,
# not by click's classes
def _default(param: Any) -> str:
    value = param.default
    if value is None or value == () or (getattr(param, "is_flag", False) and value is False):
        return ""
    return f"`{value}`"


def _options_table(command: Any) -> list[str]:
    rows = ["| argument or option | default | what it does |", "|---|---|---|"]
    for param in command.params:
        if getattr(param, "hidden", False):  # kept working for a release after it moved; not offered
            continue
        if param.param_type_name == "argument":
            name = f"`{param.name.upper() if param.name else ''}`" + ("..." if param.nargs == -1 else "")
        else:
            name = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        rows.append(f"| {name} | {_default(param)} | {_cell(getattr(param, 'help', None) or '')} |")
    return rows if len(rows) > 2 else []


def _command_section(command: Any, path: str, level: int) -> list[str]:
    ctx = command.context_class(command, info_name=path)
    pieces = [re.sub(r"\{(\w+)\}", lambda m: m.group(1).upper(), piece) for piece in command.collect_usage_pieces(ctx)]
    usage = " ".join([path, *pieces])
    help_text = inspect.cleandoc(command.help or "")
    return [f"{'#' * level} `{path}`", "", help_text, "", "```", usage, "```", "", *_options_table(command), ""]


def forge_command() -> Any:
    """The installed `forge` command as click sees it (a group: its ``commands`` by name)."""
    return typer.main.get_command(app)


def cli_pages() -> dict[str, str]:
    """``reference/cli/<command>.md`` for every top-level command (a group's subcommands on its page),
    and the index listing them."""
    root = forge_command()
    pages: dict[str, str] = {}
    index = [
        "# Command line",
        "",
        "Every `forge` command, generated from the installed command itself.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, command in root.commands.items():
        lines = _command_section(command, f"forge {name}", 1)
        if hasattr(command, "commands"):
            for sub_name, sub in command.commands.items():
                lines += _command_section(sub, f"forge {name} {sub_name}", 2)
        lines += ["Exit codes: [exit codes](../exit-codes.md).", ""]
        pages[f"{CLI_DIR}/{name}.md"] = "\n".join(lines)
        summary = _cell(inspect.cleandoc(command.help or "").split("\n\n")[0])
        index.append(f"| [`forge {name}`]({name}.md) | {summary} |")
    index += ["", "`forge --version` prints the version; `--help` after any command prints its options.", ""]
    pages[f"{CLI_DIR}/index.md"] = "\n".join(index)
    return pages


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return " \\| ".join(f"`{choice}`" for choice in get_args(annotation))
    return _cell(getattr(annotation, "__name__", None) or str(annotation).replace("pathlib.", ""))


def settings_page() -> str:
    """Every field of ``ForgeSettings`` with its variable, type, default and meaning, then the
    variables read from the environment only."""
    lines = [
        "# Settings and environment variables",
        "",
        "Each setting comes from, first to last: a command-line flag where the command has one, the "
        "`FORGE_*` environment variable, a settings file in the current directory (`./forge.toml`, or "
        "where there is none, the `[tool.forge]` table of `./pyproject.toml`; keys as in the first "
        "column; the first of the two that holds settings is used whole, not merged), the default. A bad "
        "value is an error that names the setting (exit code 2).",
        "",
        "| setting | variable | type | default | what it does |",
        "|---|---|---|---|---|",
    ]
    for name, field in ForgeSettings.model_fields.items():
        default = "computed" if field.default_factory is not None else f"`{field.default}`"
        lines.append(
            f"| `{name}` | `FORGE_{name.upper()}` | {_type_name(field.annotation)} | {default} | "
            f"{_cell(field.description or '')} |"
        )
    lines += ["", "## Read from the environment only", "", "| variable | what it does |", "|---|---|"]
    lines += [f"| `{v.name}` | {_cell(v.meaning)} |" for v in ENVIRONMENT_ONLY]
    return "\n".join(lines) + "\n"


_ERRORS_INTRO = (
    "A mistake in what a command was given is never a traceback: the command prints `error:` and a message "
    'naming the input and what to do (with `--json`, an object `{"error": {"kind", "message"}}` on '
    "stdout), and exits with its kind's code. The kinds (in `forge.core.errors` and beside the bank's leases; "
    "the common ones importable from `forge`):"
)


def exit_codes_page() -> str:
    """Every ``ExitCode`` with its meaning, and which error kinds end a command with which code."""
    lines = [
        "# Exit codes and errors",
        "",
        "Every `forge` command ends with one of these.",
        "",
        "| code | name | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| {int(code)} | `{code.name}` | {_cell(EXIT_CODE_MEANINGS[code])} |" for code in ExitCode]
    lines += ["", "## Errors", "", _ERRORS_INTRO, "", "| error | exit code | raised when |", "|---|---|---|"]
    for kind in _error_kinds(ForgeError):
        meaning = _cell(inspect.cleandoc(kind.__doc__ or "").split("\n\n")[0])
        lines.append(f"| `{kind.__name__}` | {int(kind.exit_code)} | {meaning} |")
    return "\n".join(lines) + "\n"


def _error_kinds(base: type[ForgeError]) -> list[type[ForgeError]]:
    kinds = [base]
    for sub in base.__subclasses__():
        kinds += [k for k in _error_kinds(sub) if k not in kinds]
    return kinds


def reference_pages() -> dict[str, str]:
    """Every generated page, by its path under docs/."""
    return {**cli_pages(), "reference/settings.md": settings_page(), "reference/exit-codes.md": exit_codes_page()}


def benchmark_page_list(directory: Path) -> str:
    """A line per page a benchmark script wrote into ``directory``: its title, linked, and the
    command that made it."""
    lines = []
    for page in sorted(directory.glob("*.md")):
        if page.name == "index.md":
            continue
        text = page.read_text().splitlines()
        title = text[0].lstrip("# ").strip() if text else page.stem
        made = next((ln for ln in text if ln.startswith("Generated by")), "")
        command = made.split("`")[1] if made.count("`") >= 2 else "not recorded"
        lines.append(f"- [{title}]({page.name}): `{command}`")
    return "\n".join(lines) or "None yet."
