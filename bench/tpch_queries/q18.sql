-- TPC-H Q18, large volume customer. Adapted: QUANTITY = 300; the unnamed
-- SUM(l_quantity) column named sum_qty; ORDER BY o_totalprice DESC, o_orderdate
-- LIMIT 100 dropped. The IN (SELECT ... GROUP BY ... HAVING ...) stays as written.
SELECT
  c_name,
  c_custkey,
  o_orderkey,
  o_orderdate,
  o_totalprice,
  SUM(l_quantity) AS sum_qty
FROM customer, orders, lineitem
WHERE o_orderkey IN (
    SELECT l_orderkey
    FROM lineitem
    GROUP BY l_orderkey
    HAVING SUM(l_quantity) > 300
  )
  AND c_custkey = o_custkey
  AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
