-- Session search (issue 4): the ranking statement of search_messages is planned once per connection (a generic
-- plan) instead of on every call. The matching stays planned per call (matching_messages sets its own
-- plan_cache_mode): that is where how common a term is and how large the tenant is matter (0029, 0039, 0093).
--
-- The ranking's plan does not depend on its arguments: the matching calls are function scans (1000 rows whatever
-- the arguments), the candidates flow through materialized CTEs, and the page's limit only sizes the last join
-- (an index scan of the primary key either way). Planning it on every call cost a fixed part of every search:
-- about 10 % of a search backend's CPU went to the planner (perf, 200 queries in the largest tenant at 1M, with
-- the matching's own plans and estimates).
--
-- 0068 planned it once and 0070 took that back after an A/B on a 13k tenant (p50 16.5 -> 24.4 ms). Measured again
-- in one process, interleaved per query (A B / B A), on the bench's 1M index, the generic plan
-- is faster in every tenant size and answers the same rows and scores:
--   largest tenant (129k messages), 3 rounds, load 7.8: p50 62.0 -> 58.5 ms, median per-query ratio 0.958;
--   13k tenant, 3 rounds, load 7.1: p50 29.5 -> 26.4 ms, median per-query ratio 0.909;
--   600-message tenant, 3 rounds, load 7.1: p50 6.8 -> 4.7 ms, median per-query ratio 0.740;
--   identical hits, order and scores 200/200 in each.
ALTER FUNCTION indexer.search_messages(uuid, tsquery, tsquery, int, int, text, text[], text[], float8[], int)
    SET plan_cache_mode = force_generic_plan;
