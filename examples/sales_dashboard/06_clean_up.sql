-- Real-time sales dashboard: clean up (the seed's "Clean Up Resources").
-- DROP DYNAMIC TABLE keeps each table for its retention period: UNDROP TABLE restores it.

DROP DYNAMIC TABLE IF EXISTS ads_category_rank;
DROP DYNAMIC TABLE IF EXISTS ads_category_gmv;
DROP DYNAMIC TABLE IF EXISTS dwd_orders_enriched;
DROP TABLE IF EXISTS ods_orders;
DROP TABLE IF EXISTS ods_products;
