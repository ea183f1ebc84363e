// Package publish is the publish API of the admin listener (POST
// /api/events and /api/events/batch, PUBLISHER keys): the company's
// services publish webhook events through it, one or a batch at a time.
// The rules live in internal/webhook; docs/openapi-admin.yaml describes
// it and publishclient is its Go client.
package publish
