// Package playground serves the GraphiQL Playground of the admin
// listener: its page (with a bar for the API key and tabs of ready
// queries), its icon, and the vendored GraphiQL and React files it loads
// (see README.md), so that it works with no access to a CDN.
package playground
