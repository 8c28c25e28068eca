"""A command's answer read from the store without the facade: what makes a warm command cost what reading its
answer costs.

A profile whose cache entry is in place (nsysql.store.opening: warm, no DuckDB opened) is given to the commands
that print answers as a `Stored`. Asked for an analysis that keeps its answers in the store, it computes the
answer's key from declared.json (each parameter's value when left out, normalized as the declaration's bind
does it: `key` there, written by scripts/readme_commands.py) and reads the answer (nsysql.store.answers.get),
importing neither the Profile, the analyses' declarations and modules, nor DuckDB. Anything else (an answer not
stored yet, a parameter spelled in a way only the declaration's Python can normalize, an analysis kept in memory
only, any other attribute) goes to the Profile, made then, which answers it as it always does. Either way the
answer is the one stored under the same key: the same frames, the same bytes printed.
"""

from __future__ import annotations

import json

from ..store import answers as _answers
from .manifest import DECLARED


class Stored:
    """A warm profile (nsysql.store.opening.Opened with its entry in place): stored answers read directly, the
    rest asked of the Profile, made on first need by `facade(opened)`."""

    def __init__(self, opened, facade):
        self.path = opened.path
        self.cache_entry = opened.entry
        self._opened, self._facade, self._profile = opened, facade, None

    @property
    def profile(self):
        """The Profile over the same entry (made once)."""
        if self._profile is None:
            self._profile = self._facade(self._opened)
        return self._profile

    def __getattr__(self, name: str):
        if name.startswith("_") or "key" not in DECLARED.get(name, {}):
            return getattr(self.profile, name)

        def method(**params):
            bound = key(name, params)
            hit = None if bound is None else _answers.get(self.cache_entry, name, bound)
            return hit if hit is not None else getattr(self.profile, name)(**params)

        return method


def key(analysis: str, given: dict) -> dict | None:
    """The parameters under which the store keeps `analysis(**given)` (every one, defaults filled in and
    normalized, as Analysis.bind gives them to the answers store), or None where only the declaration can say:
    an unknown or missing parameter, or one whose normalize function meets a spelling other than its defaults'."""
    params = DECLARED[analysis]["key"]
    if set(given) - {p["name"] for p in params}:
        return None
    out = {}
    for p in params:
        if p["name"] not in given:
            if "default" not in p:
                return None
            out[p["name"]] = p["default"]
            continue
        value = given[p["name"]]
        if "spellings" in p:
            text = json.dumps(value, default=str)
            normal = [n for spelled, n in p["spellings"] if json.dumps(spelled) == text]
            if not normal:
                return None
            value = normal[0]
        out[p["name"]] = value
    return out
