-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Add column "scopes" to table: "api_keys"
ALTER TABLE `api_keys` ADD COLUMN `scopes` json NULL;
-- Create "new_auth_codes" table
CREATE TABLE `new_auth_codes` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `code_hash` text NOT NULL, `scope` text NOT NULL DEFAULT (''), `redirect_uri` text NOT NULL, `code_challenge` text NULL, `code_challenge_method` text NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, `user_version` integer NOT NULL DEFAULT (0), `create_time` datetime NOT NULL, `app_id` integer NOT NULL, `user_id` integer NOT NULL, CONSTRAINT `auth_codes_partner_apps_auth_codes` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION, CONSTRAINT `auth_codes_users_auth_codes` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Copy rows from old table "auth_codes" to new temporary table "new_auth_codes"
INSERT INTO `new_auth_codes` (`id`, `code_hash`, `scope`, `redirect_uri`, `code_challenge`, `code_challenge_method`, `expires_at`, `used_at`, `create_time`, `app_id`, `user_id`) SELECT `id`, `code_hash`, `scope`, `redirect_uri`, `code_challenge`, `code_challenge_method`, `expires_at`, `used_at`, `create_time`, `app_id`, `user_id` FROM `auth_codes`;
-- Drop "auth_codes" table after copying rows
DROP TABLE `auth_codes`;
-- Rename temporary table "new_auth_codes" to "auth_codes"
ALTER TABLE `new_auth_codes` RENAME TO `auth_codes`;
-- Create index "auth_codes_code_hash_key" to table: "auth_codes"
CREATE UNIQUE INDEX `auth_codes_code_hash_key` ON `auth_codes` (`code_hash`);
-- Create "new_oauth_tokens" table
CREATE TABLE `new_oauth_tokens` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `access_hash` text NOT NULL, `refresh_hash` text NOT NULL, `auth_code_id` integer NULL, `scope` text NOT NULL DEFAULT (''), `access_expires_at` datetime NOT NULL, `refresh_expires_at` datetime NOT NULL, `revoked_at` datetime NULL, `user_version` integer NOT NULL DEFAULT (0), `create_time` datetime NOT NULL, `app_id` integer NOT NULL, `user_id` integer NOT NULL, CONSTRAINT `oauth_tokens_partner_apps_oauth_tokens` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION, CONSTRAINT `oauth_tokens_users_oauth_tokens` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Copy rows from old table "oauth_tokens" to new temporary table "new_oauth_tokens"
INSERT INTO `new_oauth_tokens` (`id`, `access_hash`, `refresh_hash`, `auth_code_id`, `scope`, `access_expires_at`, `refresh_expires_at`, `revoked_at`, `create_time`, `app_id`, `user_id`) SELECT `id`, `access_hash`, `refresh_hash`, `auth_code_id`, `scope`, `access_expires_at`, `refresh_expires_at`, `revoked_at`, `create_time`, `app_id`, `user_id` FROM `oauth_tokens`;
-- Drop "oauth_tokens" table after copying rows
DROP TABLE `oauth_tokens`;
-- Rename temporary table "new_oauth_tokens" to "oauth_tokens"
ALTER TABLE `new_oauth_tokens` RENAME TO `oauth_tokens`;
-- Create index "oauth_tokens_access_hash_key" to table: "oauth_tokens"
CREATE UNIQUE INDEX `oauth_tokens_access_hash_key` ON `oauth_tokens` (`access_hash`);
-- Create index "oauth_tokens_refresh_hash_key" to table: "oauth_tokens"
CREATE UNIQUE INDEX `oauth_tokens_refresh_hash_key` ON `oauth_tokens` (`refresh_hash`);
-- Create "new_token_revocations" table
CREATE TABLE `new_token_revocations` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `kind` text NOT NULL, `subject` text NOT NULL, `revoked_at` datetime NOT NULL, `version` integer NOT NULL DEFAULT (0), `expires_at` datetime NOT NULL);
-- Copy rows from old table "token_revocations" to new temporary table "new_token_revocations"
INSERT INTO `new_token_revocations` (`id`, `kind`, `subject`, `revoked_at`, `expires_at`) SELECT `id`, `kind`, `subject`, `revoked_at`, `expires_at` FROM `token_revocations`;
-- Drop "token_revocations" table after copying rows
DROP TABLE `token_revocations`;
-- Rename temporary table "new_token_revocations" to "token_revocations"
ALTER TABLE `new_token_revocations` RENAME TO `token_revocations`;
-- Create index "tokenrevocation_expires_at" to table: "token_revocations"
CREATE INDEX `tokenrevocation_expires_at` ON `token_revocations` (`expires_at`);
-- Create "new_users" table
CREATE TABLE `new_users` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `username` text NOT NULL, `password_hash` text NOT NULL, `roles` json NULL, `status` integer NOT NULL DEFAULT (1), `tokens_revoked_at` datetime NULL, `security_version` integer NOT NULL DEFAULT (0), `create_time` datetime NOT NULL);
-- Copy rows from old table "users" to new temporary table "new_users"
INSERT INTO `new_users` (`id`, `username`, `password_hash`, `roles`, `status`, `tokens_revoked_at`, `create_time`) SELECT `id`, `username`, `password_hash`, `roles`, `status`, `tokens_revoked_at`, `create_time` FROM `users`;
-- Drop "users" table after copying rows
DROP TABLE `users`;
-- Rename temporary table "new_users" to "users"
ALTER TABLE `new_users` RENAME TO `users`;
-- Create index "users_username_key" to table: "users"
CREATE UNIQUE INDEX `users_username_key` ON `users` (`username`);
-- Create index "webhookdelivery_log" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_log` ON `webhook_deliveries` (`create_time`, `id`);
-- Create index "webhookdelivery_log_by_app" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_log_by_app` ON `webhook_deliveries` (`app_id`, `create_time`, `id`);
-- Add column "auto_disabled_at" to table: "webhook_endpoints"
ALTER TABLE `webhook_endpoints` ADD COLUMN `auto_disabled_at` datetime NULL;
-- Add column "retry_schedule" to table: "webhook_endpoints"
ALTER TABLE `webhook_endpoints` ADD COLUMN `retry_schedule` json NULL;
-- Add column "headers" to table: "webhook_endpoints"
ALTER TABLE `webhook_endpoints` ADD COLUMN `headers` blob NULL;
-- Add column "client_certificate" to table: "webhook_endpoints"
ALTER TABLE `webhook_endpoints` ADD COLUMN `client_certificate` text NULL;
-- Add column "client_key" to table: "webhook_endpoints"
ALTER TABLE `webhook_endpoints` ADD COLUMN `client_key` blob NULL;
-- Create "portal_links" table
CREATE TABLE `portal_links` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `token_hash` text NOT NULL, `app_id` integer NOT NULL, `read_only` bool NOT NULL DEFAULT (false), `expires_at` datetime NOT NULL, `used_at` datetime NULL, `create_time` datetime NOT NULL);
-- Create index "portal_links_token_hash_key" to table: "portal_links"
CREATE UNIQUE INDEX `portal_links_token_hash_key` ON `portal_links` (`token_hash`);
-- Create index "portallink_expires_at" to table: "portal_links"
CREATE INDEX `portallink_expires_at` ON `portal_links` (`expires_at`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
