-- One ingested billing file.
INSERT INTO billing_files (file_sha256, export_name, path, line_items, absent_columns, extra_columns,
                           currency_assumed, ingested_at, replaced_by)
VALUES ($sha256, $export_name, $path, $line_items, $absent, $extra, $assumed, $at, NULL)
