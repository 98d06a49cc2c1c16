"""The course's world, on top of the library: `toy` (addition with known pivotal tokens, the
shipped tiny model in ``course/data``), its oracles in `oracle` (registered as methods when
that module is imported: ``import oar_lite.course`` registers nothing), the word problems in
`problems`, model loading in `models`, token pictures and widgets in `viz`, and the graded
exercises' helpers in `exercises`. The library never imports it; the lab does.
"""
import importlib
import pkgutil

MODULES = tuple(m.name for m in pkgutil.iter_modules(__path__))
"""The modules, each loaded on first use."""


def __getattr__(name: str):
    """``oar_lite.course.<module>`` on first use (PEP 562)."""
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
