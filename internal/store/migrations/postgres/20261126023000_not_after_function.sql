-- gatehouse_not_after raises query_canceled when the server's clock is past
-- p_not_after. A single write sent with its request's deadline is followed by
-- a call of this function in the same implicit transaction: a write that the
-- server runs only after its caller gave up (a frozen server, a long lock
-- wait) is rolled back instead of committed.
CREATE FUNCTION gatehouse_not_after(p_not_after timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF clock_timestamp() > p_not_after THEN
    RAISE EXCEPTION 'gatehouse: the request''s deadline passed before its write committed'
      USING ERRCODE = 'query_canceled';
  END IF;
END
$$;
