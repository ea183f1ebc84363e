-- Modify "webhook_deliveries" table
ALTER TABLE "webhook_deliveries" ADD COLUMN "traceparent" character varying NULL, ADD COLUMN "tracestate" character varying NULL;
