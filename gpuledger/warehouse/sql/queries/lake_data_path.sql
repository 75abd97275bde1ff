-- DuckLake: the catalog's data path (set when the catalog was created), e.g. s3://bucket/prefix/.
-- $alias is the attached catalog's name (lake.ALIAS).
SELECT value FROM ducklake_options($alias) WHERE option_name = 'data_path'
