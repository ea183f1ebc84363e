// Package rest is the public listener's front door, one sub-package per
// part, each a resource with a Routes() chi.Router that internal/app
// mounts:
//
//   - partnerapi: the signed partner API (/api/v1, v2, v3: order queries,
//     stock deductions, the partner's own webhooks and usage), its
//     envelope and its one code → HTTP table;
//   - signin: user login and tokens, the OAuth 2.0 routes and their
//     browser pages;
//   - tickets: the ticket service (/api/tickets);
//   - publish: the publish API of the admin listener (/api/events).
//
// This package holds what the parts share at the door: MountWhole for
// routers of whole paths, and WriteOverloaded for a request refused by
// load shedding. partnerclient and publishclient are the Go clients of
// the partner and publish APIs.
package rest
