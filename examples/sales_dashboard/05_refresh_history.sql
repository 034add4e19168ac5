-- Real-time sales dashboard: how each layer refreshed (the seed's "View Refresh Status").
-- INCREMENTAL: only the new orders were computed; NO_DATA: nothing changed upstream,
-- nothing ran; FULL: the initial build at CREATE (full_reason INITIAL_BUILD in stats).

SHOW DYNAMIC TABLE REFRESH HISTORY
  WHERE name IN ('dwd_orders_enriched', 'ads_category_gmv', 'ads_category_rank')
  LIMIT 30;
