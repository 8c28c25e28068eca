"""The layout of nsysql/ as README's diagram draws it, read from the source: no import circle, no module
importing a layer above its own, the CLI reaching the analyses only through the Profile and wording no sentence
from an answer's data, no function over MAX_FUNCTION_LINES lines, and no comment carrying a dated figure.

Every import counts, at module level or inside a function (a deferred import is still a dependency), except
those under `if TYPE_CHECKING:` (annotations only). What cannot be fixed yet is listed below, each entry with
its reason; an entry that no longer applies fails the test too, so the lists only shrink.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nsysql"

# README's diagram, bottom to top: a module may import its own layer and the ones below it.
LAYERS = ("base", "loader", "store/engine", "analyses", "front ends")
# Module -> layer, by name: the longest matching prefix decides (a module matching none fails the test: place it).
PLACES = {
    "nsysql.__version__": "base",  # the version constant, defined in the package root with no import
    "nsysql.errors": "base",
    "nsysql.filekind": "base",
    "nsysql.queries": "base",
    "nsysql.rules": "base",
    "nsysql.duck": "base",
    "nsysql.tuning": "base",
    "nsysql.loader": "loader",
    "nsysql.store": "store/engine",
    "nsysql.cache": "store/engine",
    "nsysql.memo": "store/engine",
    "nsysql.sandbox": "store/engine",
    "nsysql.engine": "store/engine",
    # writes the canonical tables as Parquet/CSV files through the store's writer (the `export` analysis)
    "nsysql.export": "store/engine",
    "nsysql.analyses": "analyses",
    "nsysql": "front ends",  # the package root: nsysql.load, nsysql.Profile (the Python API)
    "nsysql.__main__": "front ends",
    "nsysql.profile": "front ends",
    "nsysql.many": "front ends",
    "nsysql.cli": "front ends",
    "nsysql.render": "front ends",
    "nsysql.report": "front ends",
    "nsysql.perfetto": "front ends",
    "nsysql.stats": "front ends",
    "nsysql.discover": "front ends",
    "nsysql._load": "front ends",  # nsysql.load(): the report's export, the store's tables, the Profile over them
    # the nsys program integration: finding nsys, `nsysql profile`, the `.nsys-rep` export into the store
    "nsysql.nsys": "front ends",
    "nsysql._process": "front ends",
}

# (importer, imported): imports that break the rules today, each with why it is not fixed here.
ALLOWED_UPWARD: dict = {}
ALLOWED_CIRCLES: dict = {}
# What the CLI may import: the front ends, the base and the store (`cache info|clear` is the store's API) -
# never the analyses or the loader, which it reaches through the Profile.
CLI_BYPASS = ("analyses", "loader")
ALLOWED_CLI_BYPASS = {}

MAX_FUNCTION_LINES = 80
# "module:function" -> why it is longer than MAX_FUNCTION_LINES (none today: keep it so).
ALLOWED_LONG = {}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _import_nodes(tree: ast.Module):
    """Every import statement of a module outside the body of an `if TYPE_CHECKING:` (its `else` counts): imports
    are statements, so only statement lists are walked, never expressions."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and any(
            getattr(n, "id", getattr(n, "attr", None)) == "TYPE_CHECKING" for n in ast.walk(node.test)
        ):
            stack.extend(node.orelse)
            continue
        for field in ("body", "orelse", "handlers", "finalbody", "cases"):
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(value)


def imports_of(module: str) -> set[str]:
    """The nsysql modules `module` imports, anywhere in its source (`from . import x` of a module is x)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    got: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            got.update(a.name for a in node.names if a.name.split(".")[0] == "nsysql")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "nsysql":
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in MODULES or full == "nsysql.__version__":
                    got.add(full)
                else:
                    got.add(target)
    got.discard(module)
    return got


GRAPH = {m: imports_of(m) for m in MODULES}


def layer_of(module: str) -> str:
    best = max((p for p in PLACES if module == p or module.startswith(p + ".")), key=len, default=None)
    assert best is not None, f"{module} has no layer: add it to PLACES in {Path(__file__).name}"
    return PLACES[best]


def _rank(module: str) -> int:
    return LAYERS.index(layer_of(module))


def test_every_module_has_a_layer():
    for m in MODULES:
        layer_of(m)


def test_no_module_imports_a_layer_above_its_own():
    upward = {
        (m, d): f"{m} ({layer_of(m)}) imports {d} ({layer_of(d)})"
        for m, deps in GRAPH.items()
        for d in deps
        if _rank(d) > _rank(m)
    }
    assert sorted(set(upward) - set(ALLOWED_UPWARD)) == [], [
        upward[k] for k in sorted(set(upward) - set(ALLOWED_UPWARD))
    ]
    assert sorted(set(ALLOWED_UPWARD) - set(upward)) == [], "fixed: remove these from ALLOWED_UPWARD"


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    found = set(_circles(GRAPH))
    assert sorted(map(sorted, found - set(ALLOWED_CIRCLES))) == []
    assert sorted(map(sorted, set(ALLOWED_CIRCLES) - found)) == [], "fixed: remove these from ALLOWED_CIRCLES"


def test_the_circle_check_finds_a_circle():
    """The check itself, on a graph with a known circle of three and a self-contained pair."""
    assert set(_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})) == {frozenset("abc")}
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_cli_reaches_analyses_and_loader_only_through_the_profile():
    bypass = {
        (m, d)
        for m, deps in GRAPH.items()
        if layer_of(m) == "front ends" and (m == "nsysql.cli" or m.startswith("nsysql.cli."))
        for d in deps
        if layer_of(d) in CLI_BYPASS
    }
    assert sorted(bypass - set(ALLOWED_CLI_BYPASS)) == []
    assert sorted(set(ALLOWED_CLI_BYPASS) - bypass) == [], "fixed: remove these from ALLOWED_CLI_BYPASS"


def test_the_report_draws_what_the_profile_answers():
    """The report (HTML and Markdown) composes nothing: its data is one declared answer (Profile.report,
    .snippet, .report_diff), so it imports neither the analyses nor the loader."""
    bypass = sorted(
        (m, d)
        for m, deps in GRAPH.items()
        if m == "nsysql.report" or m.startswith("nsysql.report.")
        for d in deps
        if layer_of(d) in CLI_BYPASS
    )
    assert bypass == []


def test_the_cli_module_stays_small():
    """The module that defines the click group holds the group and the executable; commands live beside it."""
    lines = (PACKAGE / "cli" / "__init__.py").read_text(encoding="utf-8").count("\n")
    assert lines < 350, lines


# What an f-string of nsysql/cli may not format: what it reads out of an answer, a frame's size or a count
# (`.height`, `len(...)`) or a field by its name (`row['rule']`), other than the answer's own words (ANSWER_WORDS):
# a sentence built from data belongs to the answer, where the Python API gives it too.
ANSWER_WORDS = ("said", "note")
SIZES = ("height", "width", "shape", "row", "item")
# "module:function" -> why its sentence is built there (fixed ones fail the test: the list only shrinks).
ALLOWED_CLI_SENTENCES = {
    "nsysql.cli.files:report": "the receipt of what this command wrote: the page's size and its charts, counted "
    "as written (the report's answer is its page, not a sentence about a file)",
    "nsysql.cli.files:export": "the receipt of what this command wrote: how many tables Profile.export wrote",
}


def _reads_an_answer(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in SIZES:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len":
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            if n.slice.value not in ANSWER_WORDS:
                return True
    return False


def cli_sentences_from_data(sources: dict[str, str]) -> set[str]:
    """ "module:function" for each function of `sources` (module -> its text) with an f-string that formats what
    it reads out of an answer (see ANSWER_WORDS); a method or nested function counts as its outermost one."""
    found = set()
    for m, text in sources.items():
        for top in ast.parse(text).body:
            defs = [top] if isinstance(top, ast.FunctionDef) else top.body if isinstance(top, ast.ClassDef) else []
            for fn in (d for d in defs if isinstance(d, ast.FunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.JoinedStr) and any(
                        isinstance(v, ast.FormattedValue) and _reads_an_answer(v.value) for v in node.values
                    ):
                        found.add(f"{m}:{fn.name}")
    return found


def test_the_cli_words_no_sentence_from_an_answer():
    cli = {
        m: p.read_text(encoding="utf-8") for m, p in MODULES.items() if m == "nsysql.cli" or m.startswith("nsysql.cli.")
    }
    found = cli_sentences_from_data(cli)
    assert sorted(found - set(ALLOWED_CLI_SENTENCES)) == []
    assert sorted(set(ALLOWED_CLI_SENTENCES) - found) == [], "fixed: remove these from ALLOWED_CLI_SENTENCES"


def test_the_sentence_check_finds_one():
    """The check itself: a finding's field, a frame's size and a count are found; the answer's `said`, a flag
    by its position and text given whole are not."""
    found = cli_sentences_from_data(
        {
            "a": "def f(row):\n    return f\"rule: {row['rule']}\"",
            "b": "class C:\n    def g(self, df):\n        return f'{df.height} rows'",
            "c": "def h(xs):\n    return f'{len(xs)} files'",
            "d": "def k(got, flags, why):\n    return f\"{got['said']} {flags[0]} {why}\"",
        }
    )
    assert found == {"a:f", "b:g", "c:h"}


def long_functions() -> dict[str, int]:
    """ "module:function" -> lines, for every function (methods and nested ones too) over MAX_FUNCTION_LINES,
    counted from its `def` to its last line."""
    out = {}
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out[f"{m}:{node.name}"] = n
    return out


def test_no_function_over_80_lines():
    found = long_functions()
    assert {k: v for k, v in found.items() if k not in ALLOWED_LONG} == {}
    assert sorted(set(ALLOWED_LONG) - set(found)) == [], "fixed: remove these from ALLOWED_LONG"


# A comment that carries a figure measured at some time (it goes stale; BENCHMARKS.md keeps such figures, with the
# command that measured them): a date, "measured" with a number, a time or size something took or costs, a
# before -> after pair, a range of seconds.
_UNIT = r"\d(?:\.\d+)?\s?(?:s|ms|µs|us|MB|GB|MiB|GiB)\b"
DATED = re.compile(
    r"\b20\d\d-\d\d-\d\d\b"
    r"|\bmeasured\b[^.]*\d"
    rf"|\b(?:took|costs?)\b[^.]*{_UNIT}"
    rf"|~\s*{_UNIT}"
    rf"|{_UNIT}\s*->\s*{_UNIT}"
    r"|\d(?:\.\d+)?[-–]\d(?:\.\d+)?\s?(?:s|ms)\b"
    r"|\bin \d+(?:\.\d+)? ?s\b",
    re.IGNORECASE,
)


def _comments(path: Path) -> list[tuple[int, str]]:
    """Every comment and docstring of a module, with its line."""
    import io
    import tokenize

    text = path.read_text(encoding="utf-8")
    out = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                line = node.body[0].lineno
                out += [(line + i, s) for i, s in enumerate(doc.splitlines())]
    return out


def test_the_dated_figure_check_finds_one():
    assert DATED.search("first command 2.6 s -> 1.8 s") and DATED.search("importing it costs ~60 ms")
    assert DATED.search("Python imports DuckDB (0.1-0.2 s)") and DATED.search("on 2026-11-24")
    assert not DATED.search("gaps >= 1 ms") and not DATED.search("'500us', '2ms' or a number of ns -> ns")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_comment_carries_a_dated_figure(module):
    found = [f"{MODULES[module].name}:{n}: {c.strip()}" for n, c in _comments(MODULES[module]) if DATED.search(c)]
    assert found == []


def _nsysql_flags() -> set[str]:
    """Every long flag of every nsysql command (`--range`, `--window`, ...)."""
    import click

    from nsysql.cli import main

    flags: set[str] = set()

    def walk(cmd: click.Command) -> None:
        flags.update(o for p in cmd.params for o in p.opts if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(main)
    return flags - {"--help", "--version"}


# (module, flag) -> why a library error below the CLI still names that flag.
ALLOWED_FLAG_IN_ERROR = {
    ("nsysql.analyses.iterations", "--range"): "`no repeating loop found ...; name the loop with --range PATTERN` "
    "(iterations.NAME_THE_LOOP) is the refusal of every command that finds the loop, each of which takes "
    "--range (`range=` in Python)",
    ("nsysql.nsys", "--nsys"): "where nsys was looked for names --nsys among $NSYS and PATH",
    ("nsysql.nsys", "--out"): "nsys.check_options refuses nsys options that `nsysql profile --out` sets; h32store's",
    (
        "nsysql.nsys.workflow",
        "--out",
    ): "`nsysql profile` is the CLI's own workflow; its Python entry names --out as the command does",
    ("nsysql.export", "--to"): "export refuses a folder with others' files, naming `--to DIR` as the command does",
}


def _flags_in_errors(module: str, flags: set[str]) -> set[str]:
    """The nsysql flags written in the text of `raise NsysqlError(...)` in `module`, its module-level string
    constants (`NAME_THE_LOOP = "..."`) read where the text names them."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    consts = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "NsysqlError":
                text = " ".join(
                    c.value if isinstance(c, ast.Constant) else consts[c.id]
                    for a in call.args
                    for c in ast.walk(a)
                    if (isinstance(c, ast.Constant) and isinstance(c.value, str))
                    or (isinstance(c, ast.Name) and c.id in consts)
                )
                found |= {f for f in re.findall(r"--[a-z][a-z-]*", text) if f in flags}
    return found


def test_library_errors_name_no_cli_flag():
    """NsysqlError raised below the CLI says what is wrong with the argument by its Python name (`window`), with
    option= naming it; the CLI writes its flag there (cli.common.with_flags)."""
    flags = _nsysql_flags()
    found = {
        (m, f)
        for m in MODULES
        if not (m == "nsysql.cli" or m.startswith("nsysql.cli."))
        for f in _flags_in_errors(m, flags)
    }
    assert sorted(found - set(ALLOWED_FLAG_IN_ERROR)) == []
    assert sorted(set(ALLOWED_FLAG_IN_ERROR) - found) == [], "fixed: remove these from ALLOWED_FLAG_IN_ERROR"


def test_the_library_names_the_argument_and_the_cli_its_flag(tmp_path, monkeypatch):
    """One error, both ways: `Profile.trace(window=...)` names the argument `window`, no flag; `nsysql trace
    --window` names its flag in that place, and an error about two arguments names both flags."""
    from click.testing import CliRunner

    import nsysql
    from nsysql.cli import main

    small = str(PACKAGE.parent / "fixtures" / "train_small" / "train_small.sqlite")
    monkeypatch.setenv("NSYSQL_CACHE_DIR", str(tmp_path))
    with nsysql.load(small) as p:
        with pytest.raises(nsysql.NsysqlError) as e:
            p.trace(window="2s")
        assert str(e.value).startswith("`window` is START:END") and "--" not in str(e.value)
        with pytest.raises(nsysql.NsysqlError) as e:
            p.trace(window="1s:2s", iterations="1:2")
        assert str(e.value) == "give `window` or `iterations`, not both"
    r = CliRunner().invoke(main, ["trace", small, "--window", "2s", "-o", str(tmp_path / "t.json")])
    assert r.exit_code == 2 and f"{small}: --window is START:END" in r.stderr
    r = CliRunner().invoke(main, ["trace", small, "--window", "1s:2s", "--iterations", "1:2"])
    assert r.exit_code == 2 and r.stderr.endswith("give --window or --iterations, not both\n")


def _asked(analyses) -> set[str]:
    """The analyses `analyses` ask, themselves included, through their declarations' `needs`."""
    from nsysql.analyses.catalog import REGISTRY

    seen, todo = set(), list(analyses)
    while todo:
        a = todo.pop()
        if a not in seen:
            seen.add(a)
            todo.extend(REGISTRY[a].needs if a in REGISTRY else ())  # an entry point (load_many) asks none
    return seen


# commands that ask the loop yet take no --range, each with its reason
NO_LOOP_OPTION = {
    "info": "its iterations row says the `iterations` command's refusal, which names --range of that command",
}


def test_every_command_that_finds_the_loop_takes_range():
    """Where no loop is found, the refusal says `name the loop with --range PATTERN` (iterations.NAME_THE_LOOP):
    so every command whose declared analyses ask `iteration_range` (through `needs`) takes --range, and `stats`
    too where one of its reports asks it."""
    import click

    from nsysql.cli import main
    from nsysql.cli import stats as _stats
    from nsysql.cli.declared import analysis_of

    def commands(group, prefix=()):
        for name, cmd in group.commands.items():
            if isinstance(cmd, click.Group):
                yield from commands(cmd, (*prefix, name))
            else:
                yield " ".join((*prefix, name)), cmd

    missing, checked = [], set()
    for name, cmd in commands(main):
        declared = {*getattr(cmd.callback, "__nsysql_declared__", ()), analysis_of(cmd)} - {None}
        if cmd is _stats.stats:
            declared |= {a for a, _ in _stats.reports().values()}
        if "iteration_range" not in _asked(declared):
            continue
        checked.add(name)
        if name not in NO_LOOP_OPTION and "--range" not in {o for p in cmd.params for o in p.opts}:
            missing.append(name)
    assert missing == []
    assert set(NO_LOOP_OPTION) <= checked, "no longer asks the loop: remove from NO_LOOP_OPTION"
    assert {"iterations", "summary", "kernels", "trace", "diff", "cpu", "stats"} <= checked
