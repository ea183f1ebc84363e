// Package graphtest holds what the black-box tests of the admin GraphQL
// API share (graph, graph/guard, graph/playground): a running gatehouse
// with an admin API key, a GraphQL call and its decoded answer, and small
// readers of decoded JSON. Importing it lowers the bcrypt cost for the
// test binary (users are created in most tests).
package graphtest

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

// Admin is a running gatehouse with an admin API key.
type Admin struct {
	*apptest.Env
	Key string
}

// StartAdmin starts gatehouse on b with a fresh enabled API key.
func StartAdmin(t *testing.T, b testenv.Backend, opts ...apptest.Option) *Admin {
	t.Helper()
	e := apptest.Start(t, b, opts...)
	_, key, err := e.App.APIKeys.Create(context.Background(), "test", apikey.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return &Admin{Env: e, Key: key}
}

// Error is one GraphQL error.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code is the error's extensions.code.
func (e Error) Code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// Result is a GraphQL response with its HTTP status and raw body.
type Result struct {
	Status     int
	Body       string
	Data       map[string]any
	Errors     []Error
	Extensions map[string]any
}

// GQL posts query with variables, authenticated with key.
func (a *Admin) GQL(t testing.TB, query string, vars map[string]any) Result {
	t.Helper()
	return GQLAs(t, a.Env, a.Key, query, vars)
}

// GQLAs posts query with variables as GQL does, authenticated with key
// (none when empty), to e's admin listener.
func GQLAs(t testing.TB, e *apptest.Env, key, query string, vars map[string]any) Result {
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
	res := Result{Status: r.Status, Body: string(r.Body)}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/") {
		var out struct {
			Data       map[string]any `json:"data"`
			Errors     []Error        `json:"errors"`
			Extensions map[string]any `json:"extensions"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatalf("decode %s: %v", r.Body, err)
		}
		res.Data, res.Errors, res.Extensions = out.Data, out.Errors, out.Extensions
	}
	return res
}

// OK fails the test unless the response is a success without errors, and
// returns data[field].
func (r Result) OK(t testing.TB, field string) map[string]any {
	t.Helper()
	if r.Status != 200 || len(r.Errors) > 0 {
		t.Fatalf("want success, got HTTP %d: %s", r.Status, r.Body)
	}
	v, _ := r.Data[field].(map[string]any)
	return v
}

// Fails fails the test unless the response has exactly one error with code.
func (r Result) Fails(t testing.TB, code string) Error {
	t.Helper()
	if len(r.Errors) != 1 || r.Errors[0].Code() != code {
		t.Fatalf("want one error with code %s, got HTTP %d: %s", code, r.Status, r.Body)
	}
	return r.Errors[0]
}

// Dig follows a path of object keys and array indexes in decoded JSON.
func Dig(v any, path ...any) any {
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

// Str is the string at path (see Dig); "" when it is not one.
func Str(v any, path ...any) string {
	s, _ := Dig(v, path...).(string)
	return s
}

// IntID reads a GraphQL ID (a JSON string) as an integer.
func IntID(t testing.TB, v any, path ...any) int {
	t.Helper()
	n, err := strconv.Atoi(Str(v, path...))
	if err != nil {
		t.Fatalf("id at %v: %v", path, err)
	}
	return n
}

// Count64 reads an Int64 (a JSON string of digits) as an int; -1 when
// it is not one.
func Count64(v any, path ...any) int {
	n, err := strconv.Atoi(Str(v, path...))
	if err != nil {
		return -1
	}
	return n
}

// Num is the JSON number at path (see Dig) as an int.
func Num(v any, path ...any) int {
	f, _ := Dig(v, path...).(float64)
	return int(f)
}

// Eventually polls cond every 20 ms until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// OpenDB opens the database at url for direct checks.
func OpenDB(t testing.TB, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Remarshal converts decoded JSON into v.
func Remarshal(from, v any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
