-- Create function "gatehouse_deduct": one stock deduction with its idempotency record, in one statement
-- (one round trip). internal/inventory calls it; docs/inventory.md explains the rules it keeps.
CREATE FUNCTION "gatehouse_deduct" (
  p_biz_no text, p_app_key text, p_api_path text, p_request_params text,
  p_sku_id bigint, p_quantity bigint, p_now timestamptz, p_result_prefix text, p_not_after timestamptz
) RETURNS TABLE (
  fresh boolean, app_key text, request_params text, response_result text, status bigint,
  remaining_stock bigint, sku_exists boolean
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_remaining bigint;
  v_sku_exists boolean;
BEGIN
  -- The record first. An insert that meets another transaction's uncommitted record with this
  -- biz_no waits for it to end: a concurrent request waits for the first, then answers as its repeat.
  INSERT INTO idempotency_records AS r (biz_no, app_key, api_path, request_params, status, create_time, update_time)
  VALUES (p_biz_no, p_app_key, p_api_path, p_request_params, 0, p_now, p_now)
  ON CONFLICT (biz_no) DO NOTHING;
  IF NOT FOUND THEN
    -- A repeat: the committed record (read committed, a fresh snapshot per statement). No row if it
    -- vanished since (its writer rolled back in between): the caller starts over.
    RETURN QUERY SELECT false, r.app_key::text, r.request_params, r.response_result, r.status, NULL::bigint, NULL::boolean
      FROM idempotency_records AS r WHERE r.biz_no = p_biz_no;
    RETURN;
  END IF;
  -- The only statement that lowers stock; a concurrent update of the row is waited for and the
  -- condition checked again against its result, so stock never goes negative.
  UPDATE skus SET stock = stock - p_quantity, update_time = p_now
   WHERE id = p_sku_id AND stock >= p_quantity
  RETURNING stock INTO v_remaining;
  IF v_remaining IS NOT NULL THEN
    UPDATE idempotency_records SET status = 1, response_result = p_result_prefix || v_remaining::text || '}', update_time = p_now
     WHERE biz_no = p_biz_no;
  ELSE
    v_sku_exists := EXISTS (SELECT 1 FROM skus WHERE id = p_sku_id);
    UPDATE idempotency_records SET status = 2, update_time = p_now WHERE biz_no = p_biz_no;
  END IF;
  -- A statement that reached the server after its caller gave up (the server did not answer, or a
  -- lock was held past the deadline) must not commit: the caller was told that nothing happened.
  IF clock_timestamp() > p_not_after THEN
    RAISE EXCEPTION 'gatehouse_deduct: the request''s deadline passed before the deduction committed'
      USING ERRCODE = 'query_canceled';
  END IF;
  RETURN QUERY SELECT true, NULL::text, NULL::text, NULL::text,
    (CASE WHEN v_remaining IS NULL THEN 2 ELSE 1 END)::bigint, v_remaining, v_sku_exists;
END
$$;
