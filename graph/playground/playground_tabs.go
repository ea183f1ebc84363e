package playground

// playgroundTab is a ready query the Playground opens with.
type playgroundTab struct {
	Query     string `json:"query"`
	Variables string `json:"variables,omitempty"`
}

// playgroundTabs are the everyday tasks, one tab each (a test checks every
// one against the schema and runs its queries). GraphiQL names a tab
// after its first operation.
var playgroundTabs = []playgroundTab{
	{Query: `# Webhook deliveries that gave up (6 attempts), newest first, with every
# attempt's request and response. JSON text is also shown as a value
# (bizDataJSON, requestBodyJSON, responseBodyJSON). Resend in the next tab.
query FailedDeliveries {
  webhookDeliveries(first: 20, where: {status: FAILED}, orderBy: {field: CREATE_TIME, direction: DESC}) {
    totalCount
    edges {
      node {
        id eventType status retryCount lastError createTime callbackURL
        app { id appName appKey }
        bizDataJSON
        attempts(first: 6, orderBy: {field: ATTEMPT_NO, direction: ASC}) {
          edges { node { attemptNo startedAt durationMs responseStatus error requestHeadersJSON requestBodyJSON responseBody responseBodyJSON } }
        }
      }
    }
  }
}
`},
	{Query: `# Resend one delivery: back to PENDING with retryCount 0, its attempts
# kept. Put its id (from the FailedDeliveries tab) in Variables below
# (0 is no delivery: nothing is resent until you do), then run
# ResendDelivery. ResendFailedOfApp re-queues the FAILED deliveries of
# one app (its id in appID) and says how many.
mutation ResendDelivery($id: ID!) {
  resendWebhookDelivery(id: $id) { id status retryCount nextAttemptAt }
}

mutation ResendFailedOfApp($appID: ID!) {
  resendFailedWebhookDeliveries(appID: $appID)
}
`, Variables: `{"id": "0", "appID": "0"}`},
	{Query: `# The webhook endpoints of an app (appID in Variables; ListApps in the
# RotateAppSecret tab shows the ids): each one's URL, event filter (empty:
# every type), whether it is enabled (a disabled endpoint's deliveries are
# held), and its own signing-secret overlap.
query EndpointsOfApp($appID: ID!) {
  partnerApps(where: {id: $appID}) {
    edges { node { id appKey appName
      webhookEndpoints { id url description eventTypes enabled rateLimit previousSecretExpiresAt createTime updateTime }
    } }
  }
}
`, Variables: `{"appID": "1"}`},
	{Query: `# After an endpoint's outage: its FAILED deliveries created since a
# time, then RecoverEndpoint re-queues exactly those (each gets a fresh
# schedule of 6 attempts). Set endpointID (EndpointsOfApp shows them; 0 is
# no endpoint, so nothing is re-queued until you set it) and since.
query FailedSince($endpointID: ID!, $since: Time!) {
  webhookDeliveries(first: 50, where: {endpointID: $endpointID, status: FAILED, createTimeGTE: $since},
                    orderBy: {field: CREATE_TIME, direction: DESC}) {
    totalCount
    edges { node { id eventID eventType createTime attemptCount lastError callbackURL } }
  }
}

mutation RecoverEndpoint($endpointID: ID!, $since: Time!) {
  resendFailedWebhookDeliveries(endpointID: $endpointID, since: $since)
}
`, Variables: `{"endpointID": "0", "since": "2026-11-01T00:00:00Z"}`},
	{Query: `# Rotate a secret. The new secret is shown here once; the old one keeps
# working for 24 h while the partner switches. RotateAppSecret: the app's
# secret (signed API calls); RotateEndpointSecret: one webhook endpoint's
# signing secret (EndpointsOfApp shows the endpoints). If the old one
# leaked, end its overlap at once, on every replica within a second:
# EndOverlap for the app secret, EndEndpointOverlap for an endpoint's.
# Set appID or endpointID in Variables (ListApps shows the apps; 0 is no
# app or endpoint, so nothing rotates until you set it).
mutation RotateAppSecret($appID: ID!) {
  rotatePartnerAppSecret(id: $appID) { appSecret app { id appKey previousSecretExpiresAt } }
}

mutation RotateEndpointSecret($endpointID: ID!) {
  rotateWebhookEndpointSecret(id: $endpointID) { secret endpoint { id url previousSecretExpiresAt } }
}

mutation EndOverlap($appID: ID!) {
  endSecretOverlap(id: $appID) { id appKey previousSecretExpiresAt }
}

mutation EndEndpointOverlap($endpointID: ID!) {
  endWebhookEndpointSecretOverlap(id: $endpointID) { id url previousSecretExpiresAt }
}

query ListApps {
  partnerApps(first: 50, orderBy: {field: APP_NAME, direction: ASC}) {
    edges { node { id appName appKey status previousSecretExpiresAt webhookEndpoints { id url enabled } } }
  }
}
`, Variables: `{"appID": "0", "endpointID": "0"}`},
	{Query: `# Publish a test event. EventTypes lists the catalogue (built-in and
# custom types, each with its bizData schema and an example).
# SendExample sends a type's example to an app (appID in Variables; 0 is
# no app, so nothing is sent until you set it). A custom type is declared
# once with DeclareType (set name, e.g. "invoice.issued"; a type never
# changes), then other services publish it with PublishEvent: bizData is
# checked against the schema (VALIDATION_FAILED with extensions.path), and
# a repeat of the idempotency key within 24 h sends nothing new.
query EventTypes {
  webhookEventTypes { name description builtIn schema example }
}

mutation SendExample($appID: ID!, $eventType: String) {
  sendTestWebhook(appID: $appID, eventType: $eventType) { id eventID eventType status bizDataJSON }
}

mutation DeclareType($name: String!, $schema: JSON!) {
  createWebhookEventType(name: $name, description: "An invoice was issued.", schema: $schema) { name schema example }
}

mutation PublishEvent($appID: ID!, $bizData: JSON!, $key: String) {
  publishWebhookEvent(appID: $appID, eventType: "invoice.issued", bizData: $bizData, idempotencyKey: $key) {
    eventID replayed deliveries { id status }
  }
}
`, Variables: `{
  "appID": "0",
  "eventType": "order.paid",
  "name": "",
  "schema": {"type": "object", "required": ["invoice_no"], "properties": {"invoice_no": {"type": "string"}}},
  "bizData": {"invoice_no": "INV-1"},
  "key": "invoice-INV-1"
}`},
	{Query: `# Calls per partner API version: each version's lifecycle (deprecation,
# sunset) and calls over the last 30 days, then the daily counts per app.
query UsagePerVersion {
  apiVersions { name deprecation sunset retired callCountLast30Days }
  apiUsages(first: 30, orderBy: {field: DAY, direction: DESC}) {
    edges { node { day version callCount app { appKey appName } } }
  }
}
`},
	{Query: `# Who changed what: every mutation, successful or refused, newest first.
# Filter with where, e.g. {outcomeNEQ: SUCCESS}, {errorCode: "FORBIDDEN"},
# {apiKeyName: "ops"} or {mutation: "rotatePartnerAppSecret"}.
query AuditLog {
  auditEvents(first: 50, orderBy: {field: TIME, direction: DESC}) {
    totalCount
    edges { node { time apiKeyID apiKeyName mutation targetType targetID outcome errorCode requestID } }
  }
}
`},
	{Query: `# A key for dashboards and for people who look but do not change
# anything: it may run every query, and every mutation is refused with
# FORBIDDEN. The key is shown here once. ListKeys shows every key.
mutation CreateReadOnlyKey {
  createAPIKey(name: "read-only dashboard", role: READ_ONLY) { key apiKey { id name role prefix } }
}

query ListKeys {
  apiKeys(first: 50, orderBy: {field: CREATE_TIME, direction: DESC}) {
    edges { node { id name role prefix status requestCount lastUsedAt createTime } }
  }
}
`},
}

// TabQueries returns the query of each ready tab, in order (the schema's
// tests check them against it).
func TabQueries() []string {
	out := make([]string, len(playgroundTabs))
	for i, t := range playgroundTabs {
		out[i] = t.Query
	}
	return out
}
