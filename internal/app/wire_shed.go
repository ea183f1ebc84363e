package app

import (
	"encoding/json"
	"fmt"
	"net"
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
	shed.ConnectionMetrics("public", "admin")
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

// connRefusal is the whole HTTP/1.1 response sent to a connection refused
// by a listener's connection bound (shed.ConnCap), before its request is
// read: so its body answers in every shape a client of the listener may
// read — {"error": "overloaded"}, the partner envelope's code 6000, and on
// the admin listener GraphQL's errors with extensions.code OVERLOADED.
func connRefusal(admin bool) []byte {
	body := map[string]any{"error": "overloaded", "message": rest.OverloadedDetail, "code": rest.OverloadedCode, "data": nil}
	if admin {
		body["errors"] = []map[string]any{{"message": rest.OverloadedDetail, "extensions": map[string]string{"code": guard.CodeOverloaded}}}
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nRetry-After: %s\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		shed.RetryAfter, len(b), b)
}

// capConns bounds the open connections of listener ln (named name) served
// by s: see shed.ConnCap. tls: the listener speaks TLS, and a refused
// connection is closed without an answer.
func (a *App) capConns(ln net.Listener, s *http.Server, name string, tls bool) net.Listener {
	cc := shed.ConnCap{Max: a.Cfg.Shed.MaxConnections, Listener: name, OnFull: func() {
		// Closes the idle keep-alive connections (net/http's only way).
		s.SetKeepAlivesEnabled(false)
		s.SetKeepAlivesEnabled(true)
		a.Log.Warn("connection bound reached: refusing new connections with 503 and closing idle ones", "listener", name, "max_connections", a.Cfg.Shed.MaxConnections)
	}}
	if !tls {
		cc.Refusal = connRefusal(name == "admin")
	}
	if !a.Cfg.Shed.Enabled {
		cc.Max = 0
	}
	return cc.Wrap(ln)
}
