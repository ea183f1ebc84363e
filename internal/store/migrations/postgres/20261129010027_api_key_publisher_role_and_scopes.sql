-- Modify "api_keys" table
ALTER TABLE "api_keys" ADD COLUMN "scopes" jsonb NULL;
