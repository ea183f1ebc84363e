-- Modify "webhook_endpoints" table
ALTER TABLE "webhook_endpoints" ADD COLUMN "auto_disabled_at" timestamptz NULL;
