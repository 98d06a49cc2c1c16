"""scripts/offline_notebook_07.py: notebook 07's code with the hub replaced by what ships offline."""
import json
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
offline = load_script("offline_notebook_07")


def test_every_substitution_is_made_and_the_code_compiles():
    code = offline.offline_code()
    assert "Qwen/Qwen2.5-0.5B-Instruct\"" not in code and 'load_gsm8k("train")' not in code
    assert "MODEL_NAME = str(smollm2_cache_path())" in code and "GPU_STEPS = 100" not in code
    compile(code, "notebook_06", "exec")  # a substitution that broke the indentation fails here


def test_a_notebook_without_a_substituted_line_is_refused(tmp_path):
    cells = json.loads(offline.NOTEBOOK.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            cell["source"] = [line.replace("GPU_STEPS = 100", "GPU_STEPS = 200") for line in cell["source"]]
    changed = tmp_path / "06.ipynb"
    changed.write_text(json.dumps({"cells": cells}))
    with pytest.raises(ValueError, match="GPU_STEPS = 100"):
        offline.offline_code(changed)
