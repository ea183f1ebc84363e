// Package sender makes the HTTP attempts of webhook deliveries: the
// message and its Standard Webhooks signature (https://www.standardwebhooks.com),
// the URL guard that keeps a partner from making gatehouse call its own
// network (SSRF), the egress settings of an endpoint (proxy, custom
// headers, client certificate), and the rule that decides what an
// attempt's outcome does to its delivery (Decide). It knows nothing of
// the database: the dispatcher claims deliveries and records outcomes.
package sender
