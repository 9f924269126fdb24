"""How ``--help`` names what an option takes: a word for its value (TEXT, N, PATH, a choice of
values), nothing for a flag. Typer prints the Python annotation instead (``<bool>`` beside every
flag, ``<list[Path]>`` beside the op files), which says nothing to a user."""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption

# typer's label for a value (between its angle brackets) -> the word --help shows
_WORDS = {
    "str": "TEXT",
    "int": "N",
    "int range": "N",
    "float": "NUMBER",
    "float range": "NUMBER",
    "path": "PATH",
    "BankLocation": "BANK",
}


def value_word(label: str) -> str:
    """The word for typer's ``<label>``: a flag's ``<bool>`` none, choices as ``[a|b]``."""
    inner = label.strip("<>")
    if inner.startswith("list[") and inner.endswith("]"):  # a repeatable option: each value's word
        inner = inner[len("list[") : -1]
    if inner == "bool":
        return ""
    if "|" in inner:
        return f"[{inner}]"
    return _WORDS.get(inner, inner.upper())


def _no_type(ctx: Any) -> None:
    return None


def plain_help(command: Any, ctx: Any) -> None:
    """Give ``command``'s options, ``--help`` included (and its subcommands', for a group), the
    words above; an argument shows its name alone (``ops...``). Typer's commands are its own
    click's, so they are told apart by what they have."""
    for param in command.get_params(ctx):
        if isinstance(param, TyperArgument):
            param.display_type_rich = _no_type  # type: ignore[method-assign]
        elif param.metavar is None and getattr(param, "is_flag", False):  # --help is click's own option
            param.metavar = ""
        elif param.metavar is None and isinstance(param, TyperOption):
            param.metavar = value_word(param.display_type(ctx))
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub, ctx)


class PlainHelpGroup(TyperGroup):
    """A command group whose commands' help uses ``plain_help``."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            plain_help(found, ctx)
        return found

    def format_help(self, ctx: Any, formatter: Any) -> None:
        plain_help(self, ctx)
        super().format_help(ctx, formatter)
