-- Modify "auth_codes" table
ALTER TABLE "auth_codes" ADD COLUMN "user_version" bigint NOT NULL DEFAULT 0;
-- Modify "oauth_tokens" table
ALTER TABLE "oauth_tokens" ADD COLUMN "user_version" bigint NOT NULL DEFAULT 0;
-- Modify "token_revocations" table
ALTER TABLE "token_revocations" ADD COLUMN "version" bigint NOT NULL DEFAULT 0;
-- Modify "users" table
ALTER TABLE "users" ADD COLUMN "security_version" bigint NOT NULL DEFAULT 0;
