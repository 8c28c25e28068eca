"""The store (nsysql/store/): one key for the cache entry, stored answers and per-rank frames; exports told
apart by what a replacement cannot keep; a cache that cannot be written, killed loads and `cache clear`
during a load never cost a wrong answer, a failed command or a stray file.

Everything runs through the CLI, in subprocesses where the environment of the process is the point (a copy of
the package, a file-size limit, a kill)."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, ROOT, built_cache, fixture, seeded

from nsysql import store
from nsysql.cli import main

MiB = 1 << 20


def nsysql(
    *args,
    cdir: Path,
    pythonpath: Path | None = None,
    limit: int | None = None,
    env: dict | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """`python -m nsysql ARGS` with the cache in `cdir`; from the package copy `pythonpath`; with writes of
    files capped at `limit` bytes (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk)."""
    e = {k: v for k, v in os.environ.items() if k != "NSYSQL_NO_CACHE"}
    # 2 threads: the entry is built in its file, whatever the machine's cores (4 or more: in memory first)
    e.update({"NSYSQL_CACHE_DIR": str(cdir), "NSYSQL_THREADS": "2", **(env or {})})
    # the tree's package, or its copy: run from cdir's folder, the process finds no nsysql of the working folder
    e["PYTHONPATH"] = str(pythonpath if pythonpath is not None else ROOT)

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "nsysql", *map(str, args)],
        check=False,
        env=e,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=cap if limit is not None else None,
        cwd=cdir.parent,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def in_process(*args, cdir: Path | None = None) -> str:
    """The stdout of `nsysql ARGS` run in this process (click's CliRunner), with the cache in `cdir` (None: the
    session's): for the commands that only make a reference answer or fill the cache for the process under test."""
    env = {"NSYSQL_NO_CACHE": None, "NSYSQL_THREADS": "2", **({"NSYSQL_CACHE_DIR": str(cdir)} if cdir else {})}
    res = CliRunner(env=env).invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.stdout


def digest(p: Path) -> tuple[str, int]:
    return hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns


def copy(tmp_path: Path, src: Path, name: str | None = None) -> Path:
    dst = tmp_path / "in" / (name or src.name)
    dst.parent.mkdir(exist_ok=True)
    shutil.copy2(src, dst)
    return dst


# --- one key: editing analysis code invalidates the entry, the stored answers and the per-rank frames ---------


def package_copy(dst: Path) -> Path:
    """nsysql's code and SQL as they are here, copied to `dst` (a checkout's layout: the package beside queries/),
    for a process to import instead of the installed one."""
    import nsysql
    from nsysql.queries import queries_dir

    # with its bytecode (conftest compiles it once; copytree keeps the mtimes a .pyc is checked against): each
    # process of the copy would otherwise compile the whole package where PYTHONDONTWRITEBYTECODE is set
    shutil.copytree(Path(nsysql.__file__).parent, dst / "nsysql")
    shutil.copytree(queries_dir().parent, dst / "queries")
    return dst


@pytest.mark.long
def test_editing_an_analysis_invalidates_every_stored_value(tmp_path):
    """The same cache directory, used first by nsysql as it is and then by a copy whose gaps.sql names every
    cause differently: the copy builds its own entry, and its gaps, summary and ranks all show the edit
    (before one store key, `nsysql ranks` served the old per-rank frames after such an edit)."""
    cdir = tmp_path / "cache"
    cdir.mkdir()
    before, after = package_copy(tmp_path / "before"), package_copy(tmp_path / "after")
    sql = after / "queries" / "v1" / "analyses" / "gaps.sql"
    text = sql.read_text()
    assert text.count("END AS cause") == 1, "the edit below no longer applies to gaps.sql: change the test"
    sql.write_text(text.replace("END AS cause", "END || '~edited' AS cause"))

    run = tmp_path / "in"
    run.mkdir()
    small = copy(tmp_path, fixture("train_small"))
    ranks = [copy(tmp_path, FIXTURES / "ddp_pair" / f"rank{i}.sqlite") for i in (0, 1)]
    inputs = {p: digest(p) for p in [small, *ranks]}

    def ask(tree):
        summary = nsysql("summary", small, "-f", "json", cdir=cdir, pythonpath=tree).stdout
        per_rank = nsysql("ranks", *ranks, "--workers", "1", "-f", "csv", cdir=cdir, pythonpath=tree).stdout
        return summary, per_rank

    old = ask(before)
    entries = set(cdir.glob("*.duckdb"))
    rank_frames = set(cdir.glob("*.parquet"))
    assert len(entries) == 3 and rank_frames and list(cdir.glob("*.results/summary-*"))

    new = ask(after)
    assert "~edited" not in old[0] and "~edited" in new[0]  # summary's idle causes, not a stored answer
    assert new[0].replace("~edited", "") == old[0]  # the edit, and nothing else, changed the answer
    assert "~edited" not in old[1] and "~edited" in new[1]  # ranks' top cause, not the stored per-rank frames
    # a new entry for each export (their old ones stay until `cache clear`), new per-rank frames
    assert len(set(cdir.glob("*.duckdb")) - entries) == 3
    assert set(cdir.glob("*.parquet")) - rank_frames
    assert {p: digest(p) for p in inputs} == inputs


# --- export identity: what a replacement cannot keep ---------------------------------------------------------


def same_head_size_and_mtime(tmp_path: Path) -> tuple[Path, Path]:
    """Two exports of the same size whose first MiB are identical: big_step, and big_step with its last kernel
    one second longer (a change past the first MiB; SQLite's change counter in the header put back)."""
    a = fixture("big_step")
    b = tmp_path / "b.sqlite"
    shutil.copyfile(a, b)
    con = sqlite3.connect(b)
    con.execute(
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1000000000 '
        "WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    con.commit()
    con.close()
    with open(a, "rb") as f:
        header = f.read(100)
    with open(b, "r+b") as f:
        f.write(header)
    ab, bb = a.read_bytes(), b.read_bytes()
    assert len(ab) == len(bb) > MiB and ab[:MiB] == bb[:MiB] and ab != bb  # the premise
    return a, b


@pytest.mark.parametrize("how", ["renamed over it", "written into it"])
def test_a_replaced_export_with_the_same_head_size_and_mtime_gets_its_own_answers(tmp_path, how):
    _, other = same_head_size_and_mtime(tmp_path)
    run = copy(tmp_path, fixture("big_step"), "run.sqlite")
    cdir = tmp_path / "cache"
    r = CliRunner()

    def total(*opts):
        out = r.invoke(main, ["--cache-dir", str(cdir), *opts, "kernels", str(run), "-f", "csv"])
        assert out.exit_code == 0, out.output
        return pl.read_csv(out.stdout.encode())["total_ns"].sum()

    first = total()
    assert total() == first  # warm
    mtime = run.stat().st_mtime_ns
    if how == "renamed over it":  # a new inode
        staged = tmp_path / "in" / ".run.sqlite.new"
        shutil.copyfile(other, staged)
        os.replace(staged, run)
    else:  # the same inode, a new ctime
        with open(run, "r+b") as f:
            f.write(other.read_bytes())
    os.utime(run, ns=(mtime, mtime))
    assert run.stat().st_mtime_ns == mtime and run.stat().st_size == fixture("big_step").stat().st_size
    assert total() == first + 1_000_000_000  # the longer kernel, by construction
    assert total("--no-cache") == first + 1_000_000_000
    assert digest(run) == (hashlib.sha256(other.read_bytes()).hexdigest(), mtime)


# --- a cache that cannot be written, at any step --------------------------------------------------------------


def one_warning(proc: subprocess.CompletedProcess, cdir: Path) -> None:
    lines = [
        line for line in proc.stderr.splitlines() if not line.startswith(("nsysql: 2 ranks", "nsysql: straggler rule"))
    ]
    assert len(lines) == 1 and lines[0].startswith("nsysql: warning: cache disabled ("), proc.stderr
    assert str(cdir) in lines[0] and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def summary_answer():
    """`nsysql summary` on big_step with a cache that works (what every degraded run must print too)."""
    return in_process("summary", fixture("big_step"))  # the session's cache


@pytest.mark.parametrize(
    "limit,background",
    [
        (4, False),  # nothing can be written: creating the entry fails
        (200_000, False),  # the tables are being written into the entry (a commit, the WAL)
        (1_000_000, True),  # in memory first, the background copy fails (4 threads: _load picks it)
    ],
    ids=["create", "tables", "background-copy"],
)
def test_a_full_cache_disk_answers_from_memory_with_one_warning(tmp_path, summary_answer, limit, background):
    """Files capped at `limit` bytes (RLIMIT_FSIZE; as root too): every write past it fails, as on a full disk.
    Before, a failed commit or checkpoint ended every command with a DuckDB error."""
    src, cdir = copy(tmp_path, fixture("big_step")), tmp_path / "cache"
    before = digest(src)
    proc = nsysql("summary", src, cdir=cdir, limit=limit, env={"NSYSQL_THREADS": "4"} if background else {})
    assert proc.stdout == summary_answer.replace(str(fixture("big_step")), str(src))
    one_warning(proc, cdir)
    assert not list(cdir.glob("*.duckdb")) and not list(cdir.glob(".*.tmp*"))  # no entry, no debris
    assert digest(src) == before


def test_storing_answers_on_a_full_disk_warns_once(tmp_path, summary_answer):
    """The entry is in place (an earlier command); the answers of this one cannot be stored."""
    src, cdir = copy(tmp_path, fixture("big_step")), tmp_path / "cache"
    before = digest(src)
    in_process("info", src, cdir=cdir)
    proc = nsysql("summary", src, cdir=cdir, limit=4)
    assert proc.stdout == summary_answer.replace(str(fixture("big_step")), str(src))
    one_warning(proc, cdir)
    assert digest(src) == before


def test_an_answer_cut_short_is_not_stored_and_the_warning_names_why(tmp_path):
    """The file-size limit cuts each answer's Parquet short (iterations': its footer, which polars reports as
    "Invalid thrift: transport error", the reason the warning gave before): nothing lands under a final name, the
    one warning names the OS's reason, and a later run without the limit stores the same answer."""
    train = fixture("train_small")
    cdir = built_cache(tmp_path / "cache", train)
    seeded(train)
    want = in_process("iterations", train, "-f", "csv")  # the session's cache
    proc = nsysql("iterations", train, "-f", "csv", cdir=cdir, limit=2048)
    assert proc.stdout == want
    one_warning(proc, cdir)
    assert "(file too large in " in proc.stderr, proc.stderr
    results = next(cdir.glob("*.results"))
    assert not list(results.rglob("*.parquet")) and not list(results.rglob("index.json"))
    assert not store.temps(cdir)
    again = nsysql("iterations", train, "-f", "csv", cdir=cdir)
    assert again.stdout == want and again.stderr == ""
    assert list(results.rglob("index.json"))


@pytest.mark.long
def test_ranks_on_a_full_disk_warns_once(tmp_path):
    """`nsysql ranks` with the entries stored (an earlier run) but not the per-rank frames, which cannot be
    written now (one process: a process pool needs files of its own)."""
    cdir = tmp_path / "cache"
    ranks = [copy(tmp_path, FIXTURES / "ddp_pair" / f"rank{i}.sqlite") for i in (0, 1)]
    before = [digest(r) for r in ranks]
    want = in_process("ranks", *ranks, "--workers", "1", "-f", "csv", cdir=cdir)
    for frame in cdir.glob("*.parquet"):
        frame.unlink()
    proc = nsysql("ranks", *ranks, "--workers", "1", "-f", "csv", cdir=cdir, limit=4)
    assert proc.stdout == want
    one_warning(proc, cdir)
    assert not list(cdir.glob("*.parquet")) and not list(cdir.glob(".*.tmp*"))
    assert [digest(r) for r in ranks] == before


# --- killed loads and `cache clear` during a load --------------------------------------------------------------


@pytest.fixture(scope="module")
def larger_export(tmp_path_factory) -> tuple[Path, tuple[str, int]]:
    out = tmp_path_factory.mktemp("larger") / "larger.sqlite"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gen_scaled.py"),
            str(fixture("train_small")),
            str(out),
            "--kernels",
            "100000",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out, digest(out)


@pytest.fixture
def larger(larger_export):
    """train_small scaled to 100k kernels (benchmarks/gen_scaled.py): a cold load long enough to act during;
    unchanged by the test (asserted after it)."""
    path, before = larger_export
    yield path
    assert digest(path) == before


def start_load(src: Path, cdir: Path) -> subprocess.Popen:
    """A cold `nsysql summary` of `src`, returned while its entry is being built (its temporary file and the
    file's `.wal` exist)."""
    env = {k: v for k, v in os.environ.items() if k != "NSYSQL_NO_CACHE"}
    env.update(NSYSQL_CACHE_DIR=str(cdir), NSYSQL_THREADS="2")  # built in its file (see nsysql())
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsysql", "summary", str(src)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(cdir.glob(".*.tmp.wal")):
        assert proc.poll() is None, "the load ended before its entry was being written: " + proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.002)
    return proc


def files(cdir: Path) -> set[str]:
    return {str(p.relative_to(cdir)) for p in cdir.rglob("*") if p.is_file()}


@pytest.mark.long
def test_a_killed_load_leaves_files_that_cache_info_counts_and_cache_clear_removes(tmp_path, larger):
    cdir = tmp_path / "cache"
    proc = start_load(larger, cdir)
    proc.kill()
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    marked = files(cdir)
    left = {f for f in marked if not f.endswith(".nsysql")}  # the marker says they are nsysql's (not a row)
    assert len(marked - left) == 1
    assert any(f.endswith(".tmp") for f in left) and any(f.endswith(".tmp.wal") for f in left)

    r = CliRunner()
    info = r.invoke(main, ["--cache-dir", str(cdir), "cache", "info", "-f", "csv"])
    assert info.exit_code == 0, info.output
    listed = pl.read_csv(info.stdout.encode())
    assert set(listed["entry"]) == left  # every file, temporary ones too
    assert listed["bytes"].sum() == sum((cdir / f).stat().st_size for f in left)
    assert f"{len(left)} temporary files ({len(left)} left by killed loads)" in info.stderr

    cleared = r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"])
    assert cleared.exit_code == 0 and files(cdir) == set()


@pytest.mark.long
def test_cache_clear_during_a_load_is_silent_and_the_entry_lands(tmp_path, larger):
    """Before, `cache clear` deleted the running load's temporary entry, and that load warned "cache disabled
    (no such file or directory)". A running load's files are kept; its entry is renamed in when done."""
    cdir = tmp_path / "cache"
    proc = start_load(larger, cdir)
    cleared = CliRunner().invoke(main, ["--cache-dir", str(cdir), "cache", "clear"])
    assert cleared.exit_code == 0
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and err == "" and "GPU" in out
    assert len(list(cdir.glob("*.duckdb"))) == 1 and not list(cdir.glob(".*.tmp*"))


@pytest.mark.long
def test_ctrl_c_during_a_load_leaves_at_once_and_leaves_nothing(tmp_path, larger):
    """SIGINT while the entry is being written ends the command there (`nsysql: interrupted`, exit 130), with no
    temporary file and no marker left without its entry: before, it took effect once the load was done."""
    cdir = tmp_path / "cache"
    proc = start_load(larger, cdir)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and err.strip() == "nsysql: interrupted" and out == ""
    left = files(cdir)
    # no temporary file, and no marker without its entry; where the signal came as the build was renaming its
    # entry in, that whole entry may stay (with its marker): a later command reads it
    if left:
        (entry,) = [f for f in left if f.endswith(".duckdb")]
        assert left == {entry, entry.removesuffix(".duckdb") + ".nsysql"}, left
        assert CliRunner().invoke(main, ["--cache-dir", str(cdir), "cache", "info", "-f", "csv"]).exit_code == 0


def test_a_stored_answer_of_the_wrong_shape_is_recomputed(tmp_path):
    """An index.json that is valid JSON of another shape (a list, sections that are not a list) is a damaged
    answer like any other: recomputed and stored again, not an error on every later run."""
    src, cdir = copy(tmp_path, fixture("train_small")), tmp_path / "cache"
    r = CliRunner()
    args = ["--cache-dir", str(cdir), "kernels", str(src), "-f", "csv"]
    want = r.invoke(main, args).stdout
    (index,) = cdir.glob("*.results/kernels_shown-*/index.json")  # the answer `kernels` prints
    for bad in ("[1, 2]", '{"sections": 3}', '{"sections": [7], "single": true}', "null"):
        index.write_text(bad)
        got = r.invoke(main, args)
        assert got.exit_code == 0 and got.stdout == want, (bad, got.output)
        assert index.read_text() != bad  # stored again
