package guard_test

import (
	"net/url"
	"strings"
	"testing"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
)

// TestPOSTContentType: a POST without Content-Type: application/json (curl
// -d sends a form's, or none at all) is answered 415 with a GraphQL error
// that names the content type expected, and a mutation in it is audited;
// a JSON content type with parameters runs; any other method is 405; GET
// keeps its answers.
func TestPOSTContentType(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		const query = `{"query": "{ apiKeys(first: 1) { totalCount } }"}`
		for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain", "application/graphql", "multipart/form-data; boundary=x", "application/json;;"} {
			headers := []string{"X-API-Key", a.Key}
			if ct != "" {
				headers = append(headers, "Content-Type", ct)
			}
			r := a.Do(t, "POST", a.AdminURL+"/graphql", query, headers...)
			var body struct {
				Error, Message string
				Errors         []graphtest.Error `json:"errors"`
			}
			r.JSON(t, &body)
			if r.Status != 415 || len(body.Errors) != 1 || body.Error != "unsupported_media_type" || body.Message != body.Errors[0].Message || body.Errors[0].Code() != "UNSUPPORTED_MEDIA_TYPE" ||
				!strings.Contains(body.Errors[0].Message, "Content-Type: application/json") ||
				body.Errors[0].Extensions["expected"] != "application/json" || r.Header.Get("Accept-Post") != "application/json" ||
				!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("Content-Type %q: %d %v %s", ct, r.Status, r.Header, r.Body)
			}
			want := "(got none)"
			if ct != "" {
				want = `(got "` + ct + `")`
			}
			if !strings.Contains(body.Errors[0].Message, want) {
				t.Fatalf("Content-Type %q: message %q does not say %s", ct, body.Errors[0].Message, want)
			}
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
			r := a.Do(t, "POST", a.AdminURL+"/graphql", query, "X-API-Key", a.Key, "Content-Type", ct)
			if r.Status != 200 || !strings.Contains(string(r.Body), `"totalCount":1`) {
				t.Fatalf("Content-Type %q: %d %s", ct, r.Status, r.Body)
			}
		}

		// A mutation sent as curl -d sends it is refused and audited.
		before := lastEventID(t, a)
		r := a.Do(t, "POST", a.AdminURL+"/graphql", `{"query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }"}`,
			"X-API-Key", a.Key, "Content-Type", "application/x-www-form-urlencoded")
		if r.Status != 415 {
			t.Fatalf("mutation: %d %s", r.Status, r.Body)
		}
		if got := eventsAfter(t, a, before, 1); len(got) != 1 || got[0].Mutation != "createSku" || got[0].Outcome != "REFUSED" || got[0].Code != "UNSUPPORTED_MEDIA_TYPE" {
			t.Fatalf("audit: %+v", got)
		}
		if n, err := a.App.DB.Sku.Query().Count(t.Context()); err != nil || n != 0 {
			t.Fatalf("skus: %d %v", n, err)
		}

		// Other methods: 405 with Allow, in both shapes; a mutation in the
		// body is audited.
		for _, m := range []string{"PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"} {
			r := a.Do(t, m, a.AdminURL+"/graphql", query, "X-API-Key", a.Key, "Content-Type", "application/json")
			if r.Status != 405 || r.Header.Get("Allow") != "GET, POST" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%s: %d %v %s", m, r.Status, r.Header, r.Body)
			}
			if m == "HEAD" {
				continue
			}
			var body struct {
				Error, Message string
				Errors         []graphtest.Error `json:"errors"`
			}
			r.JSON(t, &body)
			if body.Error != "method_not_allowed" || len(body.Errors) != 1 || body.Errors[0].Code() != "METHOD_NOT_ALLOWED" ||
				body.Message != body.Errors[0].Message || !strings.HasSuffix(body.Message, "not "+m) {
				t.Fatalf("%s: %s", m, r.Body)
			}
		}
		before = lastEventID(t, a)
		if r := a.Do(t, "PUT", a.AdminURL+"/graphql", `{"query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }"}`,
			"X-API-Key", a.Key, "Content-Type", "application/json"); r.Status != 405 {
			t.Fatalf("PUT mutation: %d %s", r.Status, r.Body)
		}
		if got := eventsAfter(t, a, before, 1); len(got) != 1 || got[0].Mutation != "createSku" || got[0].Code != "METHOD_NOT_ALLOWED" {
			t.Fatalf("PUT audit: %+v", got)
		}

		// GET: queries run whatever the Content-Type, mutations stay 405.
		get := a.Do(t, "GET", a.AdminURL+"/graphql?query="+url.QueryEscape(`{ apiKeys(first: 1) { totalCount } }`), "", "X-API-Key", a.Key)
		if get.Status != 200 || !strings.Contains(string(get.Body), `"totalCount":1`) {
			t.Fatalf("GET query: %d %s", get.Status, get.Body)
		}
		get = a.Do(t, "GET", a.AdminURL+"/graphql?query="+url.QueryEscape(`mutation { createSku(input: {name: "x", stock: 1}) { id } }`), "", "X-API-Key", a.Key)
		if get.Status != 405 || !strings.Contains(string(get.Body), "METHOD_NOT_ALLOWED") {
			t.Fatalf("GET mutation: %d %s", get.Status, get.Body)
		}
	})
}

// TestRefusedBodyShapesAudited: a mutation refused with 415 is audited in
// whatever shape the body held it: a form (curl -d 'query=…'), the bare
// document (text/plain, application/graphql), a multipart upload's
// "operations" part.
func TestRefusedBodyShapesAudited(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		const doc = `mutation { createSku(input: {name: "x", stock: 1}) { id } }`
		for _, c := range []struct{ ct, body string }{
			{"application/x-www-form-urlencoded", "query=" + url.QueryEscape(doc)},
			{"text/plain", doc},
			{"application/graphql", doc},
			{"multipart/form-data; boundary=XB", "--XB\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n" +
				`{"query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }"}` + "\r\n--XB\r\nContent-Disposition: form-data; name=\"map\"\r\n\r\n{}\r\n--XB--\r\n"},
		} {
			before := lastEventID(t, a)
			if r := a.Do(t, "POST", a.AdminURL+"/graphql", c.body, "X-API-Key", a.Key, "Content-Type", c.ct); r.Status != 415 {
				t.Fatalf("%s: %d %s", c.ct, r.Status, r.Body)
			}
			if got := eventsAfter(t, a, before, 1); len(got) != 1 || got[0].Mutation != "createSku" || got[0].Outcome != "REFUSED" || got[0].Code != "UNSUPPORTED_MEDIA_TYPE" {
				t.Fatalf("%s: audit %+v", c.ct, got)
			}
		}
		if n, err := a.App.DB.Sku.Query().Count(t.Context()); err != nil || n != 0 {
			t.Fatalf("skus: %d %v", n, err)
		}
	})
}

// TestInvalidJSONBody: a POST declared as JSON whose body is no GraphQL
// request (not JSON, cut short, empty, not an object, a member of the
// wrong type) is answered 400 in the listener's two refusal shapes with
// extensions.code INVALID_JSON, without quoting the body back; a mutation
// in it is audited as refused (named when its "query" can still be read,
// else "?"), and nothing runs.
func TestInvalidJSONBody(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		post := func(body string) {
			t.Helper()
			r := a.Do(t, "POST", a.AdminURL+"/graphql", body, "X-API-Key", a.Key, "Content-Type", "application/json")
			var out struct {
				Error, Message string
				Errors         []graphtest.Error `json:"errors"`
			}
			r.JSON(t, &out)
			if r.Status != 400 || out.Error != "invalid_json" || len(out.Errors) != 1 || out.Errors[0].Code() != "INVALID_JSON" ||
				out.Message != out.Errors[0].Message || !strings.Contains(out.Message, `{"query"`) ||
				!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("body %q: %d %v %s", body, r.Status, r.Header, r.Body)
			}
			if strings.Contains(out.Message, "secret-looking") {
				t.Fatalf("body %q: the reply quotes the body: %s", body, out.Message)
			}
		}
		before := lastEventID(t, a)
		for _, body := range []string{`{"query": `, `{"query": "{ apiKeys(first: 1) { totalCount } }"`, `{"query": 5}`,
			`[1]`, `"q"`, ``, `{"query": "{ apiKeys { totalCount } }", "variables": "secret-looking"}`, `not json secret-looking`} {
			post(body)
		}
		for _, c := range []struct{ body, mutation string }{
			{`{"query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }", "variables": {`, "createSku"},
			{`{"query": "mutation { createSku(input: {name: \"x\"`, "?"},
			{`{"variables": {}, "query": "mutation { setSkuStock(id: 1, stock: 2) { id } }", "operationName": 7}`, "setSkuStock"},
		} {
			post(c.body)
			got := eventsAfter(t, a, before, 1)
			if len(got) != 1 || got[0].Mutation != c.mutation || got[0].Outcome != "REFUSED" || got[0].Code != "INVALID_JSON" {
				t.Fatalf("body %q: audit %+v (the bodies without a mutation must add none)", c.body, got)
			}
			before = lastEventID(t, a)
		}
		if n, err := a.App.DB.Sku.Query().Count(t.Context()); err != nil || n != 0 {
			t.Fatalf("skus: %d %v", n, err)
		}
		// A well-formed body still runs.
		if r := a.Do(t, "POST", a.AdminURL+"/graphql", `{"query": "{ apiKeys(first: 1) { totalCount } }"}`, "X-API-Key", a.Key, "Content-Type", "application/json"); r.Status != 200 {
			t.Fatalf("well-formed: %d %s", r.Status, r.Body)
		}
	})
}

// TestAmbiguousJSONBody: a body that decoders could read two ways is
// refused 400 INVALID_JSON and nothing in it runs: a member named twice
// (Go keeps the last "query", another reader the first), at the top or
// deeper, and bytes after the JSON value. The refused mutation is audited.
func TestAmbiguousJSONBody(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		before := lastEventID(t, a)
		for _, c := range []struct{ body, says string }{
			{`{"query": "{ apiKeys(first: 1) { totalCount } }", "query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }"}`, `names "query" twice`},
			{`{"query": "mutation($i: CreateSkuInput!) { createSku(input: $i) { id } }", "variables": {"i": {"name": "x", "stock": 1, "stock": 2}}}`, `names "stock" twice`},
			{`{"query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }"} {"query": "x"}`, "has more after its JSON value"},
			{`{"query": "mutation { createSku(input: {name: \"x\", stock: 1}) { id } }"}]`, "has more after its JSON value"},
		} {
			r := a.Do(t, "POST", a.AdminURL+"/graphql", c.body, "X-API-Key", a.Key, "Content-Type", "application/json")
			var out struct {
				Error, Message string
				Errors         []graphtest.Error `json:"errors"`
			}
			r.JSON(t, &out)
			if r.Status != 400 || out.Error != "invalid_json" || len(out.Errors) != 1 || out.Errors[0].Code() != "INVALID_JSON" || !strings.Contains(out.Message, c.says) {
				t.Fatalf("body %s: %d %s", c.body, r.Status, r.Body)
			}
			got := eventsAfter(t, a, before, 1)
			if len(got) != 1 || got[0].Outcome != "REFUSED" || got[0].Code != "INVALID_JSON" {
				t.Fatalf("body %s: audit %+v", c.body, got)
			}
			before = lastEventID(t, a)
		}
		if n, err := a.App.DB.Sku.Query().Count(t.Context()); err != nil || n != 0 {
			t.Fatalf("skus: %d %v", n, err)
		}
		// The same key in two different objects is no duplicate.
		body := `{"query": "query($a: Int, $b: Int) { a: apiKeys(first: $a) { totalCount } b: apiKeys(first: $b) { totalCount } }", "variables": {"a": 1, "b": 2}, "extensions": {"a": {"a": 1, "b": [{"a": 1}, {"a": 2}]}}}`
		if r := a.Do(t, "POST", a.AdminURL+"/graphql", body, "X-API-Key", a.Key, "Content-Type", "application/json"); r.Status != 200 {
			t.Fatalf("well-formed: %d %s", r.Status, r.Body)
		}
	})
}

// TestInvalidJSONGETParams: a GET whose variables or extensions parameter
// is no JSON object is answered 400 INVALID_JSON in both refusal shapes
// (gqlgen alone answered without a code); a mutation in its query is
// audited as refused; well-formed parameters still run.
func TestInvalidJSONGETParams(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		const query = `query Q($n: Int) { apiKeys(first: $n) { totalCount } }`
		get := func(params url.Values) (int, string, []graphtest.Error, string) {
			t.Helper()
			r := a.Do(t, "GET", a.AdminURL+"/graphql?"+params.Encode(), "", "X-API-Key", a.Key)
			var out struct {
				Error, Message string
				Errors         []graphtest.Error `json:"errors"`
			}
			r.JSON(t, &out)
			return r.Status, out.Error, out.Errors, out.Message
		}
		for _, c := range []struct{ name, value, says string }{
			{"variables", `{"n": 1`, "the variables parameter ends before its JSON does"},
			{"variables", `[1]`, "the variables parameter is a JSON array"},
			{"extensions", `{x}`, "the extensions parameter is not valid JSON"},
		} {
			st, short, errs, msg := get(url.Values{"query": {query}, c.name: {c.value}})
			if st != 400 || short != "invalid_json" || len(errs) != 1 || errs[0].Code() != "INVALID_JSON" || errs[0].Message != msg || !strings.HasPrefix(msg, c.says) {
				t.Fatalf("%s=%s: %d %s %+v %q", c.name, c.value, st, short, errs, msg)
			}
		}
		before := lastEventID(t, a)
		if st, _, errs, _ := get(url.Values{"query": {`mutation { createSku(input: {name: "x", stock: 1}) { id } }`}, "variables": {"{"}}); st != 400 || len(errs) != 1 || errs[0].Code() != "INVALID_JSON" {
			t.Fatalf("GET mutation with bad variables: %d %+v", st, errs)
		}
		if got := eventsAfter(t, a, before, 1); len(got) != 1 || got[0].Mutation != "createSku" || got[0].Outcome != "REFUSED" || got[0].Code != "INVALID_JSON" {
			t.Fatalf("audit: %+v", got)
		}
		if st, _, errs, _ := get(url.Values{"query": {query}, "variables": {`{"n": 1}`}, "extensions": {`{}`}}); st != 200 || len(errs) != 0 {
			t.Fatalf("well-formed: %d %+v", st, errs)
		}
	})
}

// TestPersistedQueryErrorsHaveACode: gqlgen's refusals of the
// persistedQuery extension (a hash that does not match the query, an
// unknown version, data of the wrong shape) carry extensions.code like
// every other error; an unknown hash keeps PERSISTED_QUERY_NOT_FOUND.
func TestPersistedQueryErrorsHaveACode(t *testing.T) {
	a := graphtest.StartAdmin(t, testenv.Backend{Name: "sqlite"})
	for _, c := range []struct{ ext, code string }{
		{`{"persistedQuery": {"version": 1, "sha256Hash": "00"}}`, "PERSISTED_QUERY_INVALID"},
		{`{"persistedQuery": {"version": 2, "sha256Hash": "00"}}`, "PERSISTED_QUERY_INVALID"},
		{`{"persistedQuery": {"version": "x"}}`, "PERSISTED_QUERY_INVALID"},
	} {
		body := `{"query": "{ apiKeys(first: 1) { totalCount } }", "extensions": ` + c.ext + `}`
		r := a.Do(t, "POST", a.AdminURL+"/graphql", body, "X-API-Key", a.Key, "Content-Type", "application/json")
		var out struct {
			Errors []graphtest.Error `json:"errors"`
		}
		r.JSON(t, &out)
		if len(out.Errors) != 1 || out.Errors[0].Code() != c.code {
			t.Fatalf("extensions %s: %d %s", c.ext, r.Status, r.Body)
		}
	}
	body := `{"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "00"}}}`
	r := a.Do(t, "POST", a.AdminURL+"/graphql", body, "X-API-Key", a.Key, "Content-Type", "application/json")
	var out struct {
		Errors []graphtest.Error `json:"errors"`
	}
	r.JSON(t, &out)
	if len(out.Errors) != 1 || out.Errors[0].Code() != "PERSISTED_QUERY_NOT_FOUND" {
		t.Fatalf("unknown hash: %d %s", r.Status, r.Body)
	}
}
