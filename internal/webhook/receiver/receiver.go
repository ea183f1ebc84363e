// Package receiver is the receiver tool of `gatehouse webhook listen`: a
// small endpoint that verifies and prints deliveries, to try gatehouse out.
package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"gatehouse/internal/webhook/sender"
)

// maxListenBody bounds the body the receiver reads.
const maxListenBody = 1 << 20

// Package receiver is the receiver tool of `gatehouse webhook listen`.
// Receiver is a small webhook endpoint for trying gatehouse out (`gatehouse
// webhook listen`): it verifies each request's Standard Webhooks signature
// with the app's secret (the reference library, as a partner would),
// prints the delivery — headers that matter, the message, bizData decoded
// — and answers 204, or 401 when the signature does not verify (so the
// delivery log shows the failure and its retries).
type Receiver struct {
	wh  *standardwebhooks.Webhook // nil: no secret, nothing verified
	out io.Writer
	mu  sync.Mutex // one delivery printed at a time
	n   int
}

// NewReceiver returns a Receiver printing to out that verifies with secret
// ("whsec_…"); with an empty secret it prints without verifying.
func NewReceiver(secret string, out io.Writer) (*Receiver, error) {
	r := &Receiver{out: out}
	if secret != "" {
		if _, err := sender.ParseSecret(secret); err != nil {
			return nil, err
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		r.wh = wh
	}
	return r, nil
}

// ServeHTTP receives one delivery.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxListenBody))
	if err != nil {
		http.Error(w, "could not read the body", http.StatusBadRequest)
		return
	}
	verdict, status := "not checked (no --secret given)", http.StatusNoContent
	if r.wh != nil {
		if err := r.wh.Verify(body, req.Header); err != nil {
			verdict, status = "INVALID: "+err.Error()+" — answering 401", http.StatusUnauthorized
		} else {
			verdict = "verified"
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	var b bytes.Buffer
	fmt.Fprintf(&b, "\n── delivery %d at %s: %s %s\n", r.n, time.Now().Format("15:04:05.000"), req.Method, req.URL.RequestURI())
	fmt.Fprintf(&b, "webhook-id:        %s\n", req.Header.Get(sender.HeaderID))
	fmt.Fprintf(&b, "webhook-timestamp: %s\n", req.Header.Get(sender.HeaderTimestamp))
	fmt.Fprintf(&b, "webhook-signature: %s\n", sender.RedactSignature(req.Header.Get(sender.HeaderSignature)))
	fmt.Fprintf(&b, "signature:         %s\n", verdict)
	var m sender.Message
	if json.Unmarshal(body, &m) == nil && m.EventType != "" {
		fmt.Fprintf(&b, "eventType: %s   retryCount: %d/%d   createTime: %s\n", m.EventType, m.RetryCount, m.MaxRetry,
			time.UnixMilli(m.CreateTime).UTC().Format("2006-01-02T15:04:05.000Z"))
		var biz bytes.Buffer
		if json.Indent(&biz, []byte(m.BizData), "  ", "  ") == nil {
			fmt.Fprintf(&b, "bizData:\n  %s\n", biz.String())
		} else {
			fmt.Fprintf(&b, "bizData: %q\n", m.BizData)
		}
	} else {
		fmt.Fprintf(&b, "body (%d bytes): %.2000s\n", len(body), body)
	}
	_, _ = r.out.Write(b.Bytes())
	w.WriteHeader(status)
}
