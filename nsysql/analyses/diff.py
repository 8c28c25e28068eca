"""Compare two profiles of the same program (BASE, then NEW): iteration time, GPU busy, idle causes, ranges,
kernels, and a verdict that respects noise.

What is compared: the steady-state iterations of each profile (warm-up left out, outliers kept: a stall that
hits every 10th step is part of what the loop costs). Every quantity is taken *per iteration*: for each
steady-state iteration, its wall time, the idle time of each gap cause in it (gaps >= 1 ms), the time other
threads and processes worked during those gaps per activity (`idle activity elsewhere`: NVTX range, OS or CUDA
call, waiting left out; rules in queries/v1/analyses/gap_activity.sql), the CPU time of
each NVTX range family that starts in it, and the GPU time of each kernel (or memcpy/memset) name launched in
it; then the mean over the iterations, with iterations lacking a name counting as 0. Names are matched
exactly (a numbered range family `Batch0..Batch59` is one name, `Batch`); rows present in one profile only are
`new` or `vanished`. Rows are ordered by the absolute change per iteration.

The noise rule (a change "counts", `significant`, only when it exceeds the spread seen within each run):

    |mean_new - mean_base| > 2 * sqrt(se_base^2 + se_new^2),   se = sd / sqrt(n)

where sd is the sample standard deviation of the per-iteration values over the n steady-state iterations of
that run (the standard error of the mean; 2 x the combined standard error is about a 95% two-sided test under
normal noise). For the median: se_median = 1.2533 x 1.4826 x MAD / sqrt(n), MAD = median absolute deviation
(1.4826 x MAD estimates sd robustly; sqrt(pi/2) = 1.2533 is the median's efficiency under normal noise). The
verdict on iteration time is the one on the mean, which is what throughput depends on; the median (the
typical step) is reported beside it with its own flag. With few iterations a rare stall makes the standard
deviation, and so the threshold, large: the verdict then says the change is within noise even when the mean
moved a lot; more iterations decide it.

Without iterations in either profile (no NVTX loop), totals over the whole profile are compared instead and no
change is marked significant (there is no spread to judge it by).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import polars as pl

from ..errors import NsysqlError
from ..rules import MAD_SIGMA
from ._names import quoted
from ._sql import run
from .summary import device_busy

Z = 2.0
# below this share of either side's kernel time in kernels both run, the verdict warns that the profiles may be of
# different programs
SAME_PROGRAM_SHARE = 0.5
# below this share of the kernel names of the profile that runs fewer names, run by both, the kernels' names are a
# sign of different programs of their own: a program that changes its precision or library renames its heavy
# kernels (the time share above), not most of the light ones (fills, copies, its optimizer's)
SAME_NAMES_SHARE = 0.25
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)


@dataclass(frozen=True)
class Side:
    """What the diff reads of one profile, gathered by the caller (Profile.diff, from its stored answers).

    `why_no_iterations` is None when the profile has steady-state iterations; then `steady` (those iterations),
    `stats` (iteration_stats), and the per-iteration `kernels`, `ranges` (iteration_breakdown) and `gaps` of the
    steady-state iterations are set. `totals`: whole-profile kernel and range totals (`totals()`), needed only
    when either profile lacks iterations (`needs_totals`)."""

    gpus: pl.DataFrame
    why_no_iterations: str | None = None
    steady: pl.DataFrame | None = None
    stats: pl.DataFrame | None = None
    kernels: pl.DataFrame | None = None
    ranges: pl.DataFrame | None = None
    gaps: pl.DataFrame | None = None
    totals: tuple[pl.DataFrame, pl.DataFrame] | None = None
    activity: pl.DataFrame | None = None

    @property
    def family(self) -> str:
        return self.stats["range"][0]


def side(
    gpus: pl.DataFrame,
    its: pl.DataFrame,
    stats: pl.DataFrame,
    kernels: pl.DataFrame,
    ranges: pl.DataFrame,
    gaps: pl.DataFrame | None,
    activity: pl.DataFrame | None = None,
) -> Side:
    """One profile's Side from its iterations (all of them, flagged), their stats, the per-iteration kernels and
    ranges (iteration_breakdown), its gaps indexed by those iterations (None without GPUs) and what the other
    threads and processes did during them (Profile.gap_activity, one row per gap and activity)."""
    steady = its.filter(~pl.col("warmup"))
    if steady.height == 0:
        return Side(gpus, f"all {its.height} iterations of {stats['range_said'][0]} are warm-up")
    idx = steady["iteration"].implode()
    return Side(
        gpus,
        None,
        steady,
        stats,
        kernels.filter(pl.col("iteration").is_in(idx)),
        ranges.filter(pl.col("iteration").is_in(idx)),
        gaps.filter(pl.col("iteration").is_in(idx)) if gaps is not None and gaps.height else None,
        activity=_work(activity.filter(pl.col("iteration").is_in(idx))) if activity is not None else None,
    )


def _work(activity: pl.DataFrame) -> pl.DataFrame:
    """The work (not waiting) done elsewhere during gaps, keyed by an activity label that holds across profiles
    (pids differ from run to run; gaps.activity_label)."""
    from .gaps import activity_label

    return activity.filter(~pl.col("waiting")).select(
        "iteration",
        "overlap_ns",
        activity=activity_label(pl.col("kind"), pl.col("domain"), pl.col("activity"), pl.col("other_process")),
    )


def needs_totals(b: Side, n: Side) -> bool:
    """Whether the two profiles are compared by whole-profile totals (one of them has no steady state)."""
    return b.why_no_iterations is not None or n.why_no_iterations is not None


def family_totals(con) -> pl.DataFrame:
    """Time in NVTX ranges per numbered family (range_family_totals.sql: `Batch0`, `Batch1` ... are `Batch`)."""
    return run(con, "range_family_totals")


def totals(kernels: pl.DataFrame, families: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Whole-profile kernel and range totals (all kernels; family_totals), for profiles compared without
    iterations."""
    k = kernels.select("name", pl.col("total_ns").cast(pl.Float64).alias("mean"), pl.lit(0.0).alias("se"))
    r = families.select("name", pl.col("total_ns").cast(pl.Float64).alias("mean"), pl.lit(0.0).alias("se"))
    return k, r


def _per_iteration(df: pl.DataFrame | None, key: str, value: str, n: int) -> pl.DataFrame:
    """Per `key`: mean per iteration over n iterations (missing iterations count 0) and its standard error."""
    if df is None or df.height == 0:
        return pl.DataFrame(schema={key: pl.String, "mean": pl.Float64, "se": pl.Float64})
    per = df.group_by(key, "iteration").agg(pl.col(value).sum().cast(pl.Float64).alias("v"))
    agg = per.group_by(key).agg(pl.col("v").sum().alias("s"), (pl.col("v") ** 2).sum().alias("s2"))
    mean = pl.col("s") / n
    var = ((pl.col("s2") - n * mean**2) / (n - 1)).clip(lower_bound=0) if n > 1 else pl.lit(0.0)
    return agg.select(pl.col(key), mean.alias("mean"), (var.sqrt() / math.sqrt(n)).alias("se"))


def _compare(base: pl.DataFrame, new: pl.DataFrame, key: str, judged: bool = True) -> pl.DataFrame:
    j = base.join(new, on=key, how="full", coalesce=True, suffix="_new")
    j = j.with_columns(
        status=pl.when(pl.col("mean").is_null())
        .then(pl.lit("new"))
        .when(pl.col("mean_new").is_null())
        .then(pl.lit("vanished"))
        .otherwise(pl.lit("both")),
        base_ns=pl.col("mean").fill_null(0.0),
        new_ns=pl.col("mean_new").fill_null(0.0),
        _se=(pl.col("se").fill_null(0.0) ** 2 + pl.col("se_new").fill_null(0.0) ** 2).sqrt(),
    ).with_columns(delta_ns=pl.col("new_ns") - pl.col("base_ns"))
    noise = (Z * pl.col("_se")) if judged else pl.lit(None, pl.Float64)
    return (
        j.with_columns(
            delta_pct=pl.when(pl.col("base_ns") > 0).then(100.0 * pl.col("delta_ns") / pl.col("base_ns")),
            noise_ns=noise,
            significant=(pl.col("delta_ns").abs() > noise) if judged else pl.lit(None, pl.Boolean),
        )
        .sort([pl.col("delta_ns").abs(), key], descending=[True, False])
        .select(key, "status", "base_ns", "new_ns", "delta_ns", "delta_pct", "noise_ns", "significant")
    )


def _robust(t: pl.Series) -> tuple[float | None, float | None, float | None, float | None]:
    """mean, se of the mean, median, se of the median; all None where `t` holds no value (a profile with no GPU
    activity has no GPU busy or idle time in its iterations: NULL, not 0)."""
    t = t.drop_nulls().drop_nans() if t.dtype.is_float() else t.drop_nulls()
    n = t.len()
    if not n:
        return None, None, None, None
    mean, med = float(t.mean()), float(t.median())
    sd = float(t.std()) if n > 1 else 0.0
    mad = float((t - med).abs().median())
    return mean, sd / math.sqrt(n), med, MEDIAN_EFFICIENCY * MAD_SIGMA * mad / math.sqrt(n)


def _metric(name: str, b: float | None, bse, n: float | None, nse, unit: str = "ms") -> dict:
    if b is None or n is None:  # unknown on a side (_robust): nothing to compare, nothing judged
        unknown = dict.fromkeys(("delta", "delta_pct", "noise", "significant"))
        return {"metric": name, "unit": unit, "base": b, "base_se": bse, "new": n, "new_se": nse} | unknown
    noise = Z * math.hypot(bse, nse)
    d = n - b
    return {
        "metric": name,
        "unit": unit,
        "base": b,
        "base_se": bse,
        "new": n,
        "new_se": nse,
        "delta": d,
        "delta_pct": 100.0 * d / b if b else None,
        "noise": noise,
        "significant": abs(d) > noise,
    }


# columns of iterations that split an iteration's wall time with idle_ns, and how diff names them
PARTS = (("compute_ns", "compute"), ("exposed_comm_ns", "exposed communication"), ("copy_ns", "copy only"))


@dataclass(frozen=True)
class Diff:
    """The comparison of two profiles (what `diff` returns).

    `headline`: the verdict sentence. `notes`: the verdict's other lines, `item, value` (median, GPU busy, the
    largest changes, warnings; per-GPU busy shares when compared by totals). `rule`: the noise rule applied, or
    None when nothing is judged (totals). `iteration_time`: mean and median iteration time, GPU busy and idle,
    with their noise (None without iterations). `idle`: idle time per cause (None without iterations);
    `activity`: per iteration, the work other threads and processes did during idle gaps (None without iterations);
    `ranges`, `kernels`: per name, `status, base_ns, new_ns, delta_ns, delta_pct, noise_ns, significant`."""

    headline: str
    notes: pl.DataFrame
    rule: str | None
    ranges: pl.DataFrame
    kernels: pl.DataFrame
    iteration_time: pl.DataFrame | None = None
    idle: pl.DataFrame | None = None
    activity: pl.DataFrame | None = None
    # why NEW breaks the limit the diff was asked with (`fail_above`), in one line; None where it holds or none
    # was given
    over_limit: str | None = None
    # why the iteration times do not compare (the profiles look like two different programs), in one line; None
    # where they do
    incomparable: str | None = None

    @property
    def exit_status(self) -> int:
        """What a program that asked with a limit exits with: 1 where NEW breaks it, else 0."""
        return 1 if self.over_limit else 0

    @property
    def mean_change_pct(self) -> float | None:
        """NEW's mean steady-state iteration time vs BASE's, % (positive = slower); None without iterations."""
        if self.iteration_time is None:
            return None
        return self.iteration_time.filter(pl.col("metric") == "iteration time, mean")["delta_pct"][0]

    @property
    def significant(self) -> bool | None:
        """Whether the mean iteration time changed beyond the noise (None without iterations, or where they do not
        compare: `incomparable`)."""
        if self.iteration_time is None or self.incomparable:
            return None
        return self.iteration_time["significant"][0]

    def verdict(self, headline: bool = True) -> pl.DataFrame:
        """The verdict as `item, value` rows: the headline (item `verdict`), the notes, the rule (item `rule`)."""
        head = [("verdict", self.headline)] if headline else []
        tail = [("rule", self.rule)] if self.rule is not None else []
        return pl.concat(
            [
                _notes(head),
                self.notes,
                _notes(tail),
            ]
        )

    def to_frames(self) -> dict[str, pl.DataFrame]:
        """The sections as frames, in order: verdict, iteration time, idle by cause, idle activity elsewhere, ranges,
        kernels; compared by
        totals (no iterations): verdict, kernels, ranges."""
        if self.iteration_time is None:
            return {"verdict": self.verdict(), "kernels": self.kernels, "ranges": self.ranges}
        out = {"verdict": self.verdict(), "iteration time": self.iteration_time}
        if self.idle is not None:
            out["idle by cause"] = self.idle
        if self.activity is not None:
            out["idle activity elsewhere"] = self.activity
        return {**out, "ranges": self.ranges, "kernels": self.kernels}


def _notes(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"item": pl.String, "value": pl.String}, orient="row")


def diff(b: Side, n: Side, base_label: str = "BASE", new_label: str = "NEW") -> Diff:
    """BASE against NEW (see the module doc for the rules). Without iterations in either, both Sides need their
    `totals`."""
    if not needs_totals(b, n):
        return _compare_iterations(b, n, base_label, new_label)
    return _compare_totals(b, n, base_label, new_label)


def _gpus_differ(b: Side, n: Side, bl: str, nl: str) -> list[tuple[str, str]]:
    """The note that the two profiles ran on different GPU models (as many of each), or none: a change between
    them may be the hardware's rather than the code's. A GPU the export does not name is no evidence either way."""

    def said(d: Side) -> str:
        counts = d.gpus.group_by("device").len().sort("device")
        return ", ".join(f"{k} x {m}" if k > 1 else m for m, k in counts.iter_rows())

    if not all(d.gpus.height and d.gpus["device"].null_count() == 0 for d in (b, n)) or said(b) == said(n):
        return []
    return [("GPUs differ", f"{bl}: {said(b)}; {nl}: {said(n)}: a change may be the hardware's, not the code's")]


def _outliers(side: Side) -> set[int]:
    """The steady-state iterations of `side` flagged as outliers."""
    return set(side.steady.filter(pl.col("outlier"))["iteration"].to_list())


def _compare_iterations(b: Side, n: Side, bl: str, nl: str) -> Diff:
    nb, nn = b.steady.height, n.steady.height
    rows, parts = _iteration_metrics(b, n)
    itime = _iteration_time(rows, nb, nn)
    idle = _compare(
        _per_iteration(b.gaps, "cause", "duration_ns", nb), _per_iteration(n.gaps, "cause", "duration_ns", nn), "cause"
    )
    rng = _compare(
        _per_iteration(b.ranges, "name", "cpu_ns", nb), _per_iteration(n.ranges, "name", "cpu_ns", nn), "name"
    )
    kern = _compare(_per_iteration(b.kernels, "name", "ns", nb), _per_iteration(n.kernels, "name", "ns", nn), "name")
    act = _compare(
        _per_iteration(b.activity, "activity", "overlap_ns", nb),
        _per_iteration(n.activity, "activity", "overlap_ns", nn),
        "activity",
    )
    verdict = _iteration_notes(rows, parts) + _gpus_differ(b, n, bl, nl)
    pb, pn = b.stats["outlier_pattern"][0], n.stats["outlier_pattern"][0]
    if pb or pn:  # the same outliers in both (a profile against itself, or a stall that stayed) are said once
        # the same steps, not the same words: a sentence names only the first few of a long loop's outliers
        same = pb == pn and _outliers(b) == _outliers(n)
        said = f"the same in both: {pb}" if same else f"{bl}: {pb or 'none'}; {nl}: {pn or 'none'}"
        verdict.append(("slow iterations", said))
    verdict += _largest_changes(
        (
            ("idle cause", idle, "cause"),
            ("idle activity elsewhere", act, "activity"),
            ("range", rng, "name"),
            ("GPU op", kern, "name"),  # kernels, copies and memsets alike: `[CUDA memcpy ...]` is one
        )
    )
    signs = _signs(b, n, bl, nl, kern)
    verdict += [("warning", w) for w in signs.values()]
    rule = (
        f"a change counts when |Δ| > {Z:g}·sqrt(se_base² + se_new²), se = standard error of the "
        "per-iteration mean (sd/√n) or median (1.2533·1.4826·MAD/√n), over steady-state "
        f"iterations ({nb} in {bl}, {nn} in {nl})"
    )
    unlike = _unlike(signs)
    if unlike:
        head = f"no iteration-time verdict: {unlike}"
    else:
        head = _periodic_change(pb, pn, bl, nl) + _iteration_headline(rows[0], nl)
    return Diff(
        head, _notes(verdict), rule, rng, kern, iteration_time=itime, idle=idle, activity=act, incomparable=unlike
    )


def _unlike(signs: dict[str, str]) -> str | None:
    """Why two profiles' iteration times do not compare, or None: little kernel time in kernels both run (or one
    profile with no kernel), together with a sign of its own that the code differs (_signs: the loops are different
    NVTX ranges; the ranges inside the loops share no name; few kernel names are run by both): two independent
    signs of two different programs. Either alone is a change of one program (a renamed step range; AMP or a new
    library renaming its heavy kernels)."""
    other = next((signs[k] for k in ("loop", "ranges", "kernel names") if k in signs), None)
    if "kernel time" not in signs or other is None:
        return None
    return (
        f"{other}, and {signs['kernel time'].split(':')[0]}: these look like two different programs, whose "
        "iteration times do not compare (diff two runs of one program)"
    )


def _iteration_metrics(b: Side, n: Side) -> tuple[list[dict], list[tuple[str, dict]]]:
    """The `iteration time` rows (_metric), in order: mean and median iteration time, GPU busy and GPU idle
    (rows 0 to 3, which the verdict reads by position), then the parts of PARTS both profiles have; and the
    parts of the iteration's wall time, `(label, row)`: GPU idle, then those of PARTS (the same row objects)."""
    mb, smb, db, sdb = _robust(b.steady["wall_ns"].cast(pl.Float64) / 1e6)
    mn, smn, dn, sdn = _robust(n.steady["wall_ns"].cast(pl.Float64) / 1e6)
    bb, sbb, _, _ = _robust(100.0 * (1 - b.steady["idle_ns"] / b.steady["wall_ns"]))
    bn, sbn, _, _ = _robust(100.0 * (1 - n.steady["idle_ns"] / n.steady["wall_ns"]))
    ib, sib, _, _ = _robust(b.steady["idle_ns"].cast(pl.Float64) / 1e6)
    inn, sin_, _, _ = _robust(n.steady["idle_ns"].cast(pl.Float64) / 1e6)
    rows = [
        _metric("iteration time, mean", mb, smb, mn, smn),
        _metric("iteration time, median", db, sdb, dn, sdn),
        _metric("GPU busy in an iteration, mean", bb, sbb, bn, sbn, "%"),
        _metric("GPU idle in an iteration, mean", ib, sib, inn, sin_),
    ]
    # the parts of the iteration's wall time (iterations: compute, exposed communication, copy only; idle above)
    parts = [("GPU idle", rows[3])]  # its metric: "GPU idle in an iteration, mean"
    for col, label in PARTS:
        if col in b.steady.columns and col in n.steady.columns:
            pb_, spb, _, _ = _robust(b.steady[col].cast(pl.Float64) / 1e6)
            pn_, spn, _, _ = _robust(n.steady[col].cast(pl.Float64) / 1e6)
            parts.append((label, _metric(f"{label} in an iteration, mean", pb_, spb, pn_, spn)))
            rows.append(parts[-1][1])
    return rows, parts


def _iteration_time(rows: list[dict], nb: int, nn: int) -> pl.DataFrame:
    """The `iteration time` frame: the metric rows, then the count of steady-state iterations (not judged)."""
    itime = pl.DataFrame(rows)
    return pl.concat(
        [
            itime,
            pl.DataFrame(
                [
                    {
                        "metric": "steady-state iterations",
                        "unit": "",
                        "base": float(nb),
                        "base_se": None,
                        "new": float(nn),
                        "new_se": None,
                        "delta": float(nn - nb),
                        "delta_pct": None,
                        "noise": None,
                        "significant": None,
                    }
                ],
                schema=itime.schema,
            ),
        ]
    )


def _periodic_change(pb: str | None, pn: str | None, bl: str, nl: str) -> str:
    """The headline's lead when periodic outliers (a pattern with a period, as findings' `periodic slow iterations`
    reads it) vanish or appear: it stands whatever the mean does, since a few slow steps move the mean by less than
    the noise their own spread makes. Empty when neither or both profiles have them."""
    before, after = bool(pb and "every" in pb), bool(pn and "every" in pn)
    if before == after:
        return ""
    if before:
        return f"periodic outliers gone: in {bl} {pb}; in {nl} {pn or 'no iteration is an outlier'}. "
    return f"periodic outliers appeared: in {nl} {pn}; in {bl} {pb or 'no iteration is an outlier'}. "


def _iteration_headline(m: dict, nl: str) -> str:
    """The verdict sentence, on `m`, the mean iteration time's metric (the verdict is the mean's: module doc)."""
    mb, mn = m["base"], m["new"]
    if m["significant"]:
        return (
            f"{nl} is {'faster' if m['delta'] < 0 else 'slower'}: mean steady-state iteration {mb:,.2f} -> {mn:,.2f} ms "
            f"({m['delta_pct']:+,.1f}%), beyond the noise threshold of {m['noise']:,.2f} ms"
        )
    return (
        f"no significant change in mean iteration time: {mb:,.2f} -> {mn:,.2f} ms ({m['delta_pct']:+,.1f}%); "
        f"|change| {abs(m['delta']):,.2f} ms is within the noise threshold of {m['noise']:,.2f} ms"
        + ("; more steady-state iterations would decide it" if abs(m["delta_pct"] or 0) >= 10 else "")
    )


def _iteration_notes(rows: list[dict], parts: list[tuple[str, dict]]) -> list[tuple[str, str]]:
    """The verdict's first notes (_iteration_metrics' rows and parts): the median, GPU busy, and the part of the
    iteration's wall time that changed most."""
    md, busy = rows[1], rows[2]
    verdict = [
        (
            "median",
            f"{md['base']:,.2f} -> {md['new']:,.2f} ms ({md['delta_pct']:+,.1f}%), "
            + ("significant" if md["significant"] else "within noise")
            + f" (threshold {md['noise']:,.2f} ms)",
        ),
    ]
    if busy["delta"] is not None:  # else a profile has no GPU activity in its iterations: no busy share to compare
        verdict.append(("GPU busy", f"{busy['base']:,.1f}% -> {busy['new']:,.1f}% of an iteration (mean)"))
    known = [p for p in parts if p[1]["delta"] is not None]
    if not known:
        return verdict
    label, r = max(known, key=lambda p: abs(p[1]["delta"]))
    verdict.append(
        (
            "largest part change",
            f"{label}: {r['base']:,.2f} -> {r['new']:,.2f} ms per iteration ({r['delta']:+,.2f} ms, "
            + ("significant" if r["significant"] else "within noise")
            + ")",
        )
    )
    return verdict


def _largest_changes(sections: tuple[tuple[str, pl.DataFrame, str], ...]) -> list[tuple[str, str]]:
    """A note per `(label, frame, key)` section with rows: its first row, the largest change (_compare's order)."""
    notes = []
    for label, df, key in sections:
        if df.height:
            r = df.row(0, named=True)
            what = {"new": " (new)", "vanished": " (vanished)"}.get(r["status"], "")
            notes.append(
                (
                    f"largest {label} change",
                    f"{r[key]}{what}: {r['base_ns'] / 1e6:,.2f} -> {r['new_ns'] / 1e6:,.2f} ms per iteration "
                    f"({r['delta_ns'] / 1e6:+,.2f} ms, {'significant' if r['significant'] else 'within noise'})",
                )
            )
    return notes


def _signs(b: Side, n: Side, bl: str, nl: str, kern: pl.DataFrame) -> dict[str, str]:
    """Warnings that the two profiles may not be comparable, by sign, in the order said: `loop` (different
    iteration ranges), `ranges` (where the loops are named alike: the NVTX ranges inside them share no name),
    `kernel time` (too little kernel time in kernels both run: SAME_PROGRAM_SHARE; or one runs none), or
    `untraced` (a profile records no GPU op at all), and `kernel names` (few kernel names run by both:
    SAME_NAMES_SHARE)."""
    signs = {}
    if b.family != n.family:
        said = b.stats["range_said"][0], n.stats["range_said"][0]
        signs["loop"] = f"iterations are {said[0]} in {bl} but {said[1]} in {nl}"
    else:
        inner = _inner_ranges(b, n, bl, nl)
        if inner:
            signs["ranges"] = inner
    blind = [lab for lab, d in ((bl, b), (nl, n)) if not d.gpus.height]
    if blind:  # whether its iterations ran kernels cannot be told: no sign of a different program either
        signs["untraced"] = (
            f"{blind[0]} records no GPU activity at all (none is recorded without `nsys profile -t cuda`): "
            "its kernels do not compare"
        )
    for _, said in [] if blind else _same_program(bl, nl, kern, per_iteration=True):
        signs["kernel time"] = said
    names = _kernel_names_shared(bl, nl, kern)
    if names:
        signs["kernel names"] = names
    return signs


def _inner_ranges(b: Side, n: Side, bl: str, nl: str) -> str | None:
    """The sign that two loops of one name hold different code: the NVTX ranges that start inside their
    steady-state iterations (range families, the loop's own left out) share no name, or only one loop holds any;
    None where they share one, or neither loop holds a range."""
    loop = {b.family, n.family}
    names = [sorted(set(d.ranges["name"]) - loop) for d in (b, n)]
    if set(names[0]) & set(names[1]) or not (names[0] or names[1]):
        return None
    listed = [", ".join(quoted(x) for x in ns[:3]) + (", ..." if len(ns) > 3 else "") or "none" for ns in names]
    return f"the NVTX ranges inside their loops share no name ({bl}: {listed[0]}; {nl}: {listed[1]})"


def _kernel_names_shared(bl: str, nl: str, kern: pl.DataFrame) -> str | None:
    """The sign that few kernel names are run by both (fewer than SAME_NAMES_SHARE of the names of the profile
    that runs fewer), or None (also where either runs no kernel: _same_program says so)."""
    named = kern.filter(~pl.col("name").str.starts_with("["))  # kernels, not `[CUDA memcpy ...]` labels
    runs = {lab: named.filter(_ran(c)).height for lab, c in ((bl, "base_ns"), (nl, "new_ns"))}
    fewer = min(runs, key=runs.get)
    both = named.filter(pl.col("status") == "both").height
    if not runs[fewer] or both >= SAME_NAMES_SHARE * runs[fewer]:
        return None
    other = nl if fewer == bl else bl
    many = "kernel names are" if runs[fewer] != 1 else "kernel name is"
    return f"{both} of {fewer}'s {runs[fewer]} {many} run by {other} too"


def _same_program(bl: str, nl: str, kern: pl.DataFrame, per_iteration: bool = False) -> list[tuple[str, str]]:
    """The warning that too little kernel time is in kernels both profiles run (SAME_PROGRAM_SHARE), or none.
    `per_iteration`: `kern` is the steady-state iterations' GPU ops (else the whole profiles')."""
    notes = []
    named = kern.filter(~pl.col("name").str.starts_with("["))  # kernels, not `[CUDA memcpy ...]` labels
    sides = ((bl, "base_ns"), (nl, "new_ns"))
    none = [(lab, c) for lab, c in sides if named.height and not named.filter(_ran(c)).height]
    if none:  # a share of no kernel is no share: say which profile ran none
        return [("warning", _no_kernel(*none[0], kern, per_iteration))]
    # a profile whose kernels took no time in all (each rounds to 0 ns) has no share of time to judge
    shared = [named.filter(pl.col("status") == "both")[c].sum() / named[c].sum() for _, c in sides if named[c].sum()]
    if named.height and len(shared) == 2 and min(shared) < SAME_PROGRAM_SHARE:
        notes.append(
            (
                "warning",
                f"only {shared[0]:.0%} of {bl}'s kernel time and {shared[1]:.0%} of {nl}'s is in "
                "kernels both run: are they profiles of the same program?",
            )
        )
    return notes


def _ran(col: str) -> pl.Expr:
    """Whether the profile whose times are `col` (`base_ns`, `new_ns`) of a _compare frame ran the row's op at all:
    its presence (status), not its time, which is 0 for an op that ran and took no time (or rounds to 0 ns)."""
    return pl.col("status") != ("new" if col == "base_ns" else "vanished")


def _no_kernel(lab: str, col: str, kern: pl.DataFrame, per_iteration: bool) -> str:
    """The warning that profile `lab` (its times in `col` of `kern`) ran no kernel where the other did: in its
    steady-state iterations (`per_iteration`) or at all; where its GPU work there is CUDA graphs traced whole
    (`[CUDA graph ...]` ops), that their kernels were not recorded."""
    where = "in its steady-state iterations " if per_iteration else ""
    graphs = kern.filter(pl.col("name").str.starts_with("[CUDA graph") & _ran(col))
    if graphs.height:
        return (
            f"{lab} runs no recorded kernel {where}and the other does: its GPU work there is CUDA graphs traced "
            "whole, whose kernels nsys did not record (`nsys profile --cuda-graph-trace=node` records them), so "
            "their kernels do not compare"
        )
    if per_iteration:
        return f"{lab} runs no kernel {where}and the other does: their kernels do not compare"
    return f"{lab} holds no kernel and the other does: the totals compare GPU work with none"


def _compare_totals(b: Side, n: Side, bl: str, nl: str) -> Diff:
    why = "; ".join(f"{lab}: {d.why_no_iterations}" for lab, d in ((bl, b), (nl, n)) if d.why_no_iterations)
    verdict = [("compared", "totals over each whole profile (no noise estimate: nothing marked significant)")]
    for lab, d in ((bl, b), (nl, n)):
        for r in d.gpus.iter_rows(named=True):
            pct = r["busy_pct_active"]  # None where the device's ops span no time: summary's sentence then
            said = f"{pct:,.1f}% of its active span" if pct is not None else device_busy(r)
            verdict.append((f"{lab} GPU {r['device_id']} busy", said))
    verdict += _gpus_differ(b, n, bl, nl)
    kernels = _compare(b.totals[0], n.totals[0], "name", judged=False)
    verdict += _same_program(bl, nl, kernels)  # totals of two different programs compare nothing either
    ranges = _compare(b.totals[1], n.totals[1], "name", judged=False)
    bare = [lab for lab, d in ((bl, b), (nl, n)) if d.totals[1].height == 0]
    if len(bare) == 1 and ranges.height:
        # A profile without a single NVTX range was recorded without them (-t nvtx): its ranges did not vanish
        # or appear, they were not traced, so no row of theirs compares.
        verdict.append(
            (
                "warning",
                f"{bare[0]} holds no NVTX range and the other does: NVTX was not traced there "
                "(nsys profile -t nvtx), so the ranges do not compare",
            )
        )
        ranges = ranges.clear()
    return Diff(f"no iteration-time verdict: {why}", _notes(verdict), None, ranges=ranges, kernels=kernels)


def limited(result: Diff, fail_above: float | None) -> Diff:
    """`result` with the limit `fail_above` (a percentage: NEW's mean steady-state iteration time may be at most
    that much slower than BASE's) judged: `over_limit` says why NEW breaks it. A hard limit: the noise rule does
    not apply to it."""
    if fail_above is None:
        return result
    if result.incomparable:
        raise NsysqlError(f"`fail_above` needs two profiles of one program: {result.incomparable}", option="fail_above")
    pct = result.mean_change_pct
    if pct is None:
        raise NsysqlError("`fail_above` needs iterations in both profiles (none detected)", option="fail_above")
    if pct <= fail_above:
        return result
    why = (
        f"NEW's mean iteration time is {pct:+,.1f}% vs BASE (above `fail_above` {fail_above:,g}%, a hard limit: the "
        "verdict's noise rule does not apply to it)"
    )
    return replace(result, over_limit=why)


def finite_pct(x) -> float | None:
    """`fail_above` as a float: None, or a finite number."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise NsysqlError(f"`fail_above` must be a finite percentage, not {x}", option="fail_above")
    return float(x)


def mean_change_pct(result: Diff) -> float | None:
    """NEW's mean steady-state iteration time vs BASE's, % (positive = slower); None without iterations."""
    return result.mean_change_pct
