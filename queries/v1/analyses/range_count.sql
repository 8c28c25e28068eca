-- Push/pop instances of the named ranges on one thread ($pid, $tid, $names): how many iterations a --range gives.
SELECT count(*) AS n FROM nvtx_ranges
WHERE pid = $pid AND tid = $tid AND style = 'PushPop' AND list_contains($names, name);
