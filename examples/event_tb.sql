-- Seed "Dynamic Table Overview": event_tb -> event_gettime -> event_group_minute.
--
--   dyntables sql -f examples/event_tb.sql
--
-- The statements are the seed's; the seed then schedules both tables every minute in
-- Studio, the second depending on the first. Here that is REFRESH INTERVAL, and
-- `dyntables scheduler` refreshes event_group_minute right after event_gettime.
-- Re-runnable: it first drops what a previous run created.

DROP DYNAMIC TABLE IF EXISTS event_group_minute;
DROP DYNAMIC TABLE IF EXISTS event_gettime;
DROP TABLE IF EXISTS event_tb;

-- 1. Data preparation
CREATE TABLE event_tb ( event STRING, process DOUBLE, event_time TIMESTAMP );
INSERT INTO event_tb VALUES
  ('event-0', 20.0, TIMESTAMP '2023-09-20 14:43:13'),
  ('event-0', 20.0, TIMESTAMP '2023-09-19 11:40:13'),
  ('event-1', 21.0, TIMESTAMP '2023-09-19 14:30:14'),
  ('event-1', 22.0, TIMESTAMP '2023-09-20 14:20:15');

-- 2. Data processing: "1. Time Processing dt"
CREATE dynamic TABLE IF NOT EXISTS event_gettime AS
SELECT event, process, YEAR(event_time) event_year, MONTH(event_time) event_month,
       DAY(event_time) event_day, hour(event_time) event_hour, minute(event_time) event_minute
FROM event_tb;
REFRESH dynamic TABLE event_gettime;

-- "2. Aggregate dy"
CREATE dynamic TABLE IF NOT EXISTS event_group_minute AS
SELECT event, event_hour, event_minute, SUM(process) process_sum
FROM event_gettime
GROUP BY event, event_hour, event_minute;
refresh dynamic table event_group_minute;

-- 3. Scheduling: a 1-minute interval for both (Studio's schedule in the seed)
ALTER DYNAMIC TABLE event_gettime SET REFRESH INTERVAL 1 MINUTE;
ALTER DYNAMIC TABLE event_group_minute SET REFRESH INTERVAL 1 MINUTE;

-- 4. Verify incremental refresh: one new row, refreshed by hand here
INSERT INTO event_tb VALUES ('event-0', 20.0, TIMESTAMP '2024-01-20 14:43:13');
REFRESH DYNAMIC TABLE event_gettime;
REFRESH DYNAMIC TABLE event_group_minute;

-- the seed prints: SUCCEED, MANUAL, INCREMENTAL, {"rows_deleted":"0","rows_inserted":"1"}
SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name='event_gettime';
