package guard_test

import (
	"slices"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"gatehouse/ent"
	"gatehouse/graph"
	"gatehouse/graph/guard"
	"gatehouse/internal/webhook"
)

// TestAuditTargets: every mutation of the schema records a sensible
// target in the audit log: what it acted on, as (GraphQL type, id). The
// table must name every mutation, so a new one cannot go unchecked.
func TestAuditTargets(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	const id, app, order = "17", "23", "SO1001"
	type row struct {
		mutation string
		args     map[string]any // argument values (variables)
		result   any            // what the resolver returned
		typ, id  string
	}
	rows := []row{
		{"createPartnerApp", nil, &graph.PartnerAppSecretPayload{App: &ent.PartnerApp{ID: 41}}, "PartnerApp", "41"},
		{"updatePartnerApp", map[string]any{"id": id}, nil, "PartnerApp", id},
		{"rotatePartnerAppSecret", map[string]any{"id": id}, nil, "PartnerApp", id},
		{"rotateWebhookSecret", map[string]any{"id": id}, nil, "PartnerApp", id},
		{"endSecretOverlap", map[string]any{"id": id}, nil, "PartnerApp", id},
		{"resendWebhookDelivery", map[string]any{"id": id}, nil, "WebhookDelivery", id},
		{"cancelWebhookDelivery", map[string]any{"id": id}, nil, "WebhookDelivery", id},
		{"resendFailedWebhookDeliveries", map[string]any{"appID": app}, nil, "PartnerApp", app},
		{"sendTestWebhook", map[string]any{"appID": app}, &ent.WebhookDelivery{ID: 99}, "PartnerApp", app},
		{"createPortalLink", map[string]any{"appID": app}, nil, "PartnerApp", app},
		{"createWebhookEventType", map[string]any{"name": "invoice.issued", "description": "d"}, &webhook.EventType{Name: "invoice.issued"}, "WebhookEventType", "invoice.issued"},
		{"publishWebhookEvent", map[string]any{"appID": app, "eventType": "invoice.issued"}, &webhook.Published{ID: "msg_x", AppID: 23}, "PartnerApp", app},
		{"createWebhookEndpoint", map[string]any{"appID": app}, &graph.WebhookEndpointSecretPayload{Endpoint: &ent.WebhookEndpoint{ID: 46}, Secret: "whsec_x"}, "WebhookEndpoint", "46"},
		{"updateWebhookEndpoint", map[string]any{"id": id}, nil, "WebhookEndpoint", id},
		{"disableWebhookEndpoint", map[string]any{"id": id}, nil, "WebhookEndpoint", id},
		{"enableWebhookEndpoint", map[string]any{"id": id}, nil, "WebhookEndpoint", id},
		{"deleteWebhookEndpoint", map[string]any{"id": id}, nil, "WebhookEndpoint", id},
		{"rotateWebhookEndpointSecret", map[string]any{"id": id}, nil, "WebhookEndpoint", id},
		{"endWebhookEndpointSecretOverlap", map[string]any{"id": id}, nil, "WebhookEndpoint", id},
		{"createSku", nil, &ent.Sku{ID: 42}, "Sku", "42"},
		{"setSkuStock", map[string]any{"id": id}, nil, "Sku", id},
		{"createOrder", nil, &ent.Order{ID: 43}, "Order", "43"},
		{"payOrder", map[string]any{"orderNo": order}, &ent.Order{ID: 43}, "Order", order},
		{"cancelOrder", map[string]any{"orderNo": order}, &ent.Order{ID: 43}, "Order", order},
		{"refundOrder", map[string]any{"orderNo": order, "reason": "damaged"}, &ent.Order{ID: 43}, "Order", order},
		{"createAPIKey", nil, &graph.APIKeySecretPayload{APIKey: &ent.APIKey{ID: 44}, Key: "ghk_secret"}, "APIKey", "44"},
		{"disableAPIKey", map[string]any{"id": id}, nil, "APIKey", id},
		{"enableAPIKey", map[string]any{"id": id}, nil, "APIKey", id},
		{"createUser", nil, &ent.User{ID: 45}, "User", "45"},
		{"disableUser", map[string]any{"id": id}, nil, "User", id},
		{"enableUser", map[string]any{"id": id}, nil, "User", id},
		{"setUserPassword", map[string]any{"id": id, "password": "correct horse"}, nil, "User", id},
	}
	for _, tt := range rows {
		t.Run(tt.mutation, func(t *testing.T) {
			def := schema.Mutation.Fields.ForName(tt.mutation)
			if def == nil {
				t.Fatalf("no mutation %s in the schema", tt.mutation)
			}
			f := &ast.Field{Name: def.Name, Alias: def.Name, Definition: def}
			for name := range tt.args {
				f.Arguments = append(f.Arguments, &ast.Argument{Name: name, Value: &ast.Value{Kind: ast.Variable, Raw: name}})
			}
			typ, gotID := guard.AuditTarget(schema, graphql.CollectedField{Field: f}, tt.args, tt.result)
			if typ != tt.typ || gotID != tt.id {
				t.Errorf("target (%q, %q), want (%q, %q)", typ, gotID, tt.typ, tt.id)
			}
		})
	}
	var missing []string
	for _, f := range schema.Mutation.Fields {
		if !slices.ContainsFunc(rows, func(r row) bool { return r.mutation == f.Name }) {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("mutations without a row in this test: %v", missing)
	}
}
