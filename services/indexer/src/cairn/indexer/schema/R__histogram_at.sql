CREATE OR REPLACE FUNCTION indexer.histogram_at(p_bounds timestamptz[], p_position float8) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    n int := cardinality(p_bounds);
    k int;
BEGIN
    IF p_position <= 0 THEN RETURN p_bounds[1]; END IF;
    IF p_position >= n - 1 THEN RETURN p_bounds[n]; END IF;
    k := floor(p_position)::int + 1;
    IF NOT (isfinite(p_bounds[k]) AND isfinite(p_bounds[k + 1])) THEN
        RETURN p_bounds[k];
    END IF;
    RETURN p_bounds[k] + (p_bounds[k + 1] - p_bounds[k]) * (p_position - (k - 1));
END
$$;
