-- Real-time sales dashboard, step 2 of 4: the initial orders.
--
-- The seed's figures after this batch (completed orders only):
--   Sports & Outdoors  4 orders, 8 units, GMV 1570, average price 196.25
--                      running shoes 2 orders (2 x 598), yoga mat 1 (258), jump rope 1 (116)
--   Electronics        4 orders, 6 units, GMV 1155
--   Computer Peripherals 2 orders, GMV 637;  Home & Kitchen 2 orders, GMV 338
--
-- Average price = GMV / units sold (1570 / 8 = 196.25): the average price paid per
-- unit, which is how ads_category_gmv computes it (03_dynamic_tables.sql).
-- Orders 13 and 14 are not completed: the DWD layer's filter keeps them out (without
-- it Sports & Outdoors would show 2467 and Electronics 2351).

INSERT INTO ods_orders VALUES
  ( 1, 101, 2, 598.00, 'completed', TIMESTAMP '2024-06-18 18:00:05'),  -- running shoes
  ( 2, 101, 2, 598.00, 'completed', TIMESTAMP '2024-06-18 18:00:41'),  -- running shoes
  ( 3, 102, 2, 258.00, 'completed', TIMESTAMP '2024-06-18 18:01:12'),  -- yoga mat
  ( 4, 103, 2, 116.00, 'completed', TIMESTAMP '2024-06-18 18:01:30'),  -- jump rope
  ( 5, 201, 1, 299.00, 'completed', TIMESTAMP '2024-06-18 18:02:02'),  -- wireless earbuds
  ( 6, 202, 2, 398.00, 'completed', TIMESTAMP '2024-06-18 18:02:17'),  -- bluetooth speaker
  ( 7, 203, 2, 258.00, 'completed', TIMESTAMP '2024-06-18 18:02:48'),  -- USB-C charger
  ( 8, 204, 1, 200.00, 'completed', TIMESTAMP '2024-06-18 18:03:09'),  -- power bank
  ( 9, 301, 1, 459.00, 'completed', TIMESTAMP '2024-06-18 18:03:33'),  -- mechanical keyboard
  (10, 302, 2, 178.00, 'completed', TIMESTAMP '2024-06-18 18:04:01'),  -- wireless mouse
  (11, 402, 1, 249.00, 'completed', TIMESTAMP '2024-06-18 18:04:25'),  -- santoku knife
  (12, 401, 1,  89.00, 'completed', TIMESTAMP '2024-06-18 18:04:52'),  -- insulated tumbler
  (13, 101, 3, 897.00, 'cancelled', TIMESTAMP '2024-06-18 18:05:10'),  -- not counted
  (14, 201, 4, 1196.00, 'pending',  TIMESTAMP '2024-06-18 18:05:36');  -- not counted
