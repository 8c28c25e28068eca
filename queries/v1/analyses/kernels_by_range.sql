-- @tables gpu_ops, nvtx_ranges, op_range_links, range_chains, strings
-- @macros exact_stddev, range_op_name, stats_durations
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)
-- @param $group_ops BOOLEAN: names lose PyTorch's per-call arguments (range_op_name)
-- @param $innermost BOOLEAN: each kernel counts only under the deepest of its kept ranges
-- @param $names VARCHAR[]: the range names to keep, NULL for all

-- Kernels per NVTX range: the quantity of `nsys stats -r nvtx_kern_sum`, per (range name, domain, kernel).
-- $attribution: 'thread' (nsys's rule) or 'process'. $names: the range names to keep, NULL for all.
-- $innermost: when true each kernel counts only under the deepest of its (kept) ranges.
-- $group_ops: when true, names lose PyTorch's per-call arguments (range_op_name), as in ranges.sql.
-- Rows are grouped on small integer keys (one per range name and domain, one per kernel name) and the names
-- joined at the end, so the tens of millions of (kernel, range) pairs of a large profile carry no strings.
-- The pairs are not listed from op_ranges: each kernel is linked to its innermost ranges (op_range_links), each
-- of those reaches its enclosing ranges (range_chains), and a range key's kernels are the kernels of the link
-- targets it reaches, each counted as often as the key's ranges enclose it. Keys that reach the same targets the
-- same number of times (a nesting chain of ranges named apart) share one list, whose figures are computed once:
-- a profile nested 20,000 deep costs what its kernels and chains do, not 20,000 times its kernels.
WITH rn AS (  -- the kept ranges, each with a key for its (name, domain)
  SELECT range_id, depth, start_ns, name, domain, dense_rank() OVER (ORDER BY name, domain) AS key
  FROM (SELECT * REPLACE (CASE WHEN $group_ops THEN range_op_name(name) ELSE name END AS name) FROM nvtx_ranges
        WHERE $names IS NULL OR list_contains($names, name))
), kname AS (  -- one key per distinct kernel name (ids with equal text count as one name)
  SELECT id AS name_id, min(id) OVER (PARTITION BY value) AS kkey FROM strings
), ops AS (  -- the kernels, each with its name's key
  SELECT o.op_id, o.duration_ns, n.kkey FROM gpu_ops o LEFT JOIN kname n ON n.name_id = o.name_id
  WHERE o.kind = 'kernel'
), links AS MATERIALIZED (  -- the kernels' links under the rule (canonical/60_op_ranges.sql), to target ranges t,
                           -- with each kernel's name key and duration
  SELECT l.op_id, l.range_id AS t, l.via, l.expand, o.kkey, o.duration_ns
  FROM op_range_links l JOIN ops o USING (op_id)
  WHERE l.via = 'thread' OR $attribution = 'process'
), targets AS (
  SELECT DISTINCT t, via, expand FROM links
), reach AS MATERIALIZED (  -- each target with the kept ranges its kernels belong to: its chain (expand), or itself
  SELECT g.t, g.via, g.expand, r.range_id, r.key, r.depth, r.start_ns
  FROM targets g JOIN range_chains c ON c.inner_id = g.t JOIN rn r ON r.range_id = c.range_id
  WHERE g.expand AND (g.via = 'thread' OR NOT c.library)
  UNION ALL
  SELECT g.t, g.via, g.expand, r.range_id, r.key, r.depth, r.start_ns
  FROM targets g JOIN rn r ON r.range_id = g.t
  WHERE NOT g.expand
), deepest AS (  -- $innermost: each kernel under the deepest of the kept ranges of all its targets
  SELECT l.op_id, l.kkey, l.duration_ns, d.range_id, d.key FROM links l JOIN (
    SELECT * FROM reach
    QUALIFY row_number() OVER (PARTITION BY t, via, expand ORDER BY depth DESC, start_ns DESC, range_id DESC) = 1
  ) d USING (t, via, expand)
  WHERE $innermost
  QUALIFY row_number() OVER (PARTITION BY l.op_id ORDER BY d.depth DESC, d.start_ns DESC, d.range_id DESC) = 1
), tk AS (  -- the kernel names of each target
  SELECT DISTINCT t, via, expand, kkey FROM links WHERE NOT $innermost
), mult AS (  -- how many kept ranges of each key a target's kernels belong to
  SELECT key, t, via, expand, count(*) AS m FROM reach WHERE NOT $innermost GROUP BY ALL
), groups AS MATERIALIZED (  -- per range key: its list of (target, times counted): the key's (kernel, range) pairs
                            -- are the kernels of those targets, each that many times
  SELECT key, list({'t': t, 'via': via, 'expand': expand, 'm': m} ORDER BY t, via, expand) AS sig
  FROM mult GROUP BY key
), counted AS (  -- range instances that enclose at least one of a kernel's launches, per key and kernel name
  SELECT key, kkey, count(*) AS range_count FROM (
    SELECT DISTINCT r.key, r.range_id, k.kkey FROM reach r JOIN tk k USING (t, via, expand))
  GROUP BY ALL
), sigs AS MATERIALIZED (  -- the distinct lists: keys with the same list (the ranges of one nesting chain, named
                           -- apart, all enclosing the same kernels) have the same figures, computed once
  SELECT sig, row_number() OVER () AS sid FROM (SELECT DISTINCT sig FROM groups)
), keyed AS MATERIALIZED (  -- each key's list, by its number
  SELECT g.key, s.sid FROM groups g JOIN sigs s USING (sig)
), listed AS MATERIALIZED (  -- each list's kernels, with how many times each is counted
  SELECT s.sid, l.kkey, l.duration_ns, s.e.m AS m
  FROM (SELECT sid, unnest(sig) AS e FROM sigs) s
  JOIN links l ON l.t = s.e.t AND l.via = s.e.via AND l.expand = s.e.expand
), repeated AS (  -- the lists that count a kernel more than once (ranges of one name nested in each other)
  SELECT DISTINCT sid FROM listed WHERE m > 1
), weighted AS (  -- their kernels as (duration, times counted): never a row repeated m times, which for a chain
                  -- of 20,000 ranges of a few names would be thousands of copies of every kernel
  SELECT sid, kkey, duration_ns AS d, sum(m) AS m FROM listed SEMI JOIN repeated USING (sid) GROUP BY ALL
), cumulated AS (  -- with the running count in duration order (for the median), the count and the mean
  SELECT *,
         sum(m) OVER (PARTITION BY sid, kkey ORDER BY d ROWS UNBOUNDED PRECEDING) AS upto,
         (sum(m) OVER (PARTITION BY sid, kkey))::BIGINT AS n,  -- BIGINT, as count(*) above
         sum(m * d) OVER (PARTITION BY sid, kkey) / sum(m) OVER (PARTITION BY sid, kkey) AS mean
  FROM weighted
), stats AS (
  SELECT  -- each kernel counted once, as a rule: stats_durations itself
    sid, kkey,
    count(*) AS count,
    unnest(stats_durations(duration_ns))
  FROM listed ANTI JOIN repeated USING (sid) GROUP BY sid, kkey
  UNION ALL
  SELECT  -- stats_durations' figures of the durations each repeated m times, from the weights
    sid, kkey,
    any_value(n) AS count,
    sum(m * d)::BIGINT AS total_ns,
    any_value(mean) AS avg_ns,
    -- the middle value, or the mean of the two middle values for an even count (as `median`)
    (min(d) FILTER (WHERE upto >= (n + 1) // 2) + min(d) FILTER (WHERE upto >= n // 2 + 1)) / 2 AS med_ns,
    min(d) AS min_ns,
    max(d) AS max_ns,
    -- the sample standard deviation, 0 for one value: as stats_stddev, from exact sums where it can
    coalesce(exact_stddev(d, m, any_value(n)), sqrt(sum(m * (d - mean) ^ 2) / nullif(any_value(n) - 1, 0)), 0)
      AS stddev_ns
  FROM cumulated GROUP BY sid, kkey
), agg AS (
  SELECT g.key, s.kkey, c.range_count, s.* EXCLUDE (sid, kkey)
  FROM keyed g JOIN stats s USING (sid)
  JOIN counted c ON c.key = g.key AND coalesce(c.kkey, -1) = coalesce(s.kkey, -1)  -- NULL: a name not in strings
  UNION ALL
  SELECT
    key, kkey,
    count(DISTINCT range_id) AS range_count,
    count(*) AS count,
    unnest(stats_durations(duration_ns))
  FROM deepest
  GROUP BY key, kkey
)
SELECT
  r.name AS range,
  r.domain,
  s.value AS kernel,
  -- range instances that enclose at least one of these kernels
  a.range_count,
  a.count,
  a.total_ns,
  a.avg_ns,
  a.med_ns,
  a.min_ns,
  a.max_ns,
  a.stddev_ns
FROM agg a
JOIN (SELECT DISTINCT key, name, domain FROM rn) r USING (key)
LEFT JOIN strings s ON s.id = a.kkey
ORDER BY range, total_ns DESC, kernel;
