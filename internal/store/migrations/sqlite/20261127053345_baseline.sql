-- Create "api_keys" table
CREATE TABLE `api_keys` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `name` text NOT NULL, `prefix` text NOT NULL, `key_hash` text NOT NULL, `status` integer NOT NULL DEFAULT (1), `role` text NOT NULL DEFAULT ('ADMIN'), `usage_count` integer NOT NULL DEFAULT (0), `last_used_at` datetime NULL, `create_time` datetime NOT NULL);
-- Create index "api_keys_key_hash_key" to table: "api_keys"
CREATE UNIQUE INDEX `api_keys_key_hash_key` ON `api_keys` (`key_hash`);
-- Create "api_usages" table
CREATE TABLE `api_usages` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `version` text NOT NULL, `day` text NOT NULL, `count` integer NOT NULL DEFAULT (0), `app_id` integer NOT NULL, CONSTRAINT `api_usages_partner_apps_usages` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION);
-- Create index "apiusage_app_id_version_day" to table: "api_usages"
CREATE UNIQUE INDEX `apiusage_app_id_version_day` ON `api_usages` (`app_id`, `version`, `day`);
-- Create "audit_events" table
CREATE TABLE `audit_events` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `time` datetime NOT NULL, `api_key_id` integer NOT NULL, `api_key_name` text NOT NULL, `mutation` text NOT NULL, `target_type` text NULL, `target_id` text NULL, `outcome` text NOT NULL, `error_code` text NULL, `request_id` text NULL);
-- Create index "auditevent_time" to table: "audit_events"
CREATE INDEX `auditevent_time` ON `audit_events` (`time`);
-- Create index "auditevent_api_key_id_time" to table: "audit_events"
CREATE INDEX `auditevent_api_key_id_time` ON `audit_events` (`api_key_id`, `time`);
-- Create "auth_codes" table
CREATE TABLE `auth_codes` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `code_hash` text NOT NULL, `scope` text NOT NULL DEFAULT (''), `redirect_uri` text NOT NULL, `code_challenge` text NULL, `code_challenge_method` text NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, `create_time` datetime NOT NULL, `app_id` integer NOT NULL, `user_id` integer NOT NULL, CONSTRAINT `auth_codes_partner_apps_auth_codes` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION, CONSTRAINT `auth_codes_users_auth_codes` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Create index "auth_codes_code_hash_key" to table: "auth_codes"
CREATE UNIQUE INDEX `auth_codes_code_hash_key` ON `auth_codes` (`code_hash`);
-- Create "delivery_attempts" table
CREATE TABLE `delivery_attempts` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `attempt_no` integer NOT NULL, `request_headers` text NOT NULL, `request_body` text NOT NULL, `response_status` integer NULL, `response_headers` text NULL, `response_body` text NULL, `error` text NULL, `duration_ms` integer NOT NULL, `started_at` datetime NOT NULL, `delivery_id` integer NOT NULL, CONSTRAINT `delivery_attempts_webhook_deliveries_attempts` FOREIGN KEY (`delivery_id`) REFERENCES `webhook_deliveries` (`id`) ON DELETE NO ACTION);
-- Create index "deliveryattempt_delivery_id_attempt_no" to table: "delivery_attempts"
CREATE UNIQUE INDEX `deliveryattempt_delivery_id_attempt_no` ON `delivery_attempts` (`delivery_id`, `attempt_no`);
-- Create "idempotency_records" table
CREATE TABLE `idempotency_records` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `biz_no` text NOT NULL, `app_key` text NOT NULL, `api_path` text NOT NULL, `request_params` text NOT NULL DEFAULT (''), `response_result` text NULL, `status` integer NOT NULL DEFAULT (0), `create_time` datetime NOT NULL, `update_time` datetime NOT NULL);
-- Create index "idempotency_records_biz_no_key" to table: "idempotency_records"
CREATE UNIQUE INDEX `idempotency_records_biz_no_key` ON `idempotency_records` (`biz_no`);
-- Create "oauth_tokens" table
CREATE TABLE `oauth_tokens` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `access_hash` text NOT NULL, `refresh_hash` text NOT NULL, `auth_code_id` integer NULL, `scope` text NOT NULL DEFAULT (''), `access_expires_at` datetime NOT NULL, `refresh_expires_at` datetime NOT NULL, `revoked_at` datetime NULL, `create_time` datetime NOT NULL, `app_id` integer NOT NULL, `user_id` integer NOT NULL, CONSTRAINT `oauth_tokens_partner_apps_oauth_tokens` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION, CONSTRAINT `oauth_tokens_users_oauth_tokens` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Create index "oauth_tokens_access_hash_key" to table: "oauth_tokens"
CREATE UNIQUE INDEX `oauth_tokens_access_hash_key` ON `oauth_tokens` (`access_hash`);
-- Create index "oauth_tokens_refresh_hash_key" to table: "oauth_tokens"
CREATE UNIQUE INDEX `oauth_tokens_refresh_hash_key` ON `oauth_tokens` (`refresh_hash`);
-- Create "orders" table
CREATE TABLE `orders` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `order_no` text NOT NULL, `amount` integer NOT NULL, `status` text NOT NULL DEFAULT ('CREATED'), `customer_name` text NULL, `customer_phone` text NULL, `customer_email` text NULL, `create_time` datetime NOT NULL, `pay_time` datetime NULL, `app_id` integer NOT NULL, CONSTRAINT `orders_partner_apps_orders` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION);
-- Create index "orders_order_no_key" to table: "orders"
CREATE UNIQUE INDEX `orders_order_no_key` ON `orders` (`order_no`);
-- Create index "order_app_id" to table: "orders"
CREATE INDEX `order_app_id` ON `orders` (`app_id`);
-- Create "partner_apps" table
CREATE TABLE `partner_apps` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `app_name` text NOT NULL, `app_key` text NOT NULL, `secret` blob NOT NULL, `previous_secret` blob NULL, `previous_secret_expires_at` datetime NULL, `status` integer NOT NULL DEFAULT (1), `rate_limit` integer NOT NULL DEFAULT (1000), `expire_date` datetime NULL, `callback_url` text NULL, `webhook_secret` blob NULL, `previous_webhook_secret` blob NULL, `previous_webhook_secret_expires_at` datetime NULL, `redirect_uris` json NULL, `scopes` json NULL, `create_time` datetime NOT NULL, `update_time` datetime NOT NULL);
-- Create index "partner_apps_app_key_key" to table: "partner_apps"
CREATE UNIQUE INDEX `partner_apps_app_key_key` ON `partner_apps` (`app_key`);
-- Create "skus" table
CREATE TABLE `skus` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `name` text NOT NULL, `stock` integer NOT NULL, `update_time` datetime NOT NULL);
-- Create "tickets" table
CREATE TABLE `tickets` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `title` text NOT NULL, `status` text NOT NULL DEFAULT ('OPEN'), `created_at` datetime NOT NULL);
-- Create index "ticket_created_at_id" to table: "tickets"
CREATE INDEX `ticket_created_at_id` ON `tickets` (`created_at`, `id`);
-- Create index "ticket_status_created_at_id" to table: "tickets"
CREATE INDEX `ticket_status_created_at_id` ON `tickets` (`status`, `created_at`, `id`);
-- Create "token_revocations" table
CREATE TABLE `token_revocations` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `kind` text NOT NULL, `subject` text NOT NULL, `revoked_at` datetime NOT NULL, `expires_at` datetime NOT NULL);
-- Create index "tokenrevocation_expires_at" to table: "token_revocations"
CREATE INDEX `tokenrevocation_expires_at` ON `token_revocations` (`expires_at`);
-- Create "users" table
CREATE TABLE `users` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `username` text NOT NULL, `password_hash` text NOT NULL, `roles` json NULL, `status` integer NOT NULL DEFAULT (1), `tokens_revoked_at` datetime NULL, `create_time` datetime NOT NULL);
-- Create index "users_username_key" to table: "users"
CREATE UNIQUE INDEX `users_username_key` ON `users` (`username`);
-- Create "webhook_deliveries" table
CREATE TABLE `webhook_deliveries` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `event_id` text NOT NULL, `event_type` text NOT NULL, `biz_data` text NOT NULL, `callback_url` text NOT NULL, `status` text NOT NULL DEFAULT ('PENDING'), `retry_count` integer NOT NULL DEFAULT (0), `attempt_count` integer NOT NULL DEFAULT (0), `max_retry` integer NOT NULL DEFAULT (5), `next_attempt_at` datetime NOT NULL, `lease_until` datetime NULL, `last_error` text NULL, `create_time` datetime NOT NULL, `update_time` datetime NOT NULL, `traceparent` text NULL, `tracestate` text NULL, `app_id` integer NOT NULL, CONSTRAINT `webhook_deliveries_partner_apps_webhook_deliveries` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION);
-- Create index "webhook_deliveries_event_id_key" to table: "webhook_deliveries"
CREATE UNIQUE INDEX `webhook_deliveries_event_id_key` ON `webhook_deliveries` (`event_id`);
-- Create index "webhookdelivery_app_id_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_app_id_status_next_attempt_at` ON `webhook_deliveries` (`app_id`, `status`, `next_attempt_at`);
-- Create index "webhookdelivery_leased_by_app" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_leased_by_app` ON `webhook_deliveries` (`app_id`, `lease_until`) WHERE lease_until IS NOT NULL;
-- Create index "webhookdelivery_update_time_status" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_update_time_status` ON `webhook_deliveries` (`update_time`, `status`);
-- Create "webhook_event_types" table
CREATE TABLE `webhook_event_types` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `name` text NOT NULL, `description` text NOT NULL, `schema` text NOT NULL, `example` text NULL, `create_time` datetime NOT NULL);
-- Create index "webhook_event_types_name_key" to table: "webhook_event_types"
CREATE UNIQUE INDEX `webhook_event_types_name_key` ON `webhook_event_types` (`name`);
-- Create "webhook_publications" table
CREATE TABLE `webhook_publications` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `app_id` integer NOT NULL, `idempotency_key` text NOT NULL, `event_id` text NOT NULL, `event_type` text NOT NULL, `biz_data` text NOT NULL, `create_time` datetime NOT NULL);
-- Create index "webhookpublication_app_id_idempotency_key" to table: "webhook_publications"
CREATE UNIQUE INDEX `webhookpublication_app_id_idempotency_key` ON `webhook_publications` (`app_id`, `idempotency_key`);
-- Create index "webhookpublication_create_time" to table: "webhook_publications"
CREATE INDEX `webhookpublication_create_time` ON `webhook_publications` (`create_time`);
