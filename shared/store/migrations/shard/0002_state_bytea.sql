-- The folded snapshot is read and written only by the control plane, whole,
-- at every step: stored as the encoded bytes (no jsonb parse on each write,
-- no conversion on each read) and compressed with lz4 where the server has it
-- (pglz took most of a step's database time).
ALTER TABLE execution ALTER COLUMN state DROP DEFAULT;
ALTER TABLE execution ALTER COLUMN state TYPE bytea USING convert_to(state::text, 'UTF8');
ALTER TABLE execution ALTER COLUMN state SET DEFAULT '{}'::bytea;
DO $$
BEGIN
    ALTER TABLE execution ALTER COLUMN state SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: the snapshot column keeps the default compression';
END $$;
