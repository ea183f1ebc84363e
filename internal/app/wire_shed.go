package app

import (
	"net/http"

	"gatehouse/graph/guard"
	"gatehouse/internal/shed"
	"gatehouse/rest"
)

// Shedding is the load shedding of the two listeners (internal/shed): each
// has its own adaptive limit, so an overload of the public listener never
// takes the admin listener's room, and each keeps a reserve for its
// health checks. The limits are nil when GATEHOUSE_SHED is false.
type Shedding struct {
	Public, Admin               *shed.Limit
	PublicReserve, AdminReserve *shed.Reserve
}

// newShedding builds the limits from the configuration.
func (a *App) newShedding() Shedding {
	c := a.Cfg.Shed
	s := Shedding{PublicReserve: shed.NewReserve(c.Reserve), AdminReserve: shed.NewReserve(c.Reserve)}
	if c.Enabled {
		s.Public = shed.NewLimit(c.MinConcurrency, c.MaxConcurrency, c.QueueBudget/shed.DelayShare)
		s.Admin = shed.NewLimit(c.MinConcurrency, c.MaxConcurrency, c.QueueBudget/shed.DelayShare)
	}
	return s
}

// publicShedding is the public listener's shedding middleware: /healthz
// and /readyz may use the reserve; refusals answer in the route's shape
// (partner envelope 503/6000, else {"error": "overloaded"}).
func (a *App) publicShedding() func(http.Handler) http.Handler {
	return shed.Middleware(shed.Options{
		Listener:    "public",
		Log:         a.Log,
		QueueBudget: a.Cfg.Shed.QueueBudget,
		Limit:       a.Shed.Public,
		Reserve:     a.Shed.PublicReserve,
		Reserved:    func(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" },
		Refuse:      func(w http.ResponseWriter, r *http.Request) { rest.WriteOverloaded(w, r, shed.RetryAfter) },
	})
}

// adminShedding is the admin listener's: /healthz, /readyz and /metrics
// may use the reserve; GraphQL refusals carry extensions.code OVERLOADED.
func (a *App) adminShedding() func(http.Handler) http.Handler {
	return shed.Middleware(shed.Options{
		Listener:    "admin",
		Log:         a.Log,
		QueueBudget: a.Cfg.Shed.QueueBudget,
		Limit:       a.Shed.Admin,
		Reserve:     a.Shed.AdminReserve,
		Reserved: func(r *http.Request) bool {
			return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics"
		},
		Refuse: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/graphql" {
				guard.WriteOverloaded(w, shed.RetryAfter)
				return
			}
			rest.WriteOverloaded(w, r, shed.RetryAfter)
		},
	})
}
