-- Create index "webhookdelivery_log" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_log" ON "webhook_deliveries" ("create_time", "id");
-- Create index "webhookdelivery_log_by_app" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_log_by_app" ON "webhook_deliveries" ("app_id", "create_time", "id");
