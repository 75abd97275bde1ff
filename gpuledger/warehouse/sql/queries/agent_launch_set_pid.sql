-- The sweep process of a launch, once it started.
UPDATE agent_launches SET pid = $pid WHERE launch_id = $launch_id
