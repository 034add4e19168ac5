-- Real-time sales dashboard, step 4 of 4: the next batch of orders.
--
-- The seed: "Electronics added an insulated tumbler (178), USB-C charger (387), and
-- wireless earbuds (299) for a total of 686 in new GMV, rising from 1155 to 1841 and
-- overtaking Sports & Outdoors". 178 + 387 + 299 = 864, not 686: the 686 is the charger
-- and the earbuds (387 + 299). An insulated tumbler is kitchenware, so here it is a
-- Home & Kitchen order in the same batch (338 -> 516), and every figure of the seed
-- holds: Electronics 1155 -> 1841 (+686), first place; Sports & Outdoors stays at 1570.
-- Computer Peripherals gets a new order too (637 -> 1096), as in the seed.

INSERT INTO ods_orders VALUES
  (15, 203, 3, 387.00, 'completed', TIMESTAMP '2024-06-18 18:10:03'),  -- USB-C charger, Electronics
  (16, 201, 1, 299.00, 'completed', TIMESTAMP '2024-06-18 18:10:19'),  -- wireless earbuds, Electronics
  (17, 401, 2, 178.00, 'completed', TIMESTAMP '2024-06-18 18:10:27'),  -- insulated tumbler, Home & Kitchen
  (18, 301, 1, 459.00, 'completed', TIMESTAMP '2024-06-18 18:10:44'),  -- mechanical keyboard, Computer Peripherals
  (19, 302, 1,  89.00, 'cancelled', TIMESTAMP '2024-06-18 18:10:58');  -- not counted

-- With `dyntables scheduler` (or `make demo`) running, the three layers pick this up on
-- their own within a few refresh intervals. Without it, refresh them by hand, in order:
--   REFRESH DYNAMIC TABLE dwd_orders_enriched;
--   REFRESH DYNAMIC TABLE ads_category_gmv;
--   REFRESH DYNAMIC TABLE ads_category_rank;
--   SELECT * FROM ads_category_rank ORDER BY gmv_rank, category;
