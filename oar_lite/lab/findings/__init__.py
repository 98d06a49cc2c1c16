"""What the series found, in words, from the shipped measurements only (``oar_lite/lab/data``):
nothing here trains or samples, so a number in the prose changes only when the data does.

One module per topic computes the numbers and verdicts; its template, beside it, words them
(`prose`: Jinja2, a branch on a verdict written in the template). Notebook 06 reads `gradient`
(sections 3-6), `regimes` (6), `pivotal` (7), `noise` (8), `positive` (9), `batch` (10) and
`conclusion` (11: what the notebook found, read aloud); notebook 07 reads `smollm2`; the README's
"What we measured" block is `readme` (``python -m oar_lite.lab.findings --write-readme README.md``).
`seeds` pools a study's seed sets.
"""
