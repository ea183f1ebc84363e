-- Drop index "webhookdelivery_status_update_time" from table: "webhook_deliveries"
DROP INDEX "webhookdelivery_status_update_time";
-- Create index "webhookdelivery_update_time_status" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_update_time_status" ON "webhook_deliveries" ("update_time", "status");
