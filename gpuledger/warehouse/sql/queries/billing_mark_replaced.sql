-- Records which delivery restated an earlier one.
UPDATE billing_files SET replaced_by = $by WHERE file_sha256 = $sha256
