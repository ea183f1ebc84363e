package rest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/partner"
	"gatehouse/rest/partnerclient"
)

// signedQueries creates an app on e from in and returns a function that
// answers, at each call, a fresh signed URL (the SDK's signer: a new
// nonce each time) of a v2 query for an order that does not exist.
func signedQueries(t testing.TB, e *apptest.Env, in partner.CreateInput) func() string {
	t.Helper()
	app, sec := apptest.CreateApp(t, e, in)
	s := partnerclient.Signer{AppKey: app.AppKey, AppSecret: sec}
	return func() string {
		u, err := s.SignURL(e.PublicURL + "/api/v2/orders/query?order_no=NO-SUCH-ORDER")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
}

// expectEnvelope fails unless r is a partner envelope with that HTTP
// status, code and a message starting with msgPrefix, and without data
// when it is an error.
func expectEnvelope(t testing.TB, r apptest.Response, status, code int, msgPrefix string) {
	t.Helper()
	var env map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatalf("HTTP %d: body is not an envelope: %v\n%s", r.Status, err, r.Body)
	}
	var got struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(r.Body, &got)
	if r.Status != status || got.Code != code || !strings.HasPrefix(got.Message, msgPrefix) {
		t.Fatalf("got HTTP %d code %d %q; want HTTP %d code %d message starting %q\n%s", r.Status, got.Code, got.Message, status, code, msgPrefix, r.Body)
	}
	if _, ok := env["data"]; ok && code != 200 {
		t.Fatalf("error reply carries data: %s", r.Body)
	}
}
