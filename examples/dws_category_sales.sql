-- Seed "Dynamic Table" (overview), Quick Example: dws_category_sales.
--
--   dyntables sql -f examples/dws_category_sales.sql
--
-- The seed prints, after the first REFRESH:
--   | category    | order_cnt | total_quantity |
--   | Electronics | 2         | 5              |
--   | Clothing    | 1         | 5              |
-- The data below produces exactly that: two Electronics orders (2 + 3 units), one
-- Clothing order (5 units), and one order for a product missing from ods_products,
-- which the inner join leaves out.
-- Note: ods_orders and ods_products are also the names the sales dashboard uses
-- (examples/sales_dashboard) with other columns; run them in different namespaces.
-- Re-runnable: it first drops what a previous run created.

DROP DYNAMIC TABLE IF EXISTS dws_category_sales;
DROP TABLE IF EXISTS ods_orders;
DROP TABLE IF EXISTS ods_products;

CREATE TABLE IF NOT EXISTS ods_orders ( order_id BIGINT, product_id BIGINT, quantity INT, created_at TIMESTAMP );
CREATE TABLE IF NOT EXISTS ods_products ( product_id BIGINT, category STRING );

INSERT INTO ods_products VALUES (1, 'Electronics'), (2, 'Clothing'), (3, 'Books');
INSERT INTO ods_orders VALUES
  (1001, 1, 2, TIMESTAMP '2024-05-01 10:00:00'),
  (1002, 1, 3, TIMESTAMP '2024-05-01 10:05:00'),
  (1003, 2, 5, TIMESTAMP '2024-05-01 10:10:00'),
  (1004, 9, 1, TIMESTAMP '2024-05-01 10:15:00');  -- product 9 is unknown: no category

CREATE DYNAMIC TABLE dws_category_sales
  REFRESH INTERVAL 10 MINUTE VCLUSTER default
AS SELECT p.category, COUNT(*) AS order_cnt, SUM(o.quantity) AS total_quantity
   FROM ods_orders o JOIN ods_products p ON o.product_id = p.product_id
   GROUP BY p.category;

-- Immediately REFRESH after creation to reset the refresh time baseline
REFRESH DYNAMIC TABLE dws_category_sales;

-- Time Travel retention (0-90 days)
ALTER TABLE dws_category_sales SET PROPERTIES ('data_retention_days'='7');

-- Monitoring: recent refreshes
SHOW DYNAMIC TABLE REFRESH HISTORY WHERE name = 'dws_category_sales' LIMIT 10;

-- Modifying the refresh interval: same query, so the data is kept (no rebuild)
CREATE OR REPLACE DYNAMIC TABLE dws_category_sales
  REFRESH INTERVAL 30 MINUTE VCLUSTER default
AS SELECT p.category, COUNT(*) AS order_cnt, SUM(o.quantity) AS total_quantity
   FROM ods_orders o JOIN ods_products p ON o.product_id = p.product_id
   GROUP BY p.category;

-- ordered like the seed's output
SELECT * FROM dws_category_sales ORDER BY order_cnt DESC, category;
