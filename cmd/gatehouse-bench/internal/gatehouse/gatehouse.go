// Package gatehouse starts the gatehouse process under test (its own
// data dir or a replica sharing another's stores), seeds it, and calls
// its admin GraphQL API.
package gatehouse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
	"gatehouse/internal/benchfloor"
	"gatehouse/rest/partnerclient"
)

// OrderNo is the order every query asks for.
const OrderNo = benchfloor.OrderNo

// TicketBody is what every ticket creation sends, to gatehouse and to the
// floor alike.
const TicketBody = `{"title":"bench ticket"}`

// Process is a running gatehouse process with a seeded partner app.
type Process struct {
	Proc *proc.Proc
	// Admin is the admin listener's base URL; APIKey an ADMIN key of it.
	Admin  string
	APIKey string
	// AppKey and Secret are those of the partner app Start created.
	AppKey, Secret string
	// env is what the process was started with but its addresses: a
	// replica started with it shares the database, the key-value store
	// and the keys.
	env []string
	// SQLiteSync is its GATEHOUSE_SQLITE_SYNC.
	SQLiteSync string
}

// Start starts gatehouse (o.Binary, else o.Gatehouse) with env and seeds it.
func Start(ctx context.Context, o bench.Options, name, tmp string, env []string) (*Process, error) {
	pub, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	adm, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	apiKey := "bench-" + bench.RandomHex(16)
	env = append(env,
		"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(bench.RandomBytes(32)),
		"GATEHOUSE_JWT_SECRET="+base64.StdEncoding.EncodeToString(bench.RandomBytes(32)),
		"GATEHOUSE_BOOTSTRAP_API_KEY="+apiKey,
		"GATEHOUSE_LOG_FORMAT=json",
		// The webhook phases call back the harness's sink on loopback.
		"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true",
		// The embedded database pays for the same durability as the
		// SQLite floors it is measured against.
		"GATEHOUSE_SQLITE_SYNC="+o.SQLiteSync,
	)
	bin := o.Gatehouse
	if o.Binary != "" {
		bin = o.Binary
	}
	args := []string{"serve"}
	if o.PinCPU != "" {
		// One core for the server, as the overload figures are defined.
		args = append([]string{"-c", o.PinCPU, bin}, args...)
		bin = "taskset"
		env = append(env, "GOMAXPROCS=1")
	}
	p, err := proc.Start(ctx, name, bin, args, append(env, "GATEHOUSE_ADDR="+pub, "GATEHOUSE_ADMIN_ADDR="+adm), pub, tmp)
	if err != nil {
		return nil, err
	}
	g := &Process{Proc: p, Admin: "http://" + adm, APIKey: apiKey, env: env, SQLiteSync: o.SQLiteSync}
	if err := g.seed(ctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return g, nil
}

// Replica starts another gatehouse process on g's database, key-value
// store and keys (no seeding: it serves g's app and order).
func (g *Process) Replica(ctx context.Context, o bench.Options, name, tmp string, extraEnv ...string) (*Process, error) {
	pub, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	adm, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	// A data dir of its own (the last of a repeated variable wins).
	env := append(slices.Clip(g.env), "GATEHOUSE_ADDR="+pub, "GATEHOUSE_ADMIN_ADDR="+adm, "GATEHOUSE_DATA_DIR="+tmp+"/data-"+strings.ReplaceAll(name, " ", "-"))
	env = append(env, extraEnv...)
	p, err := proc.Start(ctx, name, o.Gatehouse, []string{"serve"}, env, pub, tmp)
	if err != nil {
		return nil, err
	}
	r := *g
	r.Proc, r.Admin = p, "http://"+adm
	return &r, nil
}

// seed creates a partner app without a practical rate limit and its order,
// through the admin GraphQL API.
func (g *Process) seed(ctx context.Context) error {
	var app struct {
		CreatePartnerApp struct {
			App       struct{ ID, AppKey string }
			AppSecret string
		}
	}
	if err := g.GraphQL(ctx, `mutation { createPartnerApp(input: {appName: "bench", rateLimit: 1000000}) { app { id appKey } appSecret } }`, &app); err != nil {
		return err
	}
	g.AppKey, g.Secret = app.CreatePartnerApp.App.AppKey, app.CreatePartnerApp.AppSecret
	return g.GraphQL(ctx, `mutation { createOrder(input: {appID: "`+app.CreatePartnerApp.App.ID+`", orderNo: "`+OrderNo+`", amount: "99.90"}) { orderNo } }`, nil)
}

// GraphQL runs query on the admin API with the ADMIN key and decodes its
// data into into (when not nil).
func (g *Process) GraphQL(ctx context.Context, query string, into any) error {
	body, _ := json.Marshal(map[string]string{"query": query})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.Admin+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", g.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("graphql: HTTP %d: %w", resp.StatusCode, err)
	}
	if len(out.Errors) > 0 || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("graphql: HTTP %d: %v", resp.StatusCode, out.Errors)
	}
	if into == nil {
		return nil
	}
	return json.Unmarshal(out.Data, into)
}

// Presign signs n order queries, each with its own nonce, before any is sent.
func (g *Process) Presign(n int) ([]string, error) {
	s := partnerclient.Signer{AppKey: g.AppKey, AppSecret: g.Secret}
	out := make([]string, n)
	for i := range out {
		u, err := s.SignURL(g.Proc.Base + "/api/v1/orders/query?order_no=" + OrderNo)
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// App creates a partner app calling back url and returns its id.
func (g *Process) App(ctx context.Context, name, url string) (int64, error) {
	var out struct {
		CreatePartnerApp struct{ App struct{ ID string } }
	}
	if err := g.GraphQL(ctx, fmt.Sprintf(`mutation { createPartnerApp(input: {appName: "%s", callbackURL: "%s", rateLimit: 1000000}) { app { id } } }`, name, url), &out); err != nil {
		return 0, err
	}
	var id int64
	_, err := fmt.Sscan(out.CreatePartnerApp.App.ID, &id)
	return id, err
}

// SKUStocks reads the stock of the SKUs ids through the admin GraphQL API.
func (g *Process) SKUStocks(ctx context.Context, ids []string) (map[string]int64, error) {
	var out struct {
		Skus struct {
			Edges []struct {
				Node struct {
					ID    string
					Stock int64
				}
			}
		}
	}
	q := fmt.Sprintf(`query { skus(first: 100, where: {idIn: [%s]}) { edges { node { id stock } } } }`, `"`+strings.Join(ids, `","`)+`"`)
	if err := g.GraphQL(ctx, q, &out); err != nil {
		return nil, err
	}
	m := make(map[string]int64, len(ids))
	for _, e := range out.Skus.Edges {
		m[e.Node.ID] = e.Node.Stock
	}
	if len(m) != len(ids) {
		return nil, fmt.Errorf("read %d of %d SKUs", len(m), len(ids))
	}
	return m, nil
}
