-- Real-time sales dashboard, step 1 of 4: the source tables (ODS layer).
--
-- From the seed "Real-Time Sales Dashboard: Building a Multi-Layer Incremental Data
-- Warehouse with Dynamic Tables". `make demo` runs these files in order (in its own
-- namespace, sales_demo); by hand, in the current namespace:
--
--   dyntables sql -f examples/sales_dashboard/01_sources.sql
--   dyntables sql -f examples/sales_dashboard/02_initial_orders.sql
--   dyntables sql -f examples/sales_dashboard/03_dynamic_tables.sql
--   dyntables sql -f examples/sales_dashboard/04_second_batch.sql
--   dyntables scheduler            (or the REFRESH statements at the end of 04)
--
-- Re-runnable: it first drops what a previous run created. DROP DYNAMIC TABLE keeps
-- a dropped table for its retention period (UNDROP TABLE brings it back).

DROP DYNAMIC TABLE IF EXISTS ads_category_rank;
DROP DYNAMIC TABLE IF EXISTS ads_category_gmv;
DROP DYNAMIC TABLE IF EXISTS dwd_orders_enriched;
DROP TABLE IF EXISTS ods_orders;
DROP TABLE IF EXISTS ods_products;

-- The product dimension: category and brand are what the DWD layer adds to each order.
CREATE TABLE ods_products (
  product_id   BIGINT,
  product_name STRING,
  category     STRING,
  brand        STRING,
  unit_price   DECIMAL(10, 2)
);

-- The order stream. `amount` is what the customer paid (quantity x unit price at the
-- time of the order); only `completed` orders count towards GMV.
CREATE TABLE ods_orders (
  order_id   BIGINT,
  product_id BIGINT,
  quantity   INT,
  amount     DECIMAL(12, 2),
  status     STRING,   -- completed | pending | cancelled
  order_time TIMESTAMP
);

INSERT INTO ods_products VALUES
  (101, 'Running Shoes',       'Sports & Outdoors',    'Stride',    299.00),
  (102, 'Yoga Mat',            'Sports & Outdoors',    'ZenFlex',   129.00),
  (103, 'Jump Rope',           'Sports & Outdoors',    'FitLoop',    58.00),
  (104, 'Camping Lantern',     'Sports & Outdoors',    'TrailGlow',  45.00),
  (201, 'Wireless Earbuds',    'Electronics',          'SoundWave', 299.00),
  (202, 'Bluetooth Speaker',   'Electronics',          'SoundWave', 199.00),
  (203, 'USB-C Charger',       'Electronics',          'VoltMax',   129.00),
  (204, 'Power Bank',          'Electronics',          'VoltMax',   200.00),
  (301, 'Mechanical Keyboard', 'Computer Peripherals', 'KeyForge',  459.00),
  (302, 'Wireless Mouse',      'Computer Peripherals', 'ClickPro',   89.00),
  (303, 'USB Hub',             'Computer Peripherals', 'ClickPro',   49.00),
  (401, 'Insulated Tumbler',   'Home & Kitchen',       'ThermoCo',   89.00),
  (402, 'Santoku Knife',      'Home & Kitchen',       'EdgeCraft', 249.00),
  (403, 'Pour-Over Kettle',    'Home & Kitchen',       'ThermoCo',  119.00);
