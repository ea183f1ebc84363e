package graph_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/graph/scalar"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// TestGraphQLNames: URL, URIs and ID are spelled in capitals, the old
// spelling redirectUris still answers with the same data, and an audit
// event's apiKeyID is an ID (read and filtered as one, an integer
// literal still accepted).
func TestGraphQLNames(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		uris := []string{"https://partner.example.com/cb", "https://partner.example.com/cb2"}
		p := a.GQL(t, `mutation($in: CreatePartnerAppInput!) { createPartnerApp(input: $in) { app { id redirectURIs redirectUris } } }`,
			map[string]any{"in": map[string]any{"appName": "Names", "redirectURIs": uris}}).OK(t, "createPartnerApp")
		id := graphtest.Str(p, "app", "id")
		for _, f := range []string{"redirectURIs", "redirectUris"} {
			if got, _ := json.Marshal(graphtest.Dig(p, "app", f)); string(got) != `["https://partner.example.com/cb","https://partner.example.com/cb2"]` {
				t.Fatalf("createPartnerApp %s = %s", f, got)
			}
		}
		// Read on its own (entgql selects only the columns asked for), and
		// after an update.
		for _, f := range []string{"redirectURIs", "redirectUris"} {
			r := a.GQL(t, `query($id: ID!) { partnerApps(where: {id: $id}) { edges { node { `+f+` } } } }`, map[string]any{"id": id}).OK(t, "partnerApps")
			if graphtest.Str(r, "edges", 0, "node", f, 1) != uris[1] {
				t.Fatalf("%s alone: %v", f, r)
			}
		}
		u := a.GQL(t, `mutation($id: ID!) { updatePartnerApp(id: $id, input: {redirectURIs: ["https://new.example.com/cb"]}) { redirectURIs redirectUris } }`,
			map[string]any{"id": id}).OK(t, "updatePartnerApp")
		if graphtest.Str(u, "redirectURIs", 0) != "https://new.example.com/cb" || graphtest.Str(u, "redirectUris", 0) != "https://new.example.com/cb" {
			t.Fatalf("after update: %v", u)
		}

		keyID := a.GQL(t, `{ apiKeys(first: 1) { edges { node { id } } } }`, nil).OK(t, "apiKeys")
		kid := graphtest.Str(keyID, "edges", 0, "node", "id")
		n, err := strconv.Atoi(kid)
		if err != nil {
			t.Fatalf("api key id %q", kid)
		}
		for name, q := range map[string]struct {
			query string
			vars  map[string]any
		}{
			"ID variable":     {`query($k: ID!) { auditEvents(first: 100, where: {apiKeyID: $k}) { totalCount edges { node { apiKeyID } } } }`, map[string]any{"k": kid}},
			"integer literal": {`{ auditEvents(first: 100, where: {apiKeyID: ` + kid + `}) { totalCount edges { node { apiKeyID } } } }`, nil},
			"string In":       {`{ auditEvents(first: 100, where: {apiKeyIDIn: ["` + kid + `"]}) { totalCount edges { node { apiKeyID } } } }`, nil},
			"integer GTE":     {`query($k: ID) { auditEvents(first: 100, where: {apiKeyIDGTE: $k}) { totalCount edges { node { apiKeyID } } } }`, map[string]any{"k": n}},
		} {
			r := a.GQL(t, q.query, q.vars).OK(t, "auditEvents")
			if graphtest.Num(r, "totalCount") < 2 {
				t.Fatalf("%s: %v", name, r)
			}
			// An ID is a JSON string.
			if v, ok := graphtest.Dig(r, "edges", 0, "node", "apiKeyID").(string); !ok || v != kid {
				t.Fatalf("%s: apiKeyID = %#v, want %q", name, graphtest.Dig(r, "edges", 0, "node", "apiKeyID"), kid)
			}
		}
		if r := a.GQL(t, `{ auditEvents(first: 1, where: {apiKeyID: 999999}) { totalCount } }`, nil).OK(t, "auditEvents"); graphtest.Num(r, "totalCount") != 0 {
			t.Fatalf("unknown key: %v", r)
		}
	})
}

// TestSchemaSpellings walks the schema by introspection: every field,
// argument and input field spells URL, URI(s) and ID in capitals unless
// it is a deprecated alias, every old spelling is marked @deprecated with
// its replacement named, and every id of an object is typed ID.
func TestSchemaSpellings(t *testing.T) {
	a := graphtest.StartAdmin(t, testenv.Backend{Name: "sqlite"})
	r := a.GQL(t, `{ __schema { types { name kind
		fields(includeDeprecated: true) { name isDeprecated deprecationReason type { ...T } args { name type { ...T } } }
		inputFields(includeDeprecated: true) { name isDeprecated deprecationReason type { ...T } } } } }
		fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }`, nil)
	if len(r.Errors) > 0 {
		t.Fatalf("%s", r.Body)
	}
	type typeRef struct {
		Kind, Name string
		OfType     *typeRef
	}
	named := func(tr *typeRef) string {
		for tr != nil && tr.Name == "" {
			tr = tr.OfType
		}
		if tr == nil {
			return ""
		}
		return tr.Name
	}
	type field struct {
		Name              string
		IsDeprecated      bool
		DeprecationReason string
		Type              *typeRef
		Args              []field
	}
	var schema struct {
		Schema struct {
			Types []struct {
				Name, Kind  string
				Fields      []field
				InputFields []field
			}
		} `json:"__schema"`
	}
	if err := graphtest.Remarshal(r.Data, &schema); err != nil {
		t.Fatal(err)
	}
	badSpelling := regexp.MustCompile(`(Url|Uri|Id)(s|[A-Z]|$)`)
	// Fields named …ID that are not ids of an object: targetID may be an
	// order number, requestID is the X-Request-Id, eventID the webhook-id.
	notObjectIDs := map[string]bool{"targetID": true, "requestID": true, "eventID": true}
	deprecated, current := map[string]string{}, map[string]bool{}
	for _, ty := range schema.Schema.Types {
		if strings.HasPrefix(ty.Name, "__") {
			continue
		}
		var all []field
		all = append(all, ty.Fields...)
		all = append(all, ty.InputFields...)
		for _, f := range ty.Fields {
			all = append(all, f.Args...)
		}
		for _, f := range all {
			where := ty.Name + "." + f.Name
			if f.IsDeprecated {
				deprecated[where] = f.DeprecationReason
				if f.DeprecationReason == "" || !strings.Contains(f.DeprecationReason, "se ") {
					t.Errorf("%s is deprecated without naming what to use: %q", where, f.DeprecationReason)
				}
				continue
			}
			current[where] = true
			if badSpelling.MatchString(f.Name) {
				t.Errorf("%s: spell URL, URI and ID in capitals", where)
			}
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(f.Name, "NEQ"), "NotIn"), "In")
			for _, op := range []string{"GTE", "GT", "LTE", "LT"} {
				base = strings.TrimSuffix(base, op)
			}
			if (base == "id" || strings.HasSuffix(base, "ID")) && !notObjectIDs[base] && f.Type != nil && named(f.Type) != "ID" {
				t.Errorf("%s is an id typed %s, want ID", where, named(f.Type))
			}
		}
	}
	for _, w := range []string{"PartnerApp.redirectUris", "Order.amount", "OrderWhereInput.amount", "OrderWhereInput.amountGT", "OrderWhereInput.amountIn",
		"APIVersion.callsLast30Days", "APIUsage.count", "APIUsageWhereInput.countGTE", "APIKey.usageCount", "APIKeyWhereInput.usageCountLT"} {
		if _, ok := deprecated[w]; !ok {
			t.Errorf("%s is not marked @deprecated", w)
		}
	}
	for _, w := range []string{"PartnerApp.redirectURIs", "Order.amountMinor", "Order.amountDecimal", "OrderWhereInput.amountMinor",
		"OrderWhereInput.amountMinorGTE", "OrderWhereInput.amountMinorIn", "AuditEvent.apiKeyID", "AuditEventWhereInput.apiKeyIDIn",
		"APIVersion.callCountLast30Days", "APIUsage.callCount", "APIUsageWhereInput.callCountGTE", "APIKey.requestCount", "APIKeyWhereInput.requestCountLT"} {
		if !current[w] {
			t.Errorf("%s is missing or deprecated", w)
		}
	}
}

// TestInt64Amount: the largest amount an order takes (9999999999999.99,
// 999999999999999 minor units, beyond GraphQL's 32-bit Int) round-trips
// without an error: amountMinor as an Int64 string, amountDecimal, and
// every filter form; the deprecated Int amount raises a field error for
// it instead of a number no 32-bit client can read.
func TestInt64Amount(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		appID := graphtest.Str(a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Big"}}).OK(t, "createPartnerApp"), "app", "id")
		o := a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "BIG-1", amount: "9999999999999.99"}) { amountMinor amountDecimal } }`,
			map[string]any{"app": appID}).OK(t, "createOrder")
		if v, ok := graphtest.Dig(o, "amountMinor").(string); !ok || v != "999999999999999" || graphtest.Str(o, "amountDecimal") != "9999999999999.99" {
			t.Fatalf("createOrder: %v", o)
		}
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "SMALL-1", amount: "1.50"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")

		for name, q := range map[string]struct {
			where string
			vars  map[string]any
		}{
			"Int64 string":          {`{amountMinor: "999999999999999"}`, nil},
			"Int64 integer literal": {`{amountMinorGTE: 999999999999999}`, nil},
			"Int64 variable":        {`{amountMinorGT: $v}`, map[string]any{"v": "150"}},
			"Int64 variable number": {`{amountMinorIn: [$v]}`, map[string]any{"v": 999999999999999}},
			"deprecated Int":        {`{amountGT: 150}`, nil},
			"deprecated big Int":    {`{amount: 999999999999999}`, nil},
		} {
			decl := ""
			if q.vars != nil {
				decl = "($v: Int64!)"
			}
			r := a.GQL(t, `query`+decl+` { orders(first: 10, where: `+q.where+`) { totalCount edges { node { orderNo amountMinor } } } }`, q.vars)
			got := r.OK(t, "orders")
			if graphtest.Num(got, "totalCount") != 1 || graphtest.Str(got, "edges", 0, "node", "orderNo") != "BIG-1" {
				t.Fatalf("%s: %s", name, r.Body)
			}
		}
		for _, bad := range []any{"1e3", "12.5", "+5", "", "9223372036854775808", true} {
			r := a.GQL(t, `query($v: Int64!) { orders(first: 1, where: {amountMinor: $v}) { totalCount } }`, map[string]any{"v": bad})
			if len(r.Errors) != 1 || r.Errors[0].Message != "where.amountMinor: "+scalar.ErrInt64.Error() {
				t.Fatalf("%v accepted or unclear: %s", bad, r.Body)
			}
		}
	})
}

// TestTimePrecision: every Time field, whatever the store keeps (times
// cut to milliseconds, microseconds, SQLite's nanoseconds, bare dates),
// reads RFC 3339 in UTC with exactly three decimals.
func TestTimePrecision(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{
			"appName": "Times", "expireDate": "2031-05-17", "callbackURL": "http://127.0.0.1:1/hook",
		}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		a.GQL(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": appID}).OK(t, "rotatePartnerAppSecret")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "T-1", amount: "1"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "T-1") { id } }`, nil).OK(t, "payOrder")
		a.GQL(t, `mutation { createUser(input: {username: "timely", password: "long enough"}) { id } }`, nil).OK(t, "createUser")
		r := a.GQL(t, `query($id: ID!) {
			partnerApps(where: {id: $id}) { edges { node { createTime updateTime expireDate previousSecretExpiresAt } } }
			orders(first: 1) { edges { node { createTime payTime } } }
			webhookDeliveries(first: 1) { edges { node { createTime updateTime nextAttemptAt } } }
			auditEvents(first: 1) { edges { node { time } } }
			apiKeys(first: 1) { edges { node { createTime } } }
			users(first: 1) { edges { node { createTime } } }
		}`, map[string]any{"id": appID})
		if len(r.Errors) > 0 {
			t.Fatalf("%s", r.Body)
		}
		form := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
		for root, fields := range map[string][]string{
			"partnerApps":       {"createTime", "updateTime", "expireDate", "previousSecretExpiresAt"},
			"orders":            {"createTime", "payTime"},
			"webhookDeliveries": {"createTime", "updateTime", "nextAttemptAt"},
			"auditEvents":       {"time"},
			"apiKeys":           {"createTime"},
			"users":             {"createTime"},
		} {
			for _, f := range fields {
				v := graphtest.Str(r.Data, root, "edges", 0, "node", f)
				if !form.MatchString(v) {
					t.Errorf("%s.%s = %q, want 2006-01-02T15:04:05.000Z", root, f, v)
				}
			}
		}
		if d := graphtest.Str(r.Data, "partnerApps", "edges", 0, "node", "expireDate"); d != "2031-05-17T00:00:00.000Z" {
			t.Errorf("expireDate = %q", d)
		}
	})
}

// TestInt64Counters: the counters that can pass 2^31 (calls per version
// and per app and day, requests per key) read as Int64 strings, filter
// as Int64, and their deprecated Int filters still answer (the deprecated
// Int fields refuse such values: TestDeprecatedCountersBeyond32Bits).
func TestInt64Counters(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := t.Context()
		appID := graphtest.IntID(t, a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Busy"}}).OK(t, "createPartnerApp"), "app", "id")
		const calls = 3_000_000_000
		today := time.Now().UTC().Format(time.DateOnly)
		if err := a.App.DB.APIUsage.Create().SetAppID(appID).SetVersion("v2").SetDay(today).SetCount(calls).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		const requests = 5_000_000_000
		if err := a.App.DB.APIKey.Update().SetUsageCount(requests).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		r := a.GQL(t, `{
			apiUsages(first: 5, where: {callCountGTE: "3000000000"}) { totalCount edges { node { callCount } } }
			old: apiUsages(first: 5, where: {countGT: 2999999999}) { totalCount }
			apiKeys(first: 5, where: {requestCount: 5000000000}) { totalCount edges { node { requestCount } } }
			apiVersions { name callCountLast30Days }
		}`, nil)
		if len(r.Errors) > 0 {
			t.Fatalf("%s", r.Body)
		}
		if graphtest.Num(r.Data, "apiUsages", "totalCount") != 1 || graphtest.Num(r.Data, "old", "totalCount") != 1 ||
			graphtest.Dig(r.Data, "apiUsages", "edges", 0, "node", "callCount") != "3000000000" {
			t.Fatalf("apiUsages: %s", r.Body)
		}
		if graphtest.Num(r.Data, "apiKeys", "totalCount") != 1 || graphtest.Dig(r.Data, "apiKeys", "edges", 0, "node", "requestCount") != "5000000000" {
			t.Fatalf("apiKeys: %s", r.Body)
		}
		found := false
		for _, v := range graphtest.Dig(r.Data, "apiVersions").([]any) {
			if graphtest.Str(v, "name") == "v2" {
				found = graphtest.Dig(v, "callCountLast30Days") == "3000000000"
			}
		}
		if !found {
			t.Fatalf("apiVersions: %s", r.Body)
		}
	})
}
