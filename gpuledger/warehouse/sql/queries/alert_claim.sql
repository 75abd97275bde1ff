-- An alert about to be sent: claimed once (an alert_key already there is not sent again).
INSERT INTO alerts_sent (alert_key, kind, subject, target, sent_at, ok, detail, payload)
VALUES ($alert_key, $kind, $subject, $target, $sent_at, false, 'sending', $payload)
ON CONFLICT DO NOTHING
RETURNING alert_key
