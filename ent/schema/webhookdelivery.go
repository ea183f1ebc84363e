package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// WebhookDelivery is one webhook event to deliver to a partner (the outbox row).
type WebhookDelivery struct {
	ent.Schema
}

// Fields of the WebhookDelivery.
func (WebhookDelivery) Fields() []ent.Field {
	return []ent.Field{
		field.Int("app_id").
			Comment("The id of the partner app the event is for.").
			Immutable(),
		// endpoint_id is the endpoint the delivery goes to (null once the
		// endpoint was deleted: its waiting deliveries were cancelled).
		field.Int("endpoint_id").
			Comment("The id of the endpoint the delivery goes to; null once the endpoint was deleted (its waiting deliveries were cancelled).").
			Optional().Nillable(),
		// event_id is the message id (webhook-id): one event fanned out to
		// several endpoints has one id and one delivery per endpoint.
		field.String("event_id").
			Comment("The message id (the webhook-id header): one event fanned out to several endpoints has one id and one delivery per endpoint.").
			MaxLen(64).NotEmpty().Immutable(),
		field.String("event_type").
			Comment("The event's type, such as order.paid.").
			MaxLen(64).NotEmpty().Immutable().
			Annotations(entgql.OrderField("EVENT_TYPE")),
		field.Text("biz_data").
			Comment("The event's business data, the JSON sent as the body's data.").
			Immutable(),
		field.String("callback_url").
			Comment("The URL the delivery is sent to.").
			MaxLen(2048),
		// PENDING and RETRYING are due; SUCCESS, FAILED and CANCELLED are
		// final (an operator's resend makes any of them PENDING again).
		field.Enum("status").
			Comment("PENDING and RETRYING are due; SUCCESS, FAILED and CANCELLED are final (resendWebhookDelivery makes any of them PENDING again).").
			Values("PENDING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED").Default("PENDING").
			Annotations(ValueDocs{
				"PENDING":   "Waiting for its first attempt (or resent); due at nextAttemptAt.",
				"RETRYING":  "An attempt failed; the next is due at nextAttemptAt.",
				"SUCCESS":   "The receiver answered 2xx; final.",
				"FAILED":    "Every retry of the schedule failed; final until resent.",
				"CANCELLED": "Cancelled by an operator or with its deleted endpoint; final until resent.",
			},
				entgql.OrderField("STATUS")),
		field.Int("retry_count").
			Comment("Retries made since the delivery was queued or last resent.").
			Default(0).NonNegative(),
		// attempt_count is the number of attempts recorded so far, over
		// resends too: the next attempt is number attempt_count + 1.
		field.Int("attempt_count").
			Comment("Attempts recorded so far, over resends too: the next attempt is number attemptCount + 1.").
			Default(0).NonNegative(),
		field.Int("max_retry").
			Comment("Retries allowed before the delivery becomes FAILED (the length of the endpoint's retry schedule).").
			Default(5).NonNegative(),
		field.Time("next_attempt_at").
			Comment("When the delivery is next due (for PENDING and RETRYING).").
			Default(time.Now).
			Annotations(entgql.OrderField("NEXT_ATTEMPT_AT")),
		field.Time("lease_until").
			Comment("While a replica is sending the delivery, until when it holds it; null otherwise. A lease left by a crashed replica expires.").
			Optional().Nillable(),
		field.Text("last_error").
			Comment("Why the last attempt failed; empty if none did.").
			Optional(),
		field.Time("create_time").
			Comment("When the event was queued.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("update_time").
			Comment("When the delivery last changed.").
			Default(time.Now).UpdateDefault(time.Now),
		// The W3C trace context (traceparent and tracestate headers) of
		// the business transaction that queued the event, empty when it
		// was not traced: each attempt's span links to it, so a trace
		// shows the payOrder that caused a delivery. Not shown to clients.
		field.String("traceparent").MaxLen(128).Optional().Immutable().
			Annotations(entgql.Skip()),
		field.String("tracestate").MaxLen(512).Optional().Immutable().
			Annotations(entgql.Skip()),
	}
}

// Edges of the WebhookDelivery.
func (WebhookDelivery) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).
			Comment("The partner app the event is for.").
			Ref("webhook_deliveries").Field("app_id").Unique().Required().Immutable(),
		edge.To("attempts", DeliveryAttempt.Type).
			Comment("The delivery's HTTP attempts, first to last.").
			Annotations(entgql.RelayConnection()),
		edge.From("endpoint", WebhookEndpoint.Type).
			Comment("The endpoint the delivery goes to; null once deleted.").
			Ref("deliveries").Field("endpoint_id").Unique(),
	}
}

// Indexes of the WebhookDelivery.
func (WebhookDelivery) Indexes() []ent.Index {
	return []ent.Index{
		// The scheduler's: each app's deliveries of one status in due order
		// (also the admin's filter by app and status); and the leases,
		// which count the attempts in flight per app (a partial index: few
		// rows hold one). Queries repeat the predicate to use it.
		index.Fields("app_id", "status", "next_attempt_at"),
		index.Fields("app_id", "lease_until").
			Annotations(entsql.IndexWhere("lease_until IS NOT NULL")).StorageKey("webhookdelivery_leased_by_app"),
		// The same two per endpoint: the claim walks each endpoint's
		// waiting deliveries in due order and counts its leases (its
		// share of the app's in-flight cap).
		index.Fields("endpoint_id", "status", "next_attempt_at"),
		index.Fields("endpoint_id", "lease_until").
			Annotations(entsql.IndexWhere("lease_until IS NOT NULL")).StorageKey("webhookdelivery_leased_by_endpoint"),
		// One delivery per (message, endpoint).
		index.Fields("event_id", "endpoint_id").Unique(),
		// Retention finds final deliveries by age: update_time first, with
		// the status read from the index as it goes. Not (status, …): with
		// the statistics of a quiet outbox (nearly every row final),
		// Postgres took such an index for the cheapest way to the waiting
		// rows, and a claim during a burst walked the whole backlog
		// (TestClaimPlanAfterQuietStatistics).
		index.Fields("update_time", "status"),
		// The delivery log (the console, GraphQL webhookDeliveries) pages
		// newest first by (create_time, id), with or without an app: an
		// index in that order serves each page from its cursor instead of
		// sorting every row (100,000 deliveries: see docs/console.md).
		index.Fields("create_time", "id").StorageKey("webhookdelivery_log"),
		index.Fields("app_id", "create_time", "id").StorageKey("webhookdelivery_log_by_app"),
	}
}

// Annotations of the WebhookDelivery.
func (WebhookDelivery) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("One webhook event to deliver to one endpoint of a partner app, with its retry state."),
		entgql.QueryField().Description("The webhook deliveries of every app and endpoint."),
		entgql.RelayConnection(),
	}
}
