-- Create function "gatehouse_deduct_batch": several stock deductions, each with its idempotency
-- record, in one statement and one transaction (one commit for all). internal/inventory calls it for
-- the deductions that queued while an earlier one ran; docs/inventory.md explains the rules it keeps.
-- Element i of every array is deduction i; rows come back with ord = i.
CREATE FUNCTION "gatehouse_deduct_batch" (
  p_biz_nos text[], p_app_keys text[], p_api_paths text[], p_request_params text[],
  p_sku_ids bigint[], p_quantities bigint[], p_result_prefixes text[], p_now timestamptz, p_not_after timestamptz
) RETURNS TABLE (
  ord integer, fresh boolean, app_key text, request_params text, response_result text, status bigint,
  remaining_stock bigint, sku_exists boolean
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  n integer := cardinality(p_biz_nos);
  i integer;
  v_fresh boolean[] := array_fill(false, ARRAY[n]);
  v_remaining bigint;
BEGIN
  -- 1. The records, in biz_no order: every batch takes these locks in one order. An insert that meets
  -- another transaction's uncommitted record waits for it to end, then this element is its repeat.
  FOR i IN SELECT u.o FROM unnest(p_biz_nos) WITH ORDINALITY AS u(b, o) ORDER BY u.b COLLATE "C" LOOP
    INSERT INTO idempotency_records AS r (biz_no, app_key, api_path, request_params, status, create_time, update_time)
    VALUES (p_biz_nos[i], p_app_keys[i], p_api_paths[i], p_request_params[i], 0, p_now, p_now)
    ON CONFLICT (biz_no) DO NOTHING;
    IF FOUND THEN
      v_fresh[i] := true;
    ELSE
      -- A repeat: the committed record. No row if it vanished since (its writer rolled back in
      -- between): the caller starts that element over.
      RETURN QUERY SELECT i, false, r.app_key::text, r.request_params, r.response_result, r.status, NULL::bigint, NULL::boolean
        FROM idempotency_records AS r WHERE r.biz_no = p_biz_nos[i];
    END IF;
  END LOOP;
  -- 2. The deductions, in the order given (the caller sorts by SKU, then arrival): the SKU rows are
  -- locked in one order too, so batches never wait for each other in a cycle.
  FOR i IN 1..n LOOP
    CONTINUE WHEN NOT v_fresh[i];
    v_remaining := NULL;
    UPDATE skus SET stock = stock - p_quantities[i], update_time = p_now
     WHERE id = p_sku_ids[i] AND stock >= p_quantities[i]
    RETURNING stock INTO v_remaining;
    IF v_remaining IS NOT NULL THEN
      UPDATE idempotency_records SET status = 1, response_result = p_result_prefixes[i] || v_remaining::text || '}', update_time = p_now
       WHERE biz_no = p_biz_nos[i];
      RETURN QUERY SELECT i, true, NULL::text, NULL::text, NULL::text, 1::bigint, v_remaining, NULL::boolean;
    ELSE
      UPDATE idempotency_records SET status = 2, update_time = p_now WHERE biz_no = p_biz_nos[i];
      RETURN QUERY SELECT i, true, NULL::text, NULL::text, NULL::text, 2::bigint, NULL::bigint,
        EXISTS (SELECT 1 FROM skus WHERE id = p_sku_ids[i]);
    END IF;
  END LOOP;
  -- As in gatehouse_deduct: past the earliest deadline of the batch, nothing commits.
  IF clock_timestamp() > p_not_after THEN
    RAISE EXCEPTION 'gatehouse_deduct_batch: a request''s deadline passed before the deductions committed'
      USING ERRCODE = 'query_canceled';
  END IF;
END
$$;
