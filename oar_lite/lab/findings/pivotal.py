"""Where P(correct) moves on a real model (notebook 06, section 7): the counts of the SmolLM2
Monte-Carlo ground truth (`oar_lite.lab.ground_truth.ground_truth_summary`) in words, above the
table of each method's AUC against it (`ground_truth.ground_truth_markdown`). The words are
``pivotal.md.j2``'s.
"""
from __future__ import annotations

from . import prose

TEMPLATE = "pivotal.md.j2"


def text(piece: str, numbers: dict) -> str:
    """``"summary"``: `ground_truth.ground_truth_summary`'s counts in words."""
    return prose.render(TEMPLATE, piece, n=numbers)
