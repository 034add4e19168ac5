-- Seed "Develop Dynamic Tables for Near Real-Time Incremental Processing": a raw
-- behaviour log, a cleaning dynamic table and an aggregation dynamic table.
--
--   dyntables sql -f examples/clickstream.sql
--   dyntables scheduler      # keeps both tables fresh while new events arrive
--
-- The seed's four scripts are the four steps below. Its Step01 is a task that appends
-- to the log every minute; `make demo` shows that live with its order writer.
-- Re-runnable: it first drops what a previous run created.

DROP DYNAMIC TABLE IF EXISTS dws_behavior_hourly;
DROP DYNAMIC TABLE IF EXISTS dwd_user_behavior;
DROP TABLE IF EXISTS ods_user_behavior_log;

-- Step01.Preparation: the raw log, as clients send it (mixed case, stray spaces,
-- events without a user, event types the analysis does not use)
CREATE TABLE ods_user_behavior_log (
  log_id     BIGINT,
  user_id    BIGINT,
  item_id    BIGINT,
  category   STRING,
  behavior   STRING,     -- pv | cart | fav | buy
  event_time TIMESTAMP
);
INSERT INTO ods_user_behavior_log VALUES
  (1, 1001, 501, 'Books',       'pv',    TIMESTAMP '2024-06-18 09:00:12'),
  (2, 1001, 501, 'Books',       ' PV ',  TIMESTAMP '2024-06-18 09:00:40'),
  (3, 1002, 502, 'Books',       'cart',  TIMESTAMP '2024-06-18 09:01:05'),
  (4, 1002, 502, 'Books',       'Buy',   TIMESTAMP '2024-06-18 09:02:30'),
  (5, NULL, 503, 'Electronics', 'pv',    TIMESTAMP '2024-06-18 09:03:00'),   -- no user: dropped
  (6, 1003, 503, 'Electronics', 'hover', TIMESTAMP '2024-06-18 09:03:10'),   -- not tracked: dropped
  (7, 1003, 503, 'Electronics', 'fav',   TIMESTAMP '2024-06-18 09:04:45'),
  (8, 1004, 504, 'Electronics', 'pv',    TIMESTAMP '2024-06-18 10:15:00');

-- Step02.Transformation_With_Dynamic_Table: clean and normalise
CREATE DYNAMIC TABLE dwd_user_behavior
  REFRESH INTERVAL 1 MINUTE VCLUSTER default
AS SELECT log_id, user_id, item_id, category,
          lower(trim(behavior)) AS behavior,
          event_time,
          to_date(event_time)   AS event_date,
          hour(event_time)      AS event_hour
   FROM ods_user_behavior_log
   WHERE user_id IS NOT NULL
     AND lower(trim(behavior)) IN ('pv', 'cart', 'fav', 'buy');

-- Step03.Aggregation_With_Dynamic_Table: per hour and category
CREATE DYNAMIC TABLE dws_behavior_hourly
  REFRESH INTERVAL 1 MINUTE VCLUSTER default
AS SELECT event_date, event_hour, category,
          COUNT(*)                                           AS events,
          SUM(CASE WHEN behavior = 'pv'   THEN 1 ELSE 0 END) AS page_views,
          SUM(CASE WHEN behavior = 'cart' THEN 1 ELSE 0 END) AS add_to_carts,
          SUM(CASE WHEN behavior = 'buy'  THEN 1 ELSE 0 END) AS purchases
   FROM dwd_user_behavior
   GROUP BY event_date, event_hour, category;

-- Step01 again: the next minute of events arrives...
INSERT INTO ods_user_behavior_log VALUES
  (9,  1005, 501, 'Books',       'pv',  TIMESTAMP '2024-06-18 10:20:00'),
  (10, 1004, 504, 'Electronics', 'buy', TIMESTAMP '2024-06-18 10:21:30'),
  (11, 1002, 505, 'Books',       'pv',  TIMESTAMP '2024-06-18 09:05:00');

-- ...and each layer refreshes incrementally (the scheduler does this every minute)
REFRESH DYNAMIC TABLE dwd_user_behavior;
REFRESH DYNAMIC TABLE dws_behavior_hourly;

-- Step04.Check_Data_Freshness: last refresh, its mode and the data lag per table...
SHOW DYNAMIC TABLES LIKE '%_behavior%';
-- ...and the result:
--   2024-06-18  9 Books        events 5, page_views 3, add_to_carts 1, purchases 1
--   2024-06-18  9 Electronics  events 1, page_views 0, add_to_carts 0, purchases 0
--   2024-06-18 10 Books        events 1, page_views 1, add_to_carts 0, purchases 0
--   2024-06-18 10 Electronics  events 2, page_views 1, add_to_carts 0, purchases 1
SELECT * FROM dws_behavior_hourly ORDER BY event_date, event_hour, category;
