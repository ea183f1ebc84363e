-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_webhook_deliveries" table
CREATE TABLE `new_webhook_deliveries` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `event_id` text NOT NULL, `event_type` text NOT NULL, `biz_data` text NOT NULL, `callback_url` text NOT NULL, `status` text NOT NULL DEFAULT ('PENDING'), `retry_count` integer NOT NULL DEFAULT (0), `attempt_count` integer NOT NULL DEFAULT (0), `max_retry` integer NOT NULL DEFAULT (5), `next_attempt_at` datetime NOT NULL, `lease_until` datetime NULL, `last_error` text NULL, `create_time` datetime NOT NULL, `update_time` datetime NOT NULL, `traceparent` text NULL, `tracestate` text NULL, `app_id` integer NOT NULL, `endpoint_id` integer NULL, CONSTRAINT `webhook_deliveries_partner_apps_webhook_deliveries` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION, CONSTRAINT `webhook_deliveries_webhook_endpoints_deliveries` FOREIGN KEY (`endpoint_id`) REFERENCES `webhook_endpoints` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "webhook_deliveries" to new temporary table "new_webhook_deliveries"
INSERT INTO `new_webhook_deliveries` (`id`, `event_id`, `event_type`, `biz_data`, `callback_url`, `status`, `retry_count`, `attempt_count`, `max_retry`, `next_attempt_at`, `lease_until`, `last_error`, `create_time`, `update_time`, `traceparent`, `tracestate`, `app_id`) SELECT `id`, `event_id`, `event_type`, `biz_data`, `callback_url`, `status`, `retry_count`, `attempt_count`, `max_retry`, `next_attempt_at`, `lease_until`, `last_error`, `create_time`, `update_time`, `traceparent`, `tracestate`, `app_id` FROM `webhook_deliveries`;
-- Drop "webhook_deliveries" table after copying rows
DROP TABLE `webhook_deliveries`;
-- Rename temporary table "new_webhook_deliveries" to "webhook_deliveries"
ALTER TABLE `new_webhook_deliveries` RENAME TO `webhook_deliveries`;
-- Create index "webhookdelivery_app_id_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_app_id_status_next_attempt_at` ON `webhook_deliveries` (`app_id`, `status`, `next_attempt_at`);
-- Create index "webhookdelivery_leased_by_app" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_leased_by_app` ON `webhook_deliveries` (`app_id`, `lease_until`) WHERE lease_until IS NOT NULL;
-- Create index "webhookdelivery_endpoint_id_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_endpoint_id_status_next_attempt_at` ON `webhook_deliveries` (`endpoint_id`, `status`, `next_attempt_at`);
-- Create index "webhookdelivery_leased_by_endpoint" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_leased_by_endpoint` ON `webhook_deliveries` (`endpoint_id`, `lease_until`) WHERE lease_until IS NOT NULL;
-- Create index "webhookdelivery_event_id_endpoint_id" to table: "webhook_deliveries"
CREATE UNIQUE INDEX `webhookdelivery_event_id_endpoint_id` ON `webhook_deliveries` (`event_id`, `endpoint_id`);
-- Create index "webhookdelivery_update_time_status" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_update_time_status` ON `webhook_deliveries` (`update_time`, `status`);
-- Create "webhook_endpoints" table
CREATE TABLE `webhook_endpoints` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `url` text NOT NULL, `description` text NOT NULL DEFAULT (''), `event_types` json NULL, `enabled` bool NOT NULL DEFAULT (true), `secret` blob NOT NULL, `previous_secret` blob NULL, `previous_secret_expires_at` datetime NULL, `rate_limit` integer NULL, `create_time` datetime NOT NULL, `update_time` datetime NOT NULL, `app_id` integer NOT NULL, CONSTRAINT `webhook_endpoints_partner_apps_webhook_endpoints` FOREIGN KEY (`app_id`) REFERENCES `partner_apps` (`id`) ON DELETE NO ACTION);
-- Create index "webhookendpoint_app_id_enabled" to table: "webhook_endpoints"
CREATE INDEX `webhookendpoint_app_id_enabled` ON `webhook_endpoints` (`app_id`, `enabled`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
-- Data: each app's callback URL and webhook secrets (the previous one with
-- its overlap, while it runs) become its first endpoint, receiving every
-- event type; an app without a callback URL that still has deliveries gets
-- a disabled endpoint at the URL of its latest one, so that its waiting
-- deliveries are held rather than lost (enable it to send them). One
-- statement, in the apps' order, so that endpoint ids follow app ids.
INSERT INTO `webhook_endpoints` (`app_id`, `url`, `description`, `enabled`, `secret`, `previous_secret`, `previous_secret_expires_at`, `create_time`, `update_time`)
SELECT a.`id`,
  CASE WHEN COALESCE(a.`callback_url`, '') <> '' THEN a.`callback_url`
    ELSE (SELECT d.`callback_url` FROM `webhook_deliveries` d WHERE d.`app_id` = a.`id` ORDER BY d.`id` DESC LIMIT 1) END,
  CASE WHEN COALESCE(a.`callback_url`, '') <> '' THEN ''
    ELSE 'made from the deliveries of an app without callback URL when endpoints arrived' END,
  COALESCE(a.`callback_url`, '') <> '',
  CASE WHEN length(a.`webhook_secret`) > 0 THEN a.`webhook_secret` ELSE X'2d' END,
  CASE WHEN COALESCE(a.`callback_url`, '') <> '' AND a.`previous_webhook_secret_expires_at` IS NOT NULL THEN a.`previous_webhook_secret` END,
  CASE WHEN COALESCE(a.`callback_url`, '') <> '' AND a.`previous_webhook_secret` IS NOT NULL THEN a.`previous_webhook_secret_expires_at` END,
  strftime('%Y-%m-%d %H:%M:%f+00:00', 'now'), strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')
FROM `partner_apps` a
WHERE COALESCE(a.`callback_url`, '') <> '' OR EXISTS (SELECT 1 FROM `webhook_deliveries` d WHERE d.`app_id` = a.`id`)
ORDER BY a.`id`;
-- Data: every delivery (with its attempts) belongs to its app's endpoint.
UPDATE `webhook_deliveries` SET `endpoint_id` = (SELECT e.`id` FROM `webhook_endpoints` e WHERE e.`app_id` = `webhook_deliveries`.`app_id`)
WHERE `endpoint_id` IS NULL;
