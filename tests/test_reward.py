"""Answer checking on the forms GSM8K, MATH and the toy world use (issue 15, item 1)."""
import threading

import pytest

from oar_lite import math_reward
from oar_lite.segment import completion_offsets, find_answer

MINUS = "\u2212"

# (completion, gold, expected reward)
CASES = [
    # boxed LaTeX (MATH)
    (r"So the total is \boxed{\$18}.", "18", 1.0),
    (r"\boxed{\$18}", 18, 1.0),
    (r"\boxed{\$1,234.50}", "1234.5", 1.0),
    (r"\boxed{\dfrac{3}{4}}", "0.75", 1.0),
    (r"\boxed{\dfrac{3}{4}}", r"\frac{3}{4}", 1.0),
    (r"\boxed{\frac{3}{4}}", "3/4", 1.0),
    (r"\boxed{\frac12}", "0.5", 1.0),
    (r"\boxed{\tfrac{1}{3}}", r"\frac{1}{3}", 1.0),
    (r"\boxed{\frac{2}{3}}", "0.75", 0.0),
    (r"\boxed{\sqrt{2}}", r"\sqrt{2}", 1.0),
    (r"\boxed{\sqrt{2}}", r"\sqrt{3}", 0.0),
    (r"\boxed{2\sqrt{3}}", "2", 0.0),
    (r"\boxed{2\sqrt{3}}", r"2\sqrt{3}", 1.0),
    (r"\boxed{\sqrt{12}}", r"2\sqrt{3}", 1.0),
    (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt{3}}{2}", 1.0),
    (r"\boxed{1,234}", "1234", 1.0),
    (r"\boxed{1{,}234}", "1234", 1.0),
    (r"\boxed{18 \text{ dollars}}", "18", 1.0),
    (r"\boxed{12\text{ cm}}", "12", 1.0),
    (r"\boxed{-5}", "-5", 1.0),
    (r"\boxed{" + MINUS + "5}", "-5", 1.0),
    (r"\boxed{5}", "-5", 0.0),
    (r"\boxed{2\pi}", r"2\pi", 1.0),
    (r"first \boxed{3} then \boxed{4}", "4", 1.0),
    (r"first \boxed{3} then \boxed{4}", "3", 0.0),
    (r"\boxed{\frac{1}{2}} and \boxed{}", "0.5", 1.0),
    # GSM8K's #### and thousands separators
    ("She pays 3 * 6 = 18 dollars.\n#### 18", "18", 1.0),
    ("#### 1,234", "1234", 1.0),
    ("#### 1,234,567", 1234567, 1.0),
    ("#### $18", "18", 1.0),
    ("#### 18.", "18", 1.0),
    ("#### " + MINUS + "7", "-7", 1.0),
    ("#### 17", "18", 0.0),
    ("#### 5\nlater text", "5", 1.0),
    # "The answer is ..." with units, dollars, LaTeX
    ("The answer is 90 years.", "90", 1.0),
    ("The answer is 90 years.", "91", 0.0),
    ("The final answer is $18.", "18", 1.0),
    ("The answer is $1,080.", "1080", 1.0),
    ("The answer is 3 * 4 = 12.", "12", 1.0),
    (r"The answer is $\dfrac{3}{4}$.", "0.75", 1.0),
    (r"The answer is \frac{1}{2}.", "1/2", 1.0),
    ("The answer is " + MINUS + "3.", "-3", 1.0),
    ("The answer is 12 apples.", 12, 1.0),
    ("The answer is 0.5.", r"\frac{1}{2}", 1.0),
    # the toy world's A=
    ("12+30=42 A=42", "42", 1.0),
    ("12+30=42 A=42", 42, 1.0),
    ("A=41", "42", 0.0),
    ("A=" + MINUS + "5", "-5", 1.0),
    ("A=1,000", "1000", 1.0),
    ("A=-5", MINUS + "5", 1.0),  # a Unicode minus in the reference too
    # no answer
    ("I do not know", "5", 0.0),
    ("", "5", 0.0),
    (r"\boxed{", "5", 0.0),
]


def test_table_has_enough_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("completion,gold,expected", CASES)
def test_math_reward_table(completion, gold, expected):
    assert math_reward(completion, gold) == expected


def test_math_reward_off_the_main_thread():
    """Data loaders and TRL reward paths call it from worker threads (no signal.alarm there)."""
    results, errors = [], []

    def work():
        try:
            results.extend(math_reward(c, g) for c, g, _ in CASES)
        except Exception as err:  # noqa: BLE001 - the test reports it
            errors.append(err)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    assert results == [e for _, _, e in CASES]


def large_completion() -> str:
    """A 100k-character completion: the right box first, then 2000 boxes never closed, then
    a long "####" line with nothing after it (both made the old extraction quadratic)."""
    return ("Work: \\boxed{\\dfrac{3}{4}} " + "\\boxed{ " * 2000 + "The answer is " * 500
            + "x" * 50_000 + "\n####" + " \t" * 17_000)


def test_large_completion_scored_right():
    completion = large_completion()
    assert len(completion) > 100_000
    assert find_answer(completion).answer == "\\dfrac{3}{4}"
    assert math_reward(completion, "0.75") == 1.0
    assert math_reward(completion, "0.5") == 0.0
    hashes = "#### 1,234\n" + "####" + " \t" * 50_000
    assert find_answer(hashes, ("hash",)).answer == "1,234"
    assert math_reward(hashes, 1234, formats=("hash",)) == 1.0


class _ByteTokenizer:
    """Decodes ids as UTF-8 bytes (a multi-byte character spans several ids), like byte-level BPE."""

    def decode(self, ids, **kwargs):
        return bytes(ids).decode("utf-8", errors="replace")


def _offsets_by_prefixes(tokenizer, ids):
    offsets, prev = [], 0
    for k in range(1, len(ids) + 1):
        cur = max(len(tokenizer.decode(ids[:k])), prev)
        offsets.append((prev, cur))
        prev = cur
    return offsets


@pytest.mark.parametrize("text", ["A=42 ok", "caf\u00e9 \u2212 5 \U0001f600 x", "\u00e9" * 50])
def test_completion_offsets_match_prefix_decoding(text):
    tok = _ByteTokenizer()
    ids = list(text.encode("utf-8"))
    decoded, offsets = completion_offsets(tok, ids)
    assert decoded == text
    assert offsets == _offsets_by_prefixes(tok, ids)


def test_completion_offsets_on_real_tokenizers(chars):
    from oar_lite.course import toy

    _, tokenizer = toy.load_model()
    for tok, text in [(chars, "12+30=42 A=42"), (tokenizer, "Q: 12+30=? 12+30=42 A=42")]:
        ids = tok(text, add_special_tokens=False)["input_ids"] * 30
        decoded, offsets = completion_offsets(tok, ids)
        expected = [(s, e) for s, e in _offsets_by_prefixes(
            type("T", (), {"decode": lambda self, i: tok.decode(i, skip_special_tokens=False,
                                                                  clean_up_tokenization_spaces=False)})(), ids)]
        assert offsets == expected
        assert offsets[-1][1] == len(decoded)


def test_math_verify_is_imported_on_the_first_answer_parsed_not_with_the_package():
    """math-verify (and sympy under it) cost most of ``import oar_lite`` beyond torch when the
    package imported them eagerly (issue 47 item 1)."""
    import subprocess
    import sys

    code = ("import sys, oar_lite\n"
            "print('math_verify' in sys.modules, 'sympy' in sys.modules)\n"
            "print(oar_lite.math_reward('A=12', 12), 'math_verify' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "False False", out
    assert out[1] == "1.0 True", out
