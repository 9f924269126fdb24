"""The constants of the verifier's tolerance that the agents are told as they are: the op brief
states them beside the slack each output got (``core.op_brief.CaseSlack``), and
``verifier.compare`` applies them. One place, so what a prompt says is what a verdict applies."""

from __future__ import annotations

# A stress case's candidate passes beside the exact outputs when its errors from them are within
# this many times the float32 reference's own (plus the stress atol), both the largest and the
# root mean square: an output off everywhere by the reference's worst error fails the second. The
# float64 run is trusted while the reference's own error is within this fraction of the outputs'
# magnitude (a random op's float64 run, another draw, is far beyond it).
EXACT_MARGIN = 2.0
EXACT_TRUSTED = 0.1

# An output whose largest value is under this many times the absolute tolerance is mostly
# tolerance: zeros (or half the values) would pass it element by element. It is compared at its
# own scale too: the error's norm within this fraction of its own norm (zeros: 1.0; an honest
# float32 kernel whose outputs cancel from operands 1000x larger: about 0.01).
TINY_OUTPUT_ATOLS = 10.0
TINY_OUTPUT_REL_ERROR = 0.1

# The kinds of case the verifier draws, as the brief names them (verifier.cases draws them).
CASE_NAMES = {
    "normal": "normal (the op's own draw)",
    "large": "large (x * 100)",
    "heavy_tail": "heavy-tailed (x * exp(1.5 * randn))",
    "mixed_sign": "mixed-sign (random signs * 10^U(-3, 3))",
    "specials": "NaN and inf (one element in 4096)",
}

# A reduction's widened atol counts the input elements behind an output element up to this many
# (``verifier.reduction_lengths``): a cumsum's row or an attention's keys, not a LayerNorm over a
# whole 4M-element tensor, whose sqrt(n) widening (4.9e-4) let an eps 30x too large through. A
# longer reduction is summed in blocks or pairwise, as torch's own are (error growing as log n).
LONGEST_WIDENED = 65536
