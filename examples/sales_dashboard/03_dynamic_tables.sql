-- Real-time sales dashboard, step 3 of 4: three layers of dynamic tables.
--
-- Plain full-scan SQL; the join and aggregate layers compute only what the new orders
-- change (INCREMENTAL), and nothing at all when no source changed (NO_DATA).
-- The seed refreshes every minute; the demo uses 1 second (`dyntables demo
-- --interval N` replaces the interval below). CREATE builds each table at once.

-- DWD: orders enriched with category and brand, completed orders only (join + filter).
CREATE DYNAMIC TABLE dwd_orders_enriched
  REFRESH INTERVAL 1 SECOND VCLUSTER default
AS SELECT o.order_id, o.order_time, o.product_id, p.product_name, p.category, p.brand,
          o.quantity, o.amount
   FROM ods_orders o
   JOIN ods_products p ON o.product_id = p.product_id
   WHERE o.status = 'completed';

-- ADS: per category, order count, total quantity, GMV and average price per unit.
CREATE DYNAMIC TABLE ads_category_gmv
  REFRESH INTERVAL 1 SECOND VCLUSTER default
AS SELECT category,
          COUNT(*)                              AS order_cnt,
          SUM(quantity)                         AS total_quantity,
          SUM(amount)                           AS gmv,
          ROUND(SUM(amount) / SUM(quantity), 2) AS avg_price
   FROM dwd_orders_enriched
   GROUP BY category;

-- ADS: the leaderboard, categories ranked by GMV. A rank over all rows changes with any
-- change, so AUTO recomputes it from ads_category_gmv (FULL, reason WINDOW_OVER_ALL_ROWS):
-- cheaper than maintaining it, and it never reads the orders.
CREATE DYNAMIC TABLE ads_category_rank
  REFRESH INTERVAL 1 SECOND VCLUSTER default
AS SELECT RANK() OVER (ORDER BY gmv DESC) AS gmv_rank,
          category, gmv, order_cnt, total_quantity, avg_price
   FROM ads_category_gmv;

SELECT * FROM ads_category_rank ORDER BY gmv_rank, category;
