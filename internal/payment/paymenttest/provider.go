// Package paymenttest is a payment provider for tests: an httptest server
// on loopback that checks every request the way the provider's side of the
// contract says, independently of gatehouse's own signing code, and
// answers as the test scripts it.
package paymenttest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Call is one request the provider received.
type Call struct {
	At             time.Time // arrival, on the provider's clock
	OrderNo        string
	Amount         string
	Reason         string
	IdempotencyKey string
	Timestamp      string
	Nonce          string
	Signature      string
	// Traceparent is the W3C trace context header sent, if any.
	Traceparent string
	// Problem says which check failed ("" when the request was correct);
	// such a request is answered 401.
	Problem string
	// Status is what the provider answered.
	Status int
}

// Provider is a running test provider. Its base URL has a path ("/v1"),
// so that refunds must go to <base>/refunds.
type Provider struct {
	Server *httptest.Server
	// URL is the base URL to configure (GATEHOUSE_PAYMENT_URL).
	URL    string
	APIKey string
	Secret string

	mu      sync.Mutex
	calls   []Call
	nonces  map[string]bool
	respond func(n int, c Call) int
	hold    chan struct{} // non-nil: requests wait for it to close
	trickle bool          // the body follows the status byte by byte until Release
	arrived chan struct{} // one value per request that started to wait
}

// New starts a provider that accepts every correct request (200).
func New(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{
		APIKey:  "test-payment-key-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		Secret:  "test-payment-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		nonces:  map[string]bool{},
		respond: func(int, Call) int { return http.StatusOK },
		arrived: make(chan struct{}, 1024),
	}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.Server.URL + "/v1"
	t.Cleanup(func() {
		p.Release()
		p.Server.Close()
	})
	return p
}

// Script makes the n-th request (1-based) get statuses[n-1]; later ones
// get the last status.
func (p *Provider) Script(statuses ...int) {
	p.Respond(func(n int, _ Call) int { return statuses[min(n, len(statuses))-1] })
}

// Respond sets the status of each correct request from its number (1-based,
// counting every request) and content.
func (p *Provider) Respond(fn func(n int, c Call) int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.respond = fn
}

// Hold makes requests wait before answering until Release.
func (p *Provider) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold == nil {
		p.hold = make(chan struct{})
	}
}

// Release lets held requests answer; later ones answer at once.
func (p *Provider) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold != nil {
		close(p.hold)
		p.hold = nil
	}
}

// Trickle makes the provider send its status and headers at once, then
// its body one byte every 50 ms until Release (or until the caller hangs
// up): a provider that keeps a connection busy after it has answered.
func (p *Provider) Trickle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trickle = true
	if p.hold == nil {
		p.hold = make(chan struct{})
	}
}

// Arrived waits (up to 10 s) until a held request has arrived.
func (p *Provider) Arrived(t testing.TB) {
	t.Helper()
	select {
	case <-p.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the payment provider")
	}
}

// Calls returns the requests received so far.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// Problems returns what was wrong with the requests received, if anything.
func (p *Provider) Problems() []string {
	var out []string
	for i, c := range p.Calls() {
		if c.Problem != "" {
			out = append(out, fmt.Sprintf("call %d: %s", i+1, c.Problem))
		}
	}
	return out
}

var amountRE = regexp.MustCompile(`^[0-9]+\.[0-9]{2}$`)

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	c := Call{At: time.Now(), Traceparent: r.Header.Get("traceparent")}
	body, _ := io.ReadAll(r.Body)
	c.Problem = p.check(r, body, &c)
	p.mu.Lock()
	p.calls = append(p.calls, c)
	n := len(p.calls)
	status := http.StatusUnauthorized
	if c.Problem == "" {
		status = p.respond(n, c)
	}
	p.calls[n-1].Status = status
	hold := p.hold
	p.mu.Unlock()
	if hold != nil && p.trickleOn() {
		w.WriteHeader(status)
		for {
			_, err := w.Write([]byte(" "))
			if err == nil {
				err = http.NewResponseController(w).Flush()
			}
			if err != nil {
				return
			}
			select {
			case <-hold:
				return
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if hold != nil {
		p.arrived <- struct{}{}
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"status":%d,"order_no":%q}`, status, c.OrderNo)
}

func (p *Provider) trickleOn() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trickle
}

// check verifies one request as the contract describes the provider's
// side, and fills in c.
func (p *Provider) check(r *http.Request, body []byte, c *Call) string {
	c.IdempotencyKey = r.Header.Get("Idempotency-Key")
	c.Timestamp = r.Header.Get("X-Timestamp")
	c.Nonce = r.Header.Get("X-Nonce")
	c.Signature = r.Header.Get("X-Signature")
	var in struct {
		OrderNo *string `json:"order_no"`
		Amount  *string `json:"amount"`
		Reason  *string `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	decodeErr := dec.Decode(&in)
	if in.OrderNo != nil {
		c.OrderNo = *in.OrderNo
	}
	if in.Amount != nil {
		c.Amount = *in.Amount
	}
	if in.Reason != nil {
		c.Reason = *in.Reason
	}
	ms, tsErr := strconv.ParseInt(c.Timestamp, 10, 64)
	p.mu.Lock()
	seen := p.nonces[c.Nonce]
	p.nonces[c.Nonce] = true
	p.mu.Unlock()
	mac := hmac.New(sha256.New, []byte(p.Secret))
	mac.Write(body)
	mac.Write([]byte(c.Timestamp))
	mac.Write([]byte(c.Nonce))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/refunds":
		return fmt.Sprintf("%s %s, want POST /v1/refunds", r.Method, r.URL.Path)
	case r.Header.Get("Content-Type") != "application/json":
		return "Content-Type " + r.Header.Get("Content-Type")
	case r.Header.Get("X-API-Key") != p.APIKey:
		return "wrong X-API-Key"
	case tsErr != nil || time.Since(time.UnixMilli(ms)).Abs() > 5*time.Minute:
		return "X-Timestamp " + c.Timestamp + " is not the time in milliseconds"
	case c.Nonce == "" || len(c.Nonce) > 64:
		return "X-Nonce " + c.Nonce
	case seen:
		return "X-Nonce " + c.Nonce + " used twice"
	case r.Header.Get("X-Signature") != want:
		return "X-Signature is not Base64(HMAC-SHA256(secret, body + timestamp + nonce))"
	case decodeErr != nil || dec.More() || in.OrderNo == nil || in.Amount == nil || in.Reason == nil:
		return "body is not {order_no, amount, reason}: " + string(body)
	case !amountRE.MatchString(c.Amount):
		return "amount " + c.Amount + " is not a decimal string with two decimals"
	case c.IdempotencyKey != "refund-"+c.OrderNo:
		return "Idempotency-Key " + c.IdempotencyKey + " is not refund-<order_no>"
	}
	return ""
}
