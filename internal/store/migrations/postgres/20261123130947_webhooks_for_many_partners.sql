-- Drop index "webhookdelivery_app_id_status" from table: "webhook_deliveries"
DROP INDEX "webhookdelivery_app_id_status";
-- Drop index "webhookdelivery_status_next_attempt_at" from table: "webhook_deliveries"
DROP INDEX "webhookdelivery_status_next_attempt_at";
-- Modify "webhook_deliveries" table
ALTER TABLE "webhook_deliveries" ADD COLUMN "attempt_count" bigint NOT NULL DEFAULT 0;
-- Backfill: the attempts each delivery already has (the next one is numbered after them)
UPDATE "webhook_deliveries" d SET "attempt_count" = a.n FROM (SELECT "delivery_id", count(*) AS n FROM "delivery_attempts" GROUP BY "delivery_id") a WHERE a."delivery_id" = d."id";
-- Create index "webhookdelivery_app_id_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_app_id_status_next_attempt_at" ON "webhook_deliveries" ("app_id", "status", "next_attempt_at");
-- Create index "webhookdelivery_leased_by_app" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_leased_by_app" ON "webhook_deliveries" ("app_id", "lease_until") WHERE (lease_until IS NOT NULL);
-- Create index "webhookdelivery_status_update_time" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_status_update_time" ON "webhook_deliveries" ("status", "update_time");
