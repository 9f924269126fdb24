"""Numbers and statuses as forge shows them, in the CLI and the TUI alike."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from forge.core.figures import fmt_seconds as fmt_seconds  # the engine words its limits with it too

# The colour a status is shown in: green for what worked, yellow for a stop the user can
# resume or act on, red for what failed, dim for what is still to come.
_STYLES = {
    "passed": "green",
    "finished": "green",
    "active": "green",
    "reviewed": "cyan",
    "running": "bold cyan",
    "pending": "dim",
    "interrupted": "yellow",
    "busy": "yellow",
    "held": "green",
    "not held": "yellow",
    "unconfirmed": "yellow",
    "budget": "yellow",
    "time_limit": "yellow",
    "provider_error": "yellow",
    "unsupported": "yellow",
    "no_gain": "yellow",
    "invalid_reply": "red",
    "bad": "red",
}


def fmt_times(x: float | None) -> str:
    """A speedup: "2.31x", or "—" when there is none."""
    return "—" if x is None else f"{x:.2f}x"


def fmt_ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f} ms"


def fmt_step(x: float | None) -> str:
    """A parallel plan's step time, three significant figures (milliseconds to seconds, where
    ``fmt_ms``'s four decimals are for kernels' microseconds)."""
    return "—" if x is None else f"{x:.3g} ms"


def fmt_cost(cost_usd: float | None, tokens: int) -> str:
    """An LLM spend: "$0.0123", "unknown" when a call had no price, "—" when nothing was spent."""
    if not tokens and not cost_usd:
        return "—"
    return "unknown" if cost_usd is None else f"${cost_usd:.4f}"


def fmt_when(when: datetime | str | None) -> str:
    """A timestamp to the minute, in the machine's local time."""
    if when is None:
        return "—"
    if isinstance(when, str):
        return when[:16].replace("T", " ")
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def status_text(status: object) -> Text:
    """A status in its colour (every failure status not listed is red)."""
    name = str(status)
    return Text(name, style=_STYLES.get(name, "red"))
