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

    def shown(self, analysis: str, **params):
        """Profile.shown: a stored answer that is not an empty frame is shown as it is; only an empty one may be
        refused, which the Profile says."""
        got = getattr(self, analysis)(**params)
        return self.profile.shown(analysis, **params) if getattr(got, "height", None) == 0 else got

    def __getattr__(self, name: str):
        if name.startswith("_") or "key" not in DECLARED.get(name, {}):
            return getattr(self.profile, name)

        def method(**params):
            bound = key(name, params, self.path)
            hit = None if bound is None else _answers.get(self.cache_entry, name, bound)
            return hit if hit is not None else getattr(self.profile, name)(**params)

        return method


def key(analysis: str, given: dict, path=None) -> dict | None:
    """The parameters under which the store keeps `analysis(**given)` (every one, defaults filled in and
    normalized, as Analysis.bind gives them to the answers store, and `path`, the export as the user named it,
    where the answer names it: Engine.run), or None where only the declaration can say: an unknown or missing
    parameter, or one whose normalize function meets a spelling other than its defaults'."""
    params = DECLARED.get(analysis, {}).get("key")
    if params is None or set(given) - {p["name"] for p in params}:
        return None
    out = {}
    for p in params:
        if p.get("path"):  # an answer that names the export's path: stored under the path the user gave
            out[p["name"]] = str(path)
            continue
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


def emit_answer(prof, analysis: str, params: dict, fmt: str, output: str | None, text_of=None) -> None:
    """Print `prof.<analysis>(**params)` as `emit` does, or as `text_of(answer, look)` writes it (a command's
    own composition; look: output.view's rendering switches), to stdout or `-o`. Where the answer is stored
    (a cache entry), the text is kept beside it, keyed by the command and `look`, and printed as kept the next
    time (nsysql.tuning's `printed_answers`): the same bytes, without polars or rendering."""
    from .. import tuning
    from ..render import render
    from .output import emit_text, view

    look = {"command": _command(), **view(fmt, None, output)}
    entry = getattr(prof, "cache_entry", None)
    bound = key(analysis, params, prof.path) if entry is not None and tuning.on("printed_answers") else None
    text = None if bound is None else _answers.printed(entry, analysis, bound, look)
    if text is None:
        got = prof.shown(analysis, **params)  # its refusal where it does not apply, said as one error line
        shown = {k: v for k, v in look.items() if k != "command"}
        text = text_of(got, shown) if text_of else render(got, **shown)
        if bound is not None:
            _answers.keep_printed(entry, analysis, bound, look, text)
    emit_text(text, output)


def _command() -> str | None:
    import click

    ctx = click.get_current_context(silent=True)
    return ctx.info_name if ctx else None
