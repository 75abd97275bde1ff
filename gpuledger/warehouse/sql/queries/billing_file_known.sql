-- Whether a billing file with this content (SHA-256) was ingested already.
SELECT 1 FROM billing_files WHERE file_sha256 = $sha256
