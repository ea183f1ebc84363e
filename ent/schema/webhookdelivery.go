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
		field.Int("app_id").Immutable(),
		// endpoint_id is the endpoint the delivery goes to (null once the
		// endpoint was deleted: its waiting deliveries were cancelled).
		field.Int("endpoint_id").Optional().Nillable(),
		// event_id is the message id (webhook-id): one event fanned out to
		// several endpoints has one id and one delivery per endpoint.
		field.String("event_id").MaxLen(64).NotEmpty().Immutable(),
		field.String("event_type").MaxLen(64).NotEmpty().Immutable().
			Annotations(entgql.OrderField("EVENT_TYPE")),
		field.Text("biz_data").Immutable(),
		field.String("callback_url").MaxLen(2048),
		// PENDING and RETRYING are due; SUCCESS, FAILED and CANCELLED are
		// final (an operator's resend makes any of them PENDING again).
		field.Enum("status").Values("PENDING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED").Default("PENDING").
			Annotations(entgql.OrderField("STATUS")),
		field.Int("retry_count").Default(0).NonNegative(),
		// attempt_count is the number of attempts recorded so far, over
		// resends too: the next attempt is number attempt_count + 1.
		field.Int("attempt_count").Default(0).NonNegative(),
		field.Int("max_retry").Default(5).NonNegative(),
		field.Time("next_attempt_at").Default(time.Now).
			Annotations(entgql.OrderField("NEXT_ATTEMPT_AT")),
		field.Time("lease_until").Optional().Nillable(),
		field.Text("last_error").Optional(),
		field.Time("create_time").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("update_time").Default(time.Now).UpdateDefault(time.Now),
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
		edge.From("app", PartnerApp.Type).Ref("webhook_deliveries").Field("app_id").Unique().Required().Immutable(),
		edge.To("attempts", DeliveryAttempt.Type).Annotations(entgql.RelayConnection()),
		edge.From("endpoint", WebhookEndpoint.Type).Ref("deliveries").Field("endpoint_id").Unique(),
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
		entgql.QueryField(),
		entgql.RelayConnection(),
	}
}
