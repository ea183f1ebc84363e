package graph

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
# kept. Put its id (from the FailedDeliveries tab) in Variables below,
# then run ResendDelivery. ResendAllFailed re-queues every FAILED
# delivery (add appID: "…" for one app's) and says how many.
mutation ResendDelivery($id: ID!) {
  resendWebhookDelivery(id: $id) { id status retryCount nextAttemptAt }
}

mutation ResendAllFailed {
  resendFailedWebhookDeliveries
}
`, Variables: `{"id": "1"}`},
	{Query: `# Rotate an app's secret. The new secret is shown here once; the old one
# keeps verifying for 24 h while the partner switches. If the old one
# leaked, run EndOverlap: the previous app secret and webhook secret stop
# working at once, on every replica within a second.
# Set appID in Variables (ListApps shows the ids).
mutation RotateAppSecret($appID: ID!) {
  rotatePartnerAppSecret(id: $appID) { appSecret app { id appKey previousSecretExpiresAt } }
}

mutation RotateWebhookSecret($appID: ID!) {
  rotateWebhookSecret(id: $appID) { webhookSecret app { id previousWebhookSecretExpiresAt } }
}

mutation EndOverlap($appID: ID!) {
  endSecretOverlap(id: $appID) { id appKey previousSecretExpiresAt previousWebhookSecretExpiresAt }
}

query ListApps {
  partnerApps(first: 50, orderBy: {field: APP_NAME, direction: ASC}) {
    edges { node { id appName appKey status previousSecretExpiresAt previousWebhookSecretExpiresAt } }
  }
}
`, Variables: `{"appID": "1"}`},
	{Query: `# Calls per partner API version: each version's lifecycle (deprecation,
# sunset) and calls over the last 30 days, then the daily counts per app.
query UsagePerVersion {
  apiVersions { name deprecation sunset retired callsLast30Days }
  apiUsages(first: 30, orderBy: {field: DAY, direction: DESC}) {
    edges { node { day version count app { appKey appName } } }
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
    edges { node { id name role prefix status usageCount lastUsedAt createTime } }
  }
}
`},
}
