package graph_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

func init() {
	// Users are created in most tests: bcrypt at its lowest cost keeps
	// them fast. Set before any test runs, so no hash is in progress.
	secret.PasswordCost = 4
}

// admin is a running gatehouse with an admin API key.
type admin struct {
	*apptest.Env
	Key string
}

// startAdmin starts gatehouse on b with a fresh enabled API key.
func startAdmin(t *testing.T, b testenv.Backend, opts ...apptest.Option) *admin {
	t.Helper()
	e := apptest.Start(t, b, opts...)
	_, key, err := e.App.APIKeys.Create(context.Background(), "test", apikey.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return &admin{Env: e, Key: key}
}

// gqlError is one GraphQL error.
type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

func (e gqlError) code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// gqlResult is a GraphQL response with its HTTP status and raw body.
type gqlResult struct {
	Status     int
	Body       string
	Data       map[string]any
	Errors     []gqlError
	Extensions map[string]any
}

// gql posts query with variables, authenticated with key.
func (a *admin) gql(t testing.TB, query string, vars map[string]any) gqlResult {
	t.Helper()
	return gqlAs(t, a.Env, a.Key, query, vars)
}

func gqlAs(t testing.TB, e *apptest.Env, key, query string, vars map[string]any) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	headers := []string{"Content-Type", "application/json"}
	if key != "" {
		headers = append(headers, "X-API-Key", key)
	}
	r := e.Do(t, "POST", e.AdminURL+"/graphql", string(body), headers...)
	res := gqlResult{Status: r.Status, Body: string(r.Body)}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/") {
		var out struct {
			Data       map[string]any `json:"data"`
			Errors     []gqlError     `json:"errors"`
			Extensions map[string]any `json:"extensions"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatalf("decode %s: %v", r.Body, err)
		}
		res.Data, res.Errors, res.Extensions = out.Data, out.Errors, out.Extensions
	}
	return res
}

// ok fails the test unless the response is a success without errors, and
// returns data[field].
func (r gqlResult) ok(t testing.TB, field string) map[string]any {
	t.Helper()
	if r.Status != 200 || len(r.Errors) > 0 {
		t.Fatalf("want success, got HTTP %d: %s", r.Status, r.Body)
	}
	v, _ := r.Data[field].(map[string]any)
	return v
}

// fails fails the test unless the response has exactly one error with code.
func (r gqlResult) fails(t testing.TB, code string) gqlError {
	t.Helper()
	if len(r.Errors) != 1 || r.Errors[0].code() != code {
		t.Fatalf("want one error with code %s, got HTTP %d: %s", code, r.Status, r.Body)
	}
	return r.Errors[0]
}

// dig follows a path of object keys and array indexes in decoded JSON.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := dig(v, path...).(string)
	return s
}

// intID reads a GraphQL ID (a JSON string) as an integer.
func intID(t testing.TB, v any, path ...any) int {
	t.Helper()
	n, err := strconv.Atoi(str(v, path...))
	if err != nil {
		t.Fatalf("id at %v: %v", path, err)
	}
	return n
}

// count64 reads an Int64 (a JSON string of digits) as an int; -1 when
// it is not one.
func count64(v any, path ...any) int {
	n, err := strconv.Atoi(str(v, path...))
	if err != nil {
		return -1
	}
	return n
}

func num(v any, path ...any) int {
	f, _ := dig(v, path...).(float64)
	return int(f)
}

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openDB opens the database at url for direct checks.
func openDB(t testing.TB, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// remarshal converts decoded JSON into v.
func remarshal(from, v any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
