-- memlens's cross-rank answer in SQL: DuckDB views over a `memlens batch --format parquet`
-- dataset (DIR/table=NAME/[KEY=VALUE/...]part-*.parquet) that compute what `memlens batch
-- --format json` prints as `cross_rank` (src/compose/cross_rank/: mod.rs, steps.rs,
-- parallel.rs, names.rs), checked equal to it by tests/python/test_fleet_sql.py.
--
-- The dataset's directory (or URL) goes where the string literals below hold the placeholder
-- (a word in braces): memlens.fleet.views(con, root) and memlens.fleet.views_sql(root) put it
-- in, single quotes doubled; only those literals hold the placeholder. The files are read
-- without Hive partition columns: a `rank=` directory of `--partition-by rank` would otherwise
-- replace the rank memlens read from the file name.
--
-- A rank file is a file whose `files` rows say ok and carry a rank (one row per device). When
-- the rank files' paths name at least two steps (`iteration_10/`, `iteration_20/`: the files
-- table's path_step), the answer is about one step, the one with the most rank files (the
-- latest of those): memlens_answer_step's at_step. The peaks, sites, settings and parallel
-- groups are then over the rank files of that step; the first OOM and the step x rank matrix
-- over every rank file.
--
-- Every statement follows one rule (cross_rank/mod.rs, `threshold` and `stands_out`): the
-- median is the middle value, or floor((a + b) / 2) of the middle two; MAD is the median of
-- |x - median|; the threshold is max(ceil(3 * 1.4826 * MAD) in double precision,
-- floor(median / 10), 1 MiB); x stands out when x > median + threshold; judged only with at
-- least 4 values (ranks, ranks at a step, ranks of a pipeline stage).
--
-- Parallel groups: these views group the ranks by the coordinates their paths name
-- (`rank13_tp1_dp2_pp1...`: the files table's tp, cp, ep, dp, pp), which is `cross_rank.parallel`
-- when `batch` runs without `--topology`. A topology file is a command-line option the dataset
-- does not record; with one, `batch` places ranks by it and these views do not follow.

-- The six tables as memlens writes them (columns: src/compose/dataset.rs).
CREATE OR REPLACE VIEW memlens_files AS
SELECT * FROM read_parquet('{root}/table=files/**/*.parquet', hive_partitioning = false);
CREATE OR REPLACE VIEW memlens_sites AS
SELECT * FROM read_parquet('{root}/table=sites/**/*.parquet', hive_partitioning = false);
CREATE OR REPLACE VIEW memlens_timeline AS
SELECT * FROM read_parquet('{root}/table=timeline/**/*.parquet', hive_partitioning = false);
CREATE OR REPLACE VIEW memlens_ooms AS
SELECT * FROM read_parquet('{root}/table=ooms/**/*.parquet', hive_partitioning = false);
CREATE OR REPLACE VIEW memlens_leaks AS
SELECT * FROM read_parquet('{root}/table=leaks/**/*.parquet', hive_partitioning = false);
CREATE OR REPLACE VIEW memlens_steps AS
SELECT * FROM read_parquet('{root}/table=steps/**/*.parquet', hive_partitioning = false);

-- Every rank file (of every step): its peak, the live requested bytes at the peak of its
-- biggest device (FileRow.peak_bytes; RankFacts.peak_bytes), that device (FileRow.peak_device:
-- the lowest on ties, as Profile::biggest_device), and where its path places it (path_step,
-- tp, cp, ep, dp, pp: names.rs step_of_path and coords_of_path), by rank then file.
CREATE OR REPLACE VIEW memlens_rank_files AS
SELECT rank, file, max(peak_bytes) AS peak_bytes,
    first(device ORDER BY peak_bytes DESC, device) AS peak_device,
    any_value(path_step) AS path_step, any_value(tp) AS tp, any_value(cp) AS cp,
    any_value(ep) AS ep, any_value(dp) AS dp, any_value(pp) AS pp
FROM memlens_files
WHERE ok AND rank IS NOT NULL
GROUP BY rank, file
ORDER BY rank, file;

-- The step the answer is about (one row): at_step, the path step with the most rank files,
-- the latest of those, when the rank files' paths name at least two steps, else null
-- (cross_rank's `at_step`, mod.rs `answer_step`); path_steps, how many steps they name.
CREATE OR REPLACE VIEW memlens_answer_step AS
WITH c AS (
    SELECT path_step, count(*) AS n
    FROM memlens_rank_files
    WHERE path_step IS NOT NULL
    GROUP BY path_step
)
SELECT CASE WHEN (SELECT count(*) FROM c) >= 2
        THEN (SELECT path_step FROM c ORDER BY n DESC, path_step DESC LIMIT 1) END AS at_step,
    (SELECT count(*) FROM c) AS path_steps;

-- The ranks the answer is about and their peaks: every rank file, or with an at_step those
-- whose path names it, by rank then file.
CREATE OR REPLACE VIEW memlens_rank_peaks AS
SELECT r.rank, r.file, r.peak_bytes
FROM memlens_rank_files r, memlens_answer_step a
WHERE a.at_step IS NULL OR r.path_step = a.at_step
ORDER BY r.rank, r.file;

-- Every rank's bytes at every site seen on any rank: the sum of its `sites` rows (all devices
-- and categories), 0 on a rank without the site (RankFacts.sites, as cross_rank reads them).
CREATE OR REPLACE VIEW memlens_rank_sites AS
WITH own AS (
    SELECT s.file, s.site, sum(s.bytes) AS bytes
    FROM memlens_sites s
    WHERE s.moment = 'peak' AND s.file IN (SELECT file FROM memlens_rank_peaks)
    GROUP BY s.file, s.site
)
SELECT r.rank, r.file, k.site, coalesce(own.bytes, 0)::BIGINT AS bytes
FROM memlens_rank_peaks r
CROSS JOIN (SELECT DISTINCT site FROM own) k
LEFT JOIN own ON own.file = r.file AND own.site = k.site;

-- Each rank file's trace steps (every rank file): the `steps` rows of its peak device, as
-- batch.rs `trace_steps` reads them (rank, file, device, step, name, found_by, peak_bytes).
CREATE OR REPLACE VIEW memlens_rank_trace_steps AS
SELECT r.rank, r.file, s.device, s.step, s.name, s.found_by, s.peak_bytes
FROM memlens_rank_files r
JOIN memlens_steps s ON s.file = r.file AND s.device = r.peak_device
ORDER BY r.rank, r.file, s.step;

-- The step x rank matrix's cells, a helper of the step views below (steps.rs `step_matrix`,
-- over every rank file): with source 'path' (the paths name at least two steps) each rank's
-- peak at each path step; else with source 'trace' each rank's peak in each step of its
-- trace, keyed by the step's name. The highest where a rank has a step twice. held_by_two
-- marks the steps at least two ranks have (the others are left out: `steps_of_one_rank`);
-- step_number orders the steps (the number the name ends with, then the name: `step_key`; no
-- number orders last) and kept marks the last 32 (MAX_STEPS) held by two, the matrix's
-- columns.
CREATE OR REPLACE VIEW memlens_step_cells AS
WITH n AS (SELECT path_steps FROM memlens_answer_step),
cells AS (
    SELECT 'path' AS source, rank, path_step::VARCHAR AS step, path_step::UBIGINT AS step_number,
        max(peak_bytes) AS peak_bytes
    FROM memlens_rank_files
    WHERE path_step IS NOT NULL AND (SELECT path_steps FROM n) >= 2
    GROUP BY rank, path_step
    UNION ALL
    SELECT 'trace', rank, name,
        coalesce(TRY_CAST(regexp_extract(name, '[0-9]+$') AS UBIGINT), 18446744073709551615::UBIGINT),
        max(peak_bytes)
    FROM memlens_rank_trace_steps
    WHERE (SELECT path_steps FROM n) < 2
    GROUP BY rank, name
),
held AS (SELECT step, step_number, count(DISTINCT rank) AS ranks FROM cells GROUP BY step, step_number),
keys AS (
    SELECT step, step_number,
        row_number() OVER (ORDER BY step_number DESC, step DESC) AS from_last
    FROM held
    WHERE ranks >= 2
)
SELECT c.source, c.rank, c.step, c.step_number, c.peak_bytes,
    coalesce(k.from_last <= 32, false) AS kept, k.step IS NOT NULL AS held_by_two
FROM cells c LEFT JOIN keys k ON k.step = c.step AND k.step_number = c.step_number;

-- The step x rank matrix (cross_rank's `steps`): each rank's peak at each step the matrix
-- keeps (its `ranks` rows, without the nulls), by rank then step.
CREATE OR REPLACE VIEW memlens_step_peaks AS
SELECT rank, step, peak_bytes
FROM memlens_step_cells
WHERE kept
ORDER BY rank, step_number, step;

-- The parallel coordinates the paths name of the ranks the answer is about, one row per rank
-- file and axis it has (parallel.rs's placed ranks, by names; no topology file).
CREATE OR REPLACE VIEW memlens_rank_coords AS
SELECT rank, file, axis, value, peak_bytes
FROM (
    SELECT f.rank, f.file, a.axis, a.i,
        CASE a.axis WHEN 'tp' THEN f.tp WHEN 'cp' THEN f.cp WHEN 'ep' THEN f.ep
            WHEN 'dp' THEN f.dp ELSE f.pp END AS value,
        f.peak_bytes
    FROM memlens_rank_files f
    CROSS JOIN (VALUES ('tp', 1), ('cp', 2), ('ep', 3), ('dp', 4), ('pp', 5)) a(axis, i)
    WHERE f.file IN (SELECT file FROM memlens_rank_peaks)
)
WHERE value IS NOT NULL
ORDER BY i, value, rank, file;

-- The rule, as macros over a non-empty list of values (mod.rs `threshold`): the exact integer
-- median; the threshold from the median m and the MAD (the median of [|x - m| for x in xs]),
-- (3.0 * 1.4826) * MAD rounded up in double precision, as Rust's `3.0 * 1.4826 * mad as f64`.
CREATE OR REPLACE MACRO memlens_median(xs) AS
    (list_sort(xs)[(len(xs) + 1) // 2]::HUGEINT + list_sort(xs)[len(xs) // 2 + 1]::HUGEINT) // 2;
CREATE OR REPLACE MACRO memlens_threshold(m, mad) AS
    greatest(ceil(3.0::DOUBLE * 1.4826::DOUBLE * mad::DOUBLE)::HUGEINT, m // 10, 1048576)::BIGINT;

-- The rule over the peaks (kind 'peak', key '') and each site (kind 'site', key = the site):
-- how many values (ranks), the median, least, most, MAD and the threshold. A helper of the
-- views below. (The step and parallel views apply the macros to their own values.)
CREATE OR REPLACE VIEW memlens_thresholds AS
WITH v AS (
    SELECT 'peak' AS kind, '' AS key, peak_bytes AS x FROM memlens_rank_peaks
    UNION ALL
    SELECT 'site', site, bytes FROM memlens_rank_sites
),
g AS (
    SELECT kind, key, list(x) AS xs, count(*) AS n, min(x) AS min_bytes, max(x) AS max_bytes
    FROM v
    GROUP BY kind, key
),
m AS (SELECT *, memlens_median(xs) AS m FROM g),
d AS (SELECT *, memlens_median([abs(x::HUGEINT - m) for x in xs]) AS mad FROM m)
SELECT kind, key, n AS ranks, m::BIGINT AS median_bytes, min_bytes, max_bytes,
    mad::BIGINT AS mad_bytes, memlens_threshold(m, mad) AS threshold_bytes
FROM d;

-- The peaks' median and threshold: cross_rank's `ranks`, `median_peak_bytes` (0 without
-- ranks), `peak_threshold_bytes` (null with fewer than 4 ranks: not judged) and `at_step`.
CREATE OR REPLACE VIEW memlens_peak_threshold AS
SELECT c.ranks,
    coalesce(t.median_bytes, 0) AS median_peak_bytes,
    CASE WHEN c.ranks >= 4 THEN t.threshold_bytes END AS peak_threshold_bytes,
    a.at_step
FROM (SELECT count(*) AS ranks FROM memlens_rank_peaks) c
CROSS JOIN memlens_answer_step a
LEFT JOIN memlens_thresholds t ON t.kind = 'peak';

-- The ranks whose peak stands out, biggest excess first, each with the site that makes most
-- of its difference (largest bytes - site median among its sites above their median; ties:
-- the first site by name; null when none): cross_rank's `outliers` (OutlierRank).
CREATE OR REPLACE VIEW memlens_outlier_ranks AS
WITH o AS (
    SELECT p.rank, p.file, p.peak_bytes, p.peak_bytes - t.median_peak_bytes AS excess_bytes,
        CASE WHEN t.median_peak_bytes = 0 THEN 0.0::DOUBLE
            ELSE p.peak_bytes::DOUBLE / t.median_peak_bytes::DOUBLE END AS over_median
    FROM memlens_rank_peaks p, memlens_peak_threshold t
    WHERE t.peak_threshold_bytes IS NOT NULL
        AND p.peak_bytes::HUGEINT > t.median_peak_bytes::HUGEINT + t.peak_threshold_bytes
),
s AS (
    SELECT rs.file, rs.site, rs.bytes, t.median_bytes,
        row_number() OVER (
            PARTITION BY rs.file ORDER BY rs.bytes - t.median_bytes DESC, rs.site
        ) AS i
    FROM memlens_rank_sites rs
    JOIN memlens_thresholds t ON t.kind = 'site' AND t.key = rs.site
    WHERE rs.bytes > t.median_bytes AND rs.file IN (SELECT file FROM o)
)
SELECT o.rank, o.file, o.peak_bytes, o.excess_bytes, o.over_median, s.site,
    coalesce(s.bytes, 0) AS site_bytes, coalesce(s.median_bytes, 0) AS site_median_bytes
FROM o LEFT JOIN s ON s.file = o.file AND s.i = 1
ORDER BY o.excess_bytes DESC, o.rank, o.file;

-- Per site, each rank whose bytes there stand out (none with fewer than 4 ranks), by site
-- then most bytes first: the `outliers` of cross_rank's `sites` (all of them, not only 8).
CREATE OR REPLACE VIEW memlens_site_outliers AS
SELECT rs.site, rs.rank, rs.file, rs.bytes
FROM memlens_rank_sites rs
JOIN memlens_thresholds t ON t.kind = 'site' AND t.key = rs.site
WHERE t.ranks >= 4 AND rs.bytes::HUGEINT > t.median_bytes::HUGEINT + t.threshold_bytes
ORDER BY rs.site, rs.bytes DESC, rs.rank, rs.file;

-- Every site across ranks: median, least, most, how many ranks stand out there and, where
-- some do, the excess of the most (max - median). Those with outlier_ranks > 0, in this order
-- (biggest excess first, then site), are cross_rank's `sites`; their count is
-- `sites_with_outliers`.
CREATE OR REPLACE VIEW memlens_site_spread AS
SELECT t.key AS site, t.median_bytes, t.min_bytes, t.max_bytes,
    coalesce(o.n, 0) AS outlier_ranks,
    CASE WHEN o.n > 0 THEN t.max_bytes - t.median_bytes END AS excess_bytes
FROM memlens_thresholds t
LEFT JOIN (SELECT site, count(*) AS n FROM memlens_site_outliers GROUP BY site) o
    ON o.site = t.key
WHERE t.kind = 'site'
ORDER BY excess_bytes DESC NULLS LAST, site;

-- Each rank file (of every step) with an OOM and its first OOM event (least time_us, untimed last, then event
-- index, then the order memlens wrote them), ordered by that time then rank: the first row and
-- its after_us = 0 are cross_rank's `first_oom`, the next ones its `then`, the row count
-- `ranks_with_oom`. after_us is null on every row when some rank's first OOM has no time
-- (then cross_rank cannot judge, and `first_oom` is null).
CREATE OR REPLACE VIEW memlens_first_oom AS
WITH o AS (
    SELECT r.rank, r.file, o.time_us, o.device, o.requested_bytes, o.verdict,
        row_number() OVER (
            PARTITION BY r.file
            ORDER BY o.time_us IS NULL, o.time_us, o.event_index NULLS FIRST,
                o.filename, o.file_row_number
        ) AS i
    FROM memlens_rank_files r
    JOIN read_parquet('{root}/table=ooms/**/*.parquet', hive_partitioning = false,
        filename = true, file_row_number = true) o ON o.file = r.file
),
f AS (SELECT * FROM o WHERE i = 1)
SELECT rank, file, time_us,
    CASE WHEN count(*) FILTER (WHERE time_us IS NULL) OVER () = 0
        THEN time_us - min(time_us) OVER () END AS after_us,
    device, requested_bytes, verdict
FROM f
ORDER BY time_us NULLS LAST, rank, file;

-- The allocator settings whose value is not the same on every rank (of memlens_rank_peaks) that records settings (at
-- least 2 must; a key absent on a rank is a null value there), one row per key and value
-- (JSON text) with its ranks ascending, by key, the most common value first, then value:
-- cross_rank's `settings_differ`. The value is DuckDB's JSON text of it: the same as memlens's
-- but for floats of 1e16 or more (10000000000000000.0 where memlens writes 1e+16).
CREATE OR REPLACE VIEW memlens_settings_differ AS
WITH rec AS (
    SELECT rank, file, any_value(allocator_settings) AS s
    FROM memlens_files
    WHERE ok AND rank IS NOT NULL AND allocator_settings IS NOT NULL
        AND file IN (SELECT file FROM memlens_rank_peaks)
    GROUP BY rank, file
),
kv AS (
    SELECT rec.file, j.key, j.value::VARCHAR AS value FROM rec, json_each(rec.s) j
),
grid AS (
    SELECT rec.rank, rec.file, k.key, kv.value
    FROM rec
    CROSS JOIN (SELECT DISTINCT key FROM kv) k
    LEFT JOIN kv ON kv.file = rec.file AND kv.key = k.key
),
g AS (
    SELECT key, value, list(rank ORDER BY rank, file) AS ranks, count(*) AS n
    FROM grid
    GROUP BY key, value
)
SELECT key, value, ranks
FROM g
WHERE (SELECT count(*) FROM rec) >= 2
    AND key IN (SELECT key FROM g GROUP BY key HAVING count(*) >= 2)
ORDER BY key, n DESC, value NULLS FIRST;

-- Per step the matrix keeps, in order, its peaks across ranks: cross_rank's `steps.columns`
-- (the ranks with the step, their median, the highest peak and its rank, the lowest on ties,
-- and the ranks whose peak stands out, ascending: empty with fewer than 4 ranks at the step).
CREATE OR REPLACE VIEW memlens_step_columns AS
WITH g AS (
    SELECT step, step_number, list(peak_bytes) AS xs, count(*) AS ranks, max(peak_bytes) AS max_bytes,
        first(rank ORDER BY peak_bytes DESC, rank) AS max_rank
    FROM memlens_step_cells
    WHERE kept
    GROUP BY step, step_number
),
m AS (SELECT *, memlens_median(xs) AS m FROM g),
t AS (SELECT *, memlens_threshold(m, memlens_median([abs(x::HUGEINT - m) for x in xs])) AS thr FROM m)
SELECT t.step, t.ranks, t.m::BIGINT AS median_bytes, t.max_bytes, t.max_rank,
    coalesce(list(c.rank ORDER BY c.rank) FILTER (
        WHERE t.ranks >= 4 AND c.peak_bytes::HUGEINT > t.m + t.thr
    ), []::BIGINT[]) AS outlier_ranks
FROM t
JOIN memlens_step_cells c ON c.step = t.step AND c.step_number = t.step_number
GROUP BY t.step, t.step_number, t.ranks, t.m, t.max_bytes, t.max_rank
ORDER BY t.step_number, t.step;

-- The matrix as a whole, one row where there is one (cross_rank's `steps` not null): its
-- source ('path' or 'trace'), how the ranks' traces found their steps (found_by, each way
-- once; empty with 'path'), the steps in total (steps_found), the steps kept in order (the
-- columns) and the ranks with steps, ascending (the rows; a row is null at a step absent
-- from memlens_step_peaks).
CREATE OR REPLACE VIEW memlens_step_matrix AS
WITH c AS (SELECT * FROM memlens_step_cells),
k AS (SELECT DISTINCT step, step_number, kept, held_by_two FROM c),
r AS (SELECT DISTINCT rank FROM c WHERE kept)
SELECT (SELECT any_value(source) FROM c) AS source,
    CASE WHEN (SELECT any_value(source) FROM c) = 'trace'
        THEN (SELECT list(DISTINCT found_by ORDER BY found_by) FROM memlens_rank_trace_steps)
        ELSE []::VARCHAR[] END AS found_by,
    (SELECT count(*) FROM k WHERE held_by_two) AS steps_found,
    (SELECT count(*) FROM k WHERE NOT held_by_two) AS steps_of_one_rank,
    (SELECT list(step ORDER BY step_number, step) FROM k WHERE kept) AS steps,
    (SELECT list(rank ORDER BY rank) FROM r) AS ranks
WHERE EXISTS (SELECT 1 FROM c WHERE kept);

-- Per parallel axis with at least two coordinates among the ranks the answer is about (tp,
-- cp, ep, dp, pp order), each coordinate's ranks: how many, their median, least and most
-- peak, and the rank of the most (the lowest on ties): cross_rank's `parallel.by_axis` groups,
-- by the paths' coordinates only (source `names`; no topology file).
CREATE OR REPLACE VIEW memlens_parallel_groups AS
WITH axes AS (
    SELECT axis FROM memlens_rank_coords GROUP BY axis HAVING count(DISTINCT value) >= 2
),
g AS (
    SELECT axis, value, count(*) AS ranks, memlens_median(list(peak_bytes))::BIGINT AS median_peak_bytes,
        min(peak_bytes) AS min_peak_bytes, max(peak_bytes) AS max_peak_bytes,
        first(rank ORDER BY peak_bytes DESC, rank) AS max_rank
    FROM memlens_rank_coords
    WHERE axis IN (SELECT axis FROM axes)
    GROUP BY axis, value
)
SELECT * FROM g
ORDER BY list_position(['tp', 'cp', 'ep', 'dp', 'pp'], axis), value;

-- Per axis of memlens_parallel_groups: between_bytes, the highest group median - the lowest
-- (how much the axis separates peaks), and within_bytes, the widest group's most - least (how
-- much ranks of one coordinate differ).
CREATE OR REPLACE VIEW memlens_parallel_axes AS
SELECT axis, max(median_peak_bytes) - min(median_peak_bytes) AS between_bytes,
    max(max_peak_bytes - min_peak_bytes) AS within_bytes
FROM memlens_parallel_groups
GROUP BY axis
ORDER BY list_position(['tp', 'cp', 'ep', 'dp', 'pp'], axis);

-- The ranks whose peak stands out among the ranks of their pipeline stage (the pp groups of
-- memlens_parallel_groups, those of at least 4 ranks), biggest excess first:
-- cross_rank's `parallel.stage_outliers` (by the paths' coordinates).
CREATE OR REPLACE VIEW memlens_stage_outliers AS
WITH c AS (
    SELECT * FROM memlens_rank_coords
    WHERE axis = 'pp' AND value IN (SELECT value FROM memlens_parallel_groups WHERE axis = 'pp' AND ranks >= 4)
),
m AS (
    SELECT value, list(peak_bytes) AS xs, count(*) AS n, memlens_median(list(peak_bytes)) AS m
    FROM c
    GROUP BY value
),
t AS (SELECT *, memlens_threshold(m, memlens_median([abs(x::HUGEINT - m) for x in xs])) AS thr FROM m)
SELECT c.rank, c.value AS stage, c.peak_bytes, t.m::BIGINT AS stage_median_bytes,
    (c.peak_bytes - t.m)::BIGINT AS excess_bytes, t.n AS stage_ranks
FROM c JOIN t ON t.value = c.value
WHERE c.peak_bytes::HUGEINT > t.m + t.thr
ORDER BY excess_bytes DESC, c.rank, stage, c.file;

-- The grouping as a whole, one row where memlens_parallel_groups has an axis (cross_rank's
-- `parallel` not null): its source (`names`: the paths' coordinates), the ranks placed (those
-- whose path names at least one coordinate) and the pipeline stages judged (pp groups of at
-- least 4 ranks), and the widest axis (the one whose medians lie furthest apart, by more than
-- a tenth of the placed ranks' median peak and 1 MiB; parallel.rs `widest_axis`).
CREATE OR REPLACE VIEW memlens_parallel AS
SELECT 'names' AS source,
    (SELECT count(DISTINCT file) FROM memlens_rank_coords) AS ranks_placed,
    (SELECT count(*) FROM memlens_parallel_groups WHERE axis = 'pp' AND ranks >= 4) AS stages_judged,
    (SELECT axis FROM memlens_parallel_axes
        WHERE between_bytes > greatest(
            (SELECT memlens_median(list(peak_bytes)) // 10
             FROM (SELECT DISTINCT file, peak_bytes FROM memlens_rank_coords)), 1048576)
        ORDER BY between_bytes DESC, list_position(['tp', 'cp', 'ep', 'dp', 'pp'], axis) LIMIT 1) AS widest_axis
WHERE EXISTS (SELECT 1 FROM memlens_parallel_groups);
