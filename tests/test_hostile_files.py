"""Issue 30, "loses or overwrites a user's files": nsysql deletes only what it wrote, writes every output whole or
not at all, writes through no link in a folder it fills, and keeps an `.nsys-rep`'s export only when it is one.

Outputs are cut short the way a full disk cuts them: RLIMIT_FSIZE in a child process (Python ignores SIGXFSZ, so
the write fails with EFBIG instead of killing it). tests/fake_nsys.py stands in for nsys."""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import ROOT, built_cache, fixture, seeded

from nsysql.cli import main

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX file limits, links and shell scripts")

TRAIN = fixture("train_small")
FAKE = Path(__file__).resolve().parent / "fake_nsys.py"


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def tree(d: Path) -> dict[str, str]:
    """Every file under `d` (hidden ones too) and its content's hash; links as `-> target`."""
    out = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_symlink():
            out[rel] = f"-> {os.readlink(p)}"
        elif p.is_file():
            out[rel] = digest(p)
    return out


def nsysql(*args, limit: int | None = None, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """`python -m nsysql ARGS` in a child process, its files capped at `limit` bytes (as a full disk would)."""

    def cap():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nsysql", *map(str, args)],
        preexec_fn=cap,
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error(stderr: str, *words: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysql: error: ") and "Traceback" not in stderr, stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def fake_nsys(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nsys"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    exe.chmod(0o755)
    return exe


# -- 1, 28: cache clear -----------------------------------------------------------------------------------------


def test_cache_clear_in_a_working_folder_removes_only_what_nsysql_wrote(tmp_path):
    """`--cache-dir .`: the user's files of the names clear used to glob for stay, byte for byte; nsysql's entry,
    its stored answers and its marker go."""
    work = tmp_path / "work"
    (work / "exports" / "a").mkdir(parents=True)
    (work / "r.results").mkdir()
    mine = {
        "foo.duckdb": b"a user's DuckDB database",
        "x.parquet": b"a user's table",
        "exports/a/b.sqlite": TRAIN.read_bytes()[:4096],
        "r.results/notes.txt": b"a user's results",
        ".n.99999999.tmp": b"a user's temporary file (no process 99999999 runs)",
    }
    for name, data in mine.items():
        (work / name).write_bytes(data)
    shutil.copy(TRAIN, work / "t.sqlite")  # an export of the user's in the folder, which clear leaves
    built_cache(work, TRAIN)  # the entry a first load leaves (what clear removes), copied from the run's
    r = CliRunner()
    assert r.invoke(main, ["--cache-dir", str(work), "kernels", str(TRAIN)]).exit_code == 0
    ours = set(tree(work)) - set(mine) - {"t.sqlite", "last_profile"}
    assert any(n.endswith(".duckdb") for n in ours) and any(".results/" in n for n in ours)

    info = r.invoke(main, ["--cache-dir", str(work), "cache", "info", "-f", "csv"])
    assert info.exit_code == 0
    listed = pl.read_csv(info.stdout.encode())["entry"].to_list()
    assert len(listed) == 1 and f"{listed[0]}.duckdb" in ours and listed[0] != "foo"

    cleared = r.invoke(main, ["--cache-dir", str(work), "cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1 cache entries" in cleared.stdout
    left = tree(work)
    assert {n: left.get(n) for n in mine} == {n: hashlib.sha256(d).hexdigest() for n, d in mine.items()}
    assert set(left) == set(mine) | {"t.sqlite", "last_profile"}  # nothing of nsysql's but its state file


def writable(d: Path) -> bool:
    try:
        (d / ".probe").write_text("")
        (d / ".probe").unlink()
        return True
    except OSError:
        return False


def test_cache_clear_removes_entries_of_an_nsysql_without_markers(tmp_path):
    """An entry nsysql 0.3 wrote has no marker: its name and its profile_facts prove it nsysql's. A DuckDB file of
    the same kind of name without those facts is the user's."""
    import duckdb

    cdir = built_cache(tmp_path / "cache", TRAIN)
    r = CliRunner()
    assert r.invoke(main, ["--cache-dir", str(cdir), "kernels", str(TRAIN)]).exit_code == 0
    (marker,) = cdir.glob("*.nsysql")
    marker.unlink()  # as 0.3 left it
    users = cdir / f"mine-{'0' * 32}.duckdb"
    con = duckdb.connect(str(users))
    con.execute("CREATE TABLE profile_facts AS SELECT 'source_path' AS key, 'x' AS value")
    con.close()
    kept = digest(users)
    # an .nsys-rep's export as 0.3 kept it (exports/<key>/<name>.sqlite, no marker), and a user's look-alike
    (cdir / "exports" / ("ab" * 16)).mkdir(parents=True)
    shutil.copy(TRAIN, cdir / "exports" / ("ab" * 16) / "run.sqlite")
    (cdir / "exports" / "mine").mkdir()
    shutil.copy(TRAIN, cdir / "exports" / "mine" / "run.sqlite")
    listed = r.invoke(main, ["--cache-dir", str(cdir), "cache", "info", "-f", "csv"])
    assert "1 entries, 1 exports kept apart by nsysql 0.4.0" in listed.stderr
    cleared = r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1 cache entries" in cleared.stdout
    assert set(tree(cdir)) == {users.name, "last_profile", "exports/mine/run.sqlite"} and digest(users) == kept


def test_cache_info_reads_a_damaged_entry_and_one_linked_from_elsewhere_as_before(tmp_path):
    """`cache info` reads the entries' facts through one DuckDB instance, which may touch the cache directory only:
    an entry it cannot read is read alone, as every entry was before. A link to an entry kept elsewhere is read
    whole; a damaged entry, read first, is a row that is not complete and keeps no later entry from being read."""
    (built,) = built_cache(tmp_path / "elsewhere", TRAIN).glob("*.duckdb")
    cdir = tmp_path / "cache"
    cdir.mkdir()
    for name in ("a-damaged", "b-linked", "c-copied"):
        shutil.copy(built.with_suffix(".nsysql"), cdir / f"{name}-{'0' * 32}.nsysql")
    (cdir / f"a-damaged-{'0' * 32}.duckdb").write_bytes(b"not a database" * 1000)
    (cdir / f"b-linked-{'0' * 32}.duckdb").symlink_to(built)
    shutil.copy(built, cdir / f"c-copied-{'0' * 32}.duckdb")
    listed = CliRunner().invoke(main, ["--cache-dir", str(cdir), "cache", "info", "-f", "csv"])
    assert listed.exit_code == 0, listed.output
    rows = {r["entry"][0]: r for r in pl.read_csv(listed.stdout.encode()).to_dicts()}
    assert (rows["a"]["complete"], rows["a"]["source_path"]) == (False, None)
    assert rows["b"]["complete"] and rows["c"]["complete"]
    assert rows["b"]["source_path"] == rows["c"]["source_path"] == str(TRAIN.resolve())


@contextlib.contextmanager
def read_only(d: Path):
    """`d` made read-only for this process: mode 0555, and as root (whom modes do not stop) immutable."""
    d.chmod(0o555)
    immutable = False
    try:
        if writable(d) and shutil.which("chattr"):
            immutable = subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode == 0
        if writable(d):
            pytest.skip("cannot make a read-only directory here")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(d)], check=True)
        d.chmod(0o755)


def test_cache_clear_on_a_read_only_cache_says_what_it_could_not_remove(tmp_path):
    cdir = built_cache(tmp_path / "cache", TRAIN)
    r = CliRunner()
    assert r.invoke(main, ["--cache-dir", str(cdir), "info", str(TRAIN)]).exit_code == 0
    (entry,) = cdir.glob("*.duckdb")
    with read_only(cdir):
        cleared = r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"])
    assert cleared.exit_code == 2, cleared.output
    one_error(cleared.stderr, "cannot remove", entry.name)
    assert entry.is_file() and "removed" not in cleared.stdout
    # writable again, the next clear removes it: its marker was kept
    assert r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"]).exit_code == 0
    assert not entry.exists() and not list(cdir.glob("*.nsysql"))


def test_cache_clear_keeps_the_marker_of_an_entry_it_could_not_remove_whole(tmp_path):
    """An entry whose answers cannot be removed (their folder read-only) keeps its marker, which could be removed:
    what is left of it is still nsysql's, and the next clear removes it."""
    cdir = built_cache(tmp_path / "cache", TRAIN)
    r = CliRunner()
    assert r.invoke(main, ["--cache-dir", str(cdir), "kernels", str(TRAIN)]).exit_code == 0
    (answers,) = cdir.glob("*.results")
    with read_only(answers):
        cleared = r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"])
    assert cleared.exit_code == 2, cleared.output
    assert list(cdir.glob("*.nsysql")) and not list(cdir.glob("*.duckdb"))
    assert r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"]).exit_code == 0
    assert not list(cdir.glob("*.nsysql")) and not answers.exists()


# -- 3: outputs written whole ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,out",
    [
        (["report", "{src}", "-o", "{out}"], "run.report.html"),
        (["trace", "{src}", "-o", "{out}"], "run.trace.json"),
        (["stats", "{src}", "-r", "kernels", "-o", "{prefix}"], "run_kernels.csv"),
    ],
    ids=["report", "trace", "stats"],
)
def test_a_failed_output_write_leaves_the_old_file_and_names_it(tmp_path, args, out):
    """A file-size limit below the output's size: the old output stays whole, no temporary file is left, and the
    error names the file. Before, the old file was truncated and the error read `error: : File too large`."""
    target = tmp_path / out
    target.write_text("the previous output, to keep\n")
    before = tree(tmp_path)
    argv = [a.format(src=TRAIN, out=target, prefix=tmp_path / "run") for a in args]
    proc = nsysql("--no-cache", *argv, limit=2000)
    assert proc.returncode == 2
    one_error(proc.stderr, f"cannot write {target}", "file too large", "left as it was")
    assert tree(tmp_path) == before
    # and with room, it is written whole (the same command, no limit; from the run's cache entry)
    seeded(TRAIN)
    assert CliRunner().invoke(main, argv).exit_code == 0
    assert target.stat().st_size > 2000


def test_output_through_a_link_or_into_a_device(tmp_path):
    """`-o` names what the user chose: a link is followed (the link stays, its file is replaced, its permissions
    kept) and a device or pipe is written in place (no temporary file beside /dev/null)."""
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old\n")
    real.chmod(0o600)
    link.symlink_to(real.name)
    seeded(TRAIN)
    r = CliRunner()  # the run's cache: what is under test is where the output goes
    assert r.invoke(main, ["kernels", str(TRAIN), "-f", "csv", "-o", str(link)]).exit_code == 0
    assert link.is_symlink() and real.read_text().startswith("name,count,total_ns")
    assert real.stat().st_mode & 0o777 == 0o600
    assert set(tree(tmp_path)) == {"real.csv", "link.csv"}
    res = r.invoke(main, ["kernels", str(TRAIN), "-o", os.devnull])
    assert res.exit_code == 0 and res.stdout == "" and Path(os.devnull).is_char_device()


# -- 4, 5: export --to ------------------------------------------------------------------------------------------


@pytest.mark.long
def test_a_failed_export_leaves_the_folder_as_it_was_and_the_next_one_succeeds(tmp_path):
    src, to, fresh = TRAIN, tmp_path / "tables", tmp_path / "fresh"
    # the in-process exports share the entry a first load builds; the capped ones load afresh
    cache = ["--cache-dir", str(built_cache(tmp_path / "c", src))]
    assert CliRunner().invoke(main, [*cache, "export", str(src), "--to", str(to), "-f", "csv"]).exit_code == 0
    before = tree(to)
    proc = nsysql("--no-cache", "export", src, "--to", to, "-f", "csv", limit=3000)
    assert proc.returncode == 2
    one_error(proc.stderr, "cannot write", str(to), "file too large", "left as it was")
    assert tree(to) == before  # every table and the README as the earlier export left them; no temporary file
    proc = nsysql("--no-cache", "export", src, "--to", fresh, limit=3000)
    assert proc.returncode == 2 and not fresh.exists()
    # the next export (room enough) accepts both folders
    for d in (to, fresh):
        assert CliRunner().invoke(main, [*cache, "export", str(src), "--to", str(d)]).exit_code == 0
        assert (d / "README.md").is_file() and (d / "gpu_ops.parquet").is_file()


def test_export_writes_through_no_link_in_an_earlier_exports_folder(tmp_path):
    src, to, elsewhere = TRAIN, tmp_path / "tables", tmp_path / "elsewhere.parquet"
    r, cache = CliRunner(), ["--cache-dir", str(built_cache(tmp_path / "c", src))]  # as a first load leaves it
    assert r.invoke(main, [*cache, "export", str(src), "--to", str(to)]).exit_code == 0
    elsewhere.write_bytes(b"a file the link points at")
    (to / "gpu_ops.parquet").unlink()
    (to / "gpu_ops.parquet").symlink_to(elsewhere)
    before = tree(to)
    res = r.invoke(main, [*cache, "export", str(src), "--to", str(to)])
    assert res.exit_code == 2
    one_error(res.stderr, f"{to / 'gpu_ops.parquet'}: is a symbolic link")
    assert elsewhere.read_bytes() == b"a file the link points at" and tree(to) == before


# -- 2: profile --out -------------------------------------------------------------------------------------------


@pytest.mark.long
def test_profile_out_replaces_only_its_own_outputs_and_no_link(tmp_path):
    fake = fake_nsys(tmp_path / "bin")
    out, ran = tmp_path / "run", tmp_path / "ran"
    program = [sys.executable, "-c", f"open({str(ran)!r}, 'a').write('x')"]
    args = ["profile", "--nsys", str(fake), "--out", str(out), "--chart", "svg", "--", *program]
    r = CliRunner()
    first = r.invoke(main, args)
    assert first.exit_code == 0, first.output
    assert (out / "summary.txt").is_file() and ran.read_text() == "x"

    # a file there that the earlier run did not leave so (the user's, or changed since): refused, before running
    elsewhere = tmp_path / "elsewhere.html"
    elsewhere.write_text("a file a link in DIR points at\n")
    (out / "report.html").unlink()
    (out / "report.html").symlink_to(elsewhere)
    before = tree(out)
    refused = r.invoke(main, args)
    assert refused.exit_code == 2
    one_error(refused.stderr, str(out / "report.html"), "symbolic link")
    assert tree(out) == before and ran.read_text() == "x"
    (out / "report.html").unlink()
    (out / "summary.txt").write_text("my notes, not nsysql's\n")
    before = tree(out)
    refused = r.invoke(main, args)
    assert refused.exit_code == 2
    one_error(refused.stderr, str(out / "summary.txt"), "no earlier `nsysql profile` wrote it")
    assert tree(out) == before and ran.read_text() == "x"  # nothing written, the program not run
    assert elsewhere.read_text() == "a file a link in DIR points at\n"

    # its own outputs, as it left them, it replaces
    (out / "summary.txt").unlink()
    again = r.invoke(main, args)
    assert again.exit_code == 0, again.output
    assert ran.read_text() == "xx" and (out / "summary.txt").is_file() and (out / "report.html").is_file()


# -- 8, 9: the export of an .nsys-rep ---------------------------------------------------------------------------


@pytest.fixture
def report(tmp_path) -> Path:
    rep = tmp_path / "in" / "run.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"PK\x03\x04 a report nsys would write")
    return rep


def test_a_truncated_export_that_nsys_calls_a_success_is_not_kept(tmp_path, report, monkeypatch):
    fake = fake_nsys(tmp_path / "bin")
    cache = tmp_path / "cache"
    monkeypatch.setenv("FAKE_NSYS_TRUNCATE", "5000")
    r = CliRunner()
    bad = r.invoke(main, ["--cache-dir", str(cache), "--nsys", str(fake), "info", str(report)])
    assert bad.exit_code == 2
    one_error(bad.stderr, str(report), "exited with status 0 but wrote no usable export", "truncated", "not kept")
    assert not [p for p in cache.rglob("*.sqlite")] and not list(cache.glob("*.nsysql"))
    # a working nsys then exports it, and cache info lists what is kept
    monkeypatch.delenv("FAKE_NSYS_TRUNCATE")
    good = r.invoke(main, ["--cache-dir", str(cache), "--nsys", str(fake), "kernels", "--csv", str(report)])
    assert good.exit_code == 0, good.output
    seeded(TRAIN)
    want = r.invoke(main, ["kernels", "--csv", str(TRAIN)])  # the export itself, from the run's cache
    assert good.stdout == want.stdout
    info = r.invoke(main, ["--cache-dir", str(cache), "cache", "info", "-f", "csv"])
    rows = pl.read_csv(info.stdout.encode())
    kept = rows.filter(pl.col("export").is_not_null())
    assert rows.height == 1 and kept["source_path"][0] == str(report.resolve())
    assert (cache / kept["export"][0]).stat().st_size == TRAIN.stat().st_size
    assert "(1 entries," in info.stderr
    # one kept broken (as an nsysql that did not check kept it) is exported again, not failed on for good
    os.truncate(cache / kept["export"][0], 5000)
    again = r.invoke(
        main, ["--no-cache", "--cache-dir", str(cache), "--nsys", str(fake), "kernels", "--csv", str(report)]
    )
    assert again.exit_code == 0 and again.stdout == want.stdout, again.output
    again = r.invoke(main, ["--cache-dir", str(cache), "--nsys", str(fake), "kernels", "--csv", str(report)])
    assert again.exit_code == 0 and again.stdout == want.stdout, again.output
    assert (cache / kept["export"][0]).stat().st_size == TRAIN.stat().st_size


def test_no_cache_exports_a_report_into_a_private_folder_removed_after(tmp_path, report):
    fake = fake_nsys(tmp_path / "bin")
    seeded(TRAIN)
    want = CliRunner().invoke(main, ["kernels", "--csv", str(TRAIN)]).stdout  # from the run's cache
    for how in (["--no-cache"], []):
        cache, tmp = tmp_path / f"cache{len(how)}", tmp_path / f"tmp{len(how)}"
        tmp.mkdir()
        env = {"TMPDIR": str(tmp), "NSYSQL_NO_CACHE": "" if how else "1", "NSYSQL_CACHE_DIR": str(cache)}
        proc = nsysql(*how, "--nsys", fake, "kernels", "--csv", report, env=env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout == want
        assert not list(cache.glob("*.export")) and not list(cache.glob("*.duckdb"))
        # the private folder is gone (DuckDB's spill directory, made private at connect, stays: nsysql.duck)
        assert [f.name for f in tmp.iterdir()] in ([], [f"nsysql-spill-{os.getuid()}"])


def test_a_report_export_kept_apart_by_0_4_0_is_never_read_and_is_cleared(tmp_path, report):
    """nsysql 0.4.0 kept a report's export apart, `exports/<key>/<name>.sqlite` with a marker naming the report,
    under the report's identity alone. That export (here another workload's) is never read: the report is exported
    into its own entry, and answers as that export does. `cache info` counts the old one, `cache clear` removes
    it with the entry."""
    from nsysql import store

    fake = fake_nsys(tmp_path / "bin")
    cache = tmp_path / "cache"
    old = cache / "exports" / hashlib.sha256(store.export_id(report).encode()).hexdigest()[:32]
    old.mkdir(parents=True)
    shutil.copy(fixture("mem_growth"), old / "run.sqlite")
    (old / "run.nsysql").write_text(store.MARK_TEXT + f"{report.resolve()}\n")
    r = CliRunner()
    got = r.invoke(main, ["--cache-dir", str(cache), "--nsys", str(fake), "kernels", "--csv", str(report)])
    assert got.exit_code == 0, got.output
    seeded(TRAIN, fixture("mem_growth"))  # the run's entries: what the report's export and the old one answer
    assert got.stdout == r.invoke(main, ["kernels", "--csv", str(TRAIN)]).stdout
    assert got.stdout != r.invoke(main, ["kernels", "--csv", str(fixture("mem_growth"))]).stdout
    info = r.invoke(main, ["--cache-dir", str(cache), "cache", "info"])
    assert "(1 entries, 1 exports kept apart by nsysql 0.4.0 (cache clear removes them)" in info.stderr
    cleared = r.invoke(main, ["--cache-dir", str(cache), "cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1 cache entries" in cleared.stdout
    assert set(tree(cache)) == {"last_profile"}


def test_an_unwritable_cache_directory_falls_back_for_a_report(tmp_path, report):
    fake = fake_nsys(tmp_path / "bin")
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    r = CliRunner().invoke(main, ["--cache-dir", str(blocker / "sub"), "--nsys", str(fake), "kernels", str(report)])
    assert r.exit_code == 0, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysql: warning: cache disabled"), r.stderr
    assert "total_us" in r.stdout  # the kernels table, in the unit it picked
