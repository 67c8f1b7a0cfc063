-- memlens's cross-rank answer in SQL: DuckDB views over a `memlens batch --format parquet`
-- dataset (DIR/table=NAME/[KEY=VALUE/...]part-*.parquet) that compute what `memlens batch
-- --format json` prints as `cross_rank` (src/compose/cross_rank.rs), checked equal to it by
-- tests/python/test_fleet_sql.py.
--
-- The dataset's directory (or URL) goes where the string literals below hold the placeholder
-- (a word in braces): memlens.fleet.views(con, root) and memlens.fleet.views_sql(root) put it
-- in, single quotes doubled; only those literals hold the placeholder. The files are read without Hive partition columns: a `rank=` directory of
-- `--partition-by rank` would otherwise replace the rank memlens read from the file name.
--
-- A rank is a file whose `files` rows say ok and carry a rank (one row per device). Every
-- statement follows one rule (cross_rank.rs, `threshold` and `stands_out`): the median is the
-- middle value, or floor((a + b) / 2) of the middle two; MAD is the median of |x - median|;
-- the threshold is max(ceil(3 * 1.4826 * MAD) in double precision, floor(median / 10),
-- 1 MiB); x stands out when x > median + threshold; judged only with at least 4 ranks.

-- The five tables as memlens writes them (columns: src/compose/dataset.rs).
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

-- Each rank file and its peak: the live requested bytes at the peak of its biggest device
-- (FileRow.peak_bytes; RankFacts.peak_bytes), by rank then file.
CREATE OR REPLACE VIEW memlens_rank_peaks AS
SELECT rank, file, max(peak_bytes) AS peak_bytes
FROM memlens_files
WHERE ok AND rank IS NOT NULL
GROUP BY rank, file
ORDER BY rank, file;

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

-- The rule over each set of values, one implementation for the peaks (kind 'peak', key '')
-- and each site (kind 'site', key = the site): ranks, the exact integer median, least, most,
-- MAD and the threshold (cross_rank.rs `threshold`). A helper of the views below.
CREATE OR REPLACE VIEW memlens_thresholds AS
WITH v AS (
    SELECT 'peak' AS kind, '' AS key, peak_bytes AS x FROM memlens_rank_peaks
    UNION ALL
    SELECT 'site', site, bytes FROM memlens_rank_sites
),
ranked AS (
    SELECT kind, key, x,
        row_number() OVER (PARTITION BY kind, key ORDER BY x) AS i,
        count(*) OVER (PARTITION BY kind, key) AS n
    FROM v
),
med AS (
    SELECT kind, key, any_value(n) AS n, min(x) AS min_bytes, max(x) AS max_bytes,
        (sum(x) FILTER (WHERE i = (n + 1) // 2) + sum(x) FILTER (WHERE i = n // 2 + 1)) // 2 AS m
    FROM ranked
    GROUP BY kind, key
),
dev AS (
    SELECT r.kind, r.key, r.n, abs(r.x::HUGEINT - med.m) AS d,
        row_number() OVER (PARTITION BY r.kind, r.key ORDER BY abs(r.x::HUGEINT - med.m)) AS i
    FROM ranked r JOIN med ON med.kind = r.kind AND med.key = r.key
),
mad AS (
    SELECT kind, key,
        (sum(d) FILTER (WHERE i = (n + 1) // 2) + sum(d) FILTER (WHERE i = n // 2 + 1)) // 2 AS mad
    FROM dev
    GROUP BY kind, key
)
SELECT med.kind, med.key, med.n AS ranks, med.m::BIGINT AS median_bytes,
    med.min_bytes, med.max_bytes, mad.mad::BIGINT AS mad_bytes,
    -- (3.0 * 1.4826) * MAD in double precision, as Rust's `3.0 * 1.4826 * mad as f64`.
    greatest(
        ceil(3.0::DOUBLE * 1.4826::DOUBLE * mad.mad::DOUBLE)::HUGEINT,
        med.m // 10,
        1048576
    )::BIGINT AS threshold_bytes
FROM med JOIN mad ON mad.kind = med.kind AND mad.key = med.key;

-- The peaks' median and threshold: cross_rank's `ranks`, `median_peak_bytes` (0 without
-- ranks) and `peak_threshold_bytes` (null with fewer than 4 ranks: not judged).
CREATE OR REPLACE VIEW memlens_peak_threshold AS
SELECT c.ranks,
    coalesce(t.median_bytes, 0) AS median_peak_bytes,
    CASE WHEN c.ranks >= 4 THEN t.threshold_bytes END AS peak_threshold_bytes
FROM (SELECT count(*) AS ranks FROM memlens_rank_peaks) c
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

-- Each rank with an OOM and its first OOM event (least time_us, untimed last, then event
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
    FROM memlens_rank_peaks r
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

-- The allocator settings whose value is not the same on every rank that records settings (at
-- least 2 must; a key absent on a rank is a null value there), one row per key and value
-- (JSON text) with its ranks ascending, by key, the most common value first, then value:
-- cross_rank's `settings_differ`. The value is DuckDB's JSON text of it: the same as memlens's
-- but for floats of 1e16 or more (10000000000000000.0 where memlens writes 1e+16).
CREATE OR REPLACE VIEW memlens_settings_differ AS
WITH rec AS (
    SELECT rank, file, any_value(allocator_settings) AS s
    FROM memlens_files
    WHERE ok AND rank IS NOT NULL AND allocator_settings IS NOT NULL
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
