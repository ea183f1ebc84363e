-- Modify "webhook_endpoints" table
ALTER TABLE "webhook_endpoints" ADD COLUMN "retry_schedule" jsonb NULL, ADD COLUMN "headers" bytea NULL, ADD COLUMN "client_certificate" text NULL, ADD COLUMN "client_key" bytea NULL;
