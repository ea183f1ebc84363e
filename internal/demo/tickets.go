package demo

import (
	"context"
	"fmt"
	"strings"
)

func init() { register(10, seedTickets) }

func seedTickets(_ context.Context, e Env, b *strings.Builder) error {
	fmt.Fprintf(b, "# Tickets (no authentication)\n")
	fmt.Fprintf(b, "ID=$(curl -s -X POST %s/api/tickets -H 'Content-Type: application/json' -d '{\"title\":\"Printer on 3F jams\"}' | sed -E 's/.*\"id\":([0-9]+).*/\\1/'); echo \"ticket $ID\"\n", e.PublicURL)
	fmt.Fprintf(b, "curl -s \"%s/api/tickets?status=OPEN&limit=20\"\n", e.PublicURL)
	fmt.Fprintf(b, "curl -s -X PATCH %s/api/tickets/$ID/status -H 'Content-Type: application/json' -d '{\"status\":\"DOING\"}'\n", e.PublicURL)
	fmt.Fprintf(b, "curl -s -X PATCH %s/api/tickets/$ID/status -H 'Content-Type: application/json' -d '{\"status\":\"DONE\"}'\n", e.PublicURL)
	fmt.Fprintf(b, "\n# Admin GraphQL (tickets are read-only there; the API key is the demo's, see below)\n")
	fmt.Fprintf(b, "curl -s %s/graphql -H 'Content-Type: application/json' -H 'X-API-Key: %s' -d '{\"query\":\"{ tickets(first: 5) { totalCount edges { node { id title status createdAt } } } }\"}'\n", e.AdminURL, DemoAdminKey(e))
	return nil
}
