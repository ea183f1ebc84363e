package paysandbox

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/outbound"
)

// TestSandboxChecksLikeAProvider: a correctly signed refund is accepted
// (and replayed for its Idempotency-Key); each broken part is refused.
func TestSandboxChecksLikeAProvider(t *testing.T) {
	s, err := Start(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("not on loopback: %s", s.URL)
	}
	const body = `{"order_no":"SO1","amount":"99.90","reason":"r"}`
	type req struct {
		body, key, ts, nonce, sig, idem, ctype string
	}
	n := 0
	good := func() req {
		n++
		ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
		nonce := "nonce-" + strconv.Itoa(n)
		return req{body: body, key: s.APIKey, ts: ts, nonce: nonce, sig: s.signature([]byte(body), ts, nonce), idem: "refund-SO1", ctype: "application/json"}
	}
	send := func(r req) (int, string, http.Header) {
		t.Helper()
		hr, _ := http.NewRequest(http.MethodPost, s.URL+"/refunds", bytes.NewReader([]byte(r.body)))
		for k, v := range map[string]string{"Content-Type": r.ctype, outbound.HeaderAPIKey: r.key, outbound.HeaderTimestamp: r.ts,
			outbound.HeaderNonce: r.nonce, outbound.HeaderSignature: r.sig, "Idempotency-Key": r.idem} {
			if v != "" {
				hr.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}

	first := good()
	st, out, _ := send(first)
	if st != 200 || !strings.Contains(out, `"status":"succeeded"`) || !strings.Contains(out, `"amount":"99.90"`) {
		t.Fatalf("good request: %d %s", st, out)
	}
	st, again, h := send(good())
	if st != 200 || again != out || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s %v", st, again, h)
	}
	st, _, _ = send(first) // the same nonce again
	if st != 401 {
		t.Errorf("replayed nonce: %d", st)
	}

	old := time.Now().Add(-6 * time.Minute).UnixMilli()
	broken := map[string]func(r *req){
		"wrong API key":     func(r *req) { r.key = "sandbox_other" },
		"no API key":        func(r *req) { r.key = "" },
		"bad signature":     func(r *req) { r.sig = s.signature([]byte(r.body+" "), r.ts, r.nonce) },
		"no signature":      func(r *req) { r.sig = "" },
		"signed other body": func(r *req) { r.body = strings.Replace(r.body, "99.90", "999.90", 1) },
		"old timestamp": func(r *req) {
			r.ts = strconv.FormatInt(old, 10)
			r.sig = s.signature([]byte(r.body), r.ts, r.nonce)
		},
		"no nonce":           func(r *req) { r.nonce = ""; r.sig = s.signature([]byte(r.body), r.ts, "") },
		"no idempotency key": func(r *req) { r.idem = "" },
		"key reused with another body": func(r *req) {
			r.body = strings.Replace(r.body, `"r"`, `"s"`, 1)
			r.sig = s.signature([]byte(r.body), r.ts, r.nonce)
		},
		"not JSON": func(r *req) {
			r.idem, r.body = "refund-SO2", "order_no=SO2"
			r.sig = s.signature([]byte(r.body), r.ts, r.nonce)
		},
		"amount as a number": func(r *req) {
			r.idem, r.body = "refund-SO3", `{"order_no":"SO3","amount":99.9,"reason":""}`
			r.sig = s.signature([]byte(r.body), r.ts, r.nonce)
		},
	}
	for name, breakIt := range broken {
		r := good()
		breakIt(&r)
		if st, out, _ := send(r); st < 400 || st > 499 {
			t.Errorf("%s: %d %s", name, st, out)
		}
	}
}
