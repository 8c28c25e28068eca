"""The headers of the SQL files (nsysql.queries: `-- @include`, `@staging`, `@tables`, `@macros`, `@defines`,
`@frames`, `@param`) say exactly what each file reads and defines, the loader runs the canonical files by them,
and the shared rules of 00_macros.sql are written out nowhere else.

The check reads every file's SQL (comments dropped) and compares the names it reads with the names its header
declares: a name counts as read where it stands as a word of the code and is defined by a canonical file, is a
staging table of the loader, or is a parameter (`$name`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import built_cache

from nsysql.loader import LOADER_TABLES
from nsysql.loader.raw import RAW_TABLES, STAGE
from nsysql.queries import canonical_files, canonical_order, declarations, queries_dir

_CREATE = re.compile(
    r"create\s+(?:or\s+replace\s+)?(temp\s+|temporary\s+)?(table|view|macro|type)\s+"
    r"(?:if\s+not\s+exists\s+)?(?:[a-z_][a-z0-9_]*\.)?([a-z_][a-z0-9_]*)"
)
_WORD = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)?")


def _code(sql: str) -> str:
    """SQL without its -- comments (prose names tables the code does not read), lowercased, with its string
    literals emptied but those a call takes: a table macro reads the table its argument names
    (`memory_held('nvtx_ranges')`), any other literal is text (`'api_calls' AS canonical`, a label)."""
    code = re.sub(r"--[^\n]*", "", sql).lower()
    literal = r"'(?:[^']|'')*'"
    args = (re.findall(literal, m[1]) for m in re.finditer(r"[a-z_][a-z0-9_]*\s*\(([^()]*)\)", code))
    return " ".join([re.sub(literal, "''", code), *(a for found in args for a in found)])


def _words(code: str) -> set[str]:
    """Every identifier of the code, and every qualified one (`nsysql_stage._load_facts`) whole too."""
    return set(_WORD.findall(code)) | set(re.findall(r"[a-z_][a-z0-9_]*", code))


def _params(code: str) -> set[str]:
    """The `$name` parameters of the code, outside string literals (`'...$'` ends a regular expression)."""
    return set(re.findall(r"\$([a-z_][a-z0-9_]*)", re.sub(r"'(?:[^']|'')*'", "''", code)))


def _sql_files() -> dict[str, str]:
    """{'canonical/40_gpu_ops.sql': text, 'analyses/kernels.sql': text, ...}: every SQL file nsysql runs."""
    root = queries_dir()
    return {str(f.relative_to(root)): f.read_text(encoding="utf-8") for f in sorted(root.glob("*/*.sql"))}


def problems(files: dict[str, str]) -> list[str]:
    """What is wrong with the declarations of `files` ({relative path: text}), one line each."""
    out: list[str] = []
    staging = {rt.name for rt in RAW_TABLES} | {f"{STAGE}.{t}" for t in LOADER_TABLES}
    bare_loader = set(LOADER_TABLES)  # must be read qualified: no search path makes them visible by accident
    decl = {p: declarations(t, p) for p, t in files.items()}
    canon = {p for p in files if p.startswith("canonical/")}
    kind: dict[str, str] = {}  # defined name -> 'tables' or 'macros'
    defined_by: dict[str, str] = {}
    own: dict[str, set[str]] = {}
    for p in sorted(canon):
        own[p] = set()
        made = set()
        for temp, k, name in _CREATE.findall(_code(files[p])):
            own[p].add(name)
            if not temp:
                made.add(name)
                kind[name] = "macros" if k in ("macro", "type") else "tables"
                if name in defined_by and defined_by[name] != p:
                    out.append(f"{p}: defines {name}, which {defined_by[name]} defines too")
                defined_by.setdefault(name, p)
        if set(decl[p].defines) != made:
            out.append(f"{p}: @defines {sorted(decl[p].defines)}, but the file creates {sorted(made)}")
    for p, text in files.items():
        d, code = decl[p], _code(text)
        words = _words(code)
        for name in sorted(set(re.findall(r"(?<![.\w])[a-z_][a-z0-9_]*", code)) & bare_loader):
            out.append(f"{p}: reads {name} unqualified (read {STAGE}.{name})")
        read = (words & set(defined_by)) - own.get(p, set())
        for key in ("tables", "macros"):
            declared = set(getattr(d, key))
            for name in sorted({n for n in read if kind[n] == key} - declared):
                out.append(f"{p}: reads {name} ({defined_by[name]}) without declaring it in @{key}")
            for name in sorted(declared - read):
                what = "not defined by any canonical file" if name not in kind else "not read"
                if name in kind and kind[name] != key:
                    what = f"declared in @{key} but is one of the {kind[name]}"
                out.append(f"{p}: @{key} {name}: {what}")
        st = words & staging
        for name in sorted(st - set(d.staging)):
            out.append(f"{p}: reads staging table {name} without declaring it in @staging")
        for name in sorted(set(d.staging) - st):
            out.append(f"{p}: @staging {name}: not read (or not a staging table)")
        params = _params(code)
        for name in sorted(params - set(d.param)):
            out.append(f"{p}: uses ${name} without an @param line")
        for name in sorted(set(d.param) - params):
            out.append(f"{p}: @param ${name}: not used")
        for name, doc in d.param.items():
            if not re.match(r"[A-Z][A-Z0-9_\[\]]*: \S", doc):
                out.append(f"{p}: @param ${name} wants `TYPE: what it means`, not {doc!r}")
        for name in sorted(set(d.frames) - words):
            out.append(f"{p}: @frames {name}: not read")
        if d.frames and (d.tables or d.macros):
            # its caller's connection holds the frames and nothing of the canonical database (analyses.ranks)
            out.append(f"{p}: reads frames and canonical tables or macros, which no connection holds together")
        if p in canon:
            needed = {defined_by[n] for n in set(d.tables) | set(d.macros) if n in defined_by}
            included = {f"canonical/{n}" for n in d.include}
            for f in sorted(needed - included):
                out.append(f"{p}: reads what {f} defines without @include {Path(f).name}")
            for f in sorted(included - needed):
                out.append(f"{p}: @include {Path(f).name}, but reads nothing it defines")
        else:
            for key in ("include", "staging", "defines"):
                if getattr(d, key):
                    out.append(f"{p}: an analysis declares @{key} (only canonical files have them)")
    return out


def test_every_sql_file_declares_what_it_reads_and_defines():
    files = _sql_files()
    assert len([p for p in files if p.startswith("canonical/")]) == len(canonical_files())
    assert len(files) > 60  # the analyses are read too
    assert problems(files) == []


def test_the_check_catches_an_undeclared_read():
    """A file that reads a table its header does not declare, or declares one it does not read, fails."""
    files = _sql_files()
    p = "analyses/kernels.sql"
    sneaky = dict(files, **{p: files[p].replace("FROM gpu_ops", "FROM gpu_ops, devices", 1)})
    assert f"{p}: reads devices (canonical/20_devices.sql) without declaring it in @tables" in problems(sneaky)
    stale = dict(files, **{p: files[p].replace("-- @tables ", "-- @tables devices, ", 1)})
    assert f"{p}: @tables devices: not read" in problems(stale)
    q = "canonical/90_process_roles.sql"
    dropped = dict(files, **{q: files[q].replace("-- @include 40_gpu_ops.sql, ", "-- @include ", 1)})
    assert f"{q}: reads what canonical/40_gpu_ops.sql defines without @include 40_gpu_ops.sql" in problems(dropped)
    r = "canonical/70_profile_facts.sql"
    bare = dict(files, **{r: files[r].replace(f"{STAGE}._load_facts", "_load_facts")})
    assert f"{r}: reads _load_facts unqualified (read {STAGE}._load_facts)" in problems(bare)
    undocumented = dict(files, **{p: re.sub(r"-- @param \$top [^\n]*\n", "", files[p])})
    assert f"{p}: uses $top without an @param line" in problems(undocumented)


def test_the_loader_order_is_the_include_dag(tmp_path):
    """canonical_order runs each file after everything it includes, and refuses a cycle or a missing file."""
    order = canonical_order()
    assert list(order) and set(order) == set(canonical_files())
    seen: set[Path] = set()
    for f, includes in order.items():
        assert set(includes) <= seen, f.name
        seen.add(f)
    names = {f.name: [g.name for g in inc] for f, inc in order.items()}
    # the chains the build relies on, and the two heaviest files start as soon as the export is read
    assert {"40_gpu_ops.sql", "50_nvtx.sql"} <= set(names["60_op_ranges.sql"])
    assert {"40_gpu_ops.sql", "60_op_ranges.sql"} <= set(names["90_process_roles.sql"])
    assert names["80_gpu_busy.sql"] == ["00_macros.sql"] and "30_api_calls.sql" not in names["40_gpu_ops.sql"]

    a, b, c = tmp_path / "a.sql", tmp_path / "b.sql", tmp_path / "c.sql"
    a.write_text("-- @include c.sql\nSELECT 1;\n")
    b.write_text("-- @include a.sql\nSELECT 1;\n")
    c.write_text("-- @include b.sql\nSELECT 1;\n")
    with pytest.raises(ValueError, match=r"@include cycle: (\w\.sql -> ){3}\w\.sql"):
        canonical_order([a, b, c])
    c.write_text("-- @include gone.sql\nSELECT 1;\n")
    with pytest.raises(ValueError, match="c.sql: @include of gone.sql, which is not a canonical file"):
        canonical_order([a, b, c])
    c.write_text("SELECT 1;\n-- @include a.sql\n")
    with pytest.raises(ValueError, match=r"c.sql:2: @include below the file's header"):
        canonical_order([a, b, c])


# The shared rules and the one place each is written: (what, regular expression over code without comments).
_RULES = (
    ("the nsys-stats duration columns", r"median\s*\([^()]*\)\s+as\s+med_ns|stddev_samp\s*\(|'med_ns'"),
    ("an op's launch instant", r"coalesce\s*\(\s*(\w+\.)?api_start_ns\s*,\s*(\w+\.)?start_ns\s*\)"),
    ("a kernel's tensor-core use", r"coalesce\s*\(\s*(\w+\.)?measured\b|then\s+'name'\s+else\s+'metrics'"),
    (
        "which iteration an op was launched in",
        r"asof\s+join\s+(query_table\s*\(\s*\$?windows\s*\)|win)\s+\w+\s+on\s+\w+\.(t|launch_ns)\b",
    ),
)


@pytest.mark.parametrize("what,pattern", _RULES, ids=[w for w, _ in _RULES])
def test_shared_rules_are_written_once(what, pattern):
    """Each rule lives in one macro of 00_macros.sql; every other file calls the macro (stats_durations,
    op_launch_ns, ops_by_iteration, kernel_tensor_cores, tensor_cores_evidence). Files that read only frames (`@frames`: the cross-rank tables) run on a
    connection without the canonical macros, and are left out."""
    files = {p: t for p, t in _sql_files().items() if not declarations(t, p).frames}
    where = {p for p, text in files.items() if re.search(pattern, _code(text))}
    assert where == {"canonical/00_macros.sql"}, what


def test_an_analysis_runs_with_exactly_its_declared_parameters(tmp_path):
    """The header's @param lines are what a caller must pass: one missing or one too many is refused by name."""
    import nsysql
    from nsysql.analyses._sql import run

    small = Path(__file__).parent.parent / "fixtures/train_small/train_small.sqlite"
    con = nsysql.load(small, cache_dir=built_cache(tmp_path / "cache", small)).con  # as a first load leaves it
    assert run(con, "api", top=1).height == 1
    with pytest.raises(TypeError, match=r"analyses/api.sql takes \$top, not none"):
        run(con, "api")
    with pytest.raises(TypeError, match=r"analyses/api.sql takes \$top, not \$pid, \$top"):
        run(con, "api", top=1, pid=1)
