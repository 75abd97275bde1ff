-- How sending a claimed alert went.
UPDATE alerts_sent SET ok = $ok, detail = $detail WHERE alert_key = $alert_key
