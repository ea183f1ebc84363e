package paysandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"gatehouse/internal/outbound"
	"gatehouse/internal/secret"
)

// Limits of the sandbox's checks, like a real provider's.
const (
	maxClockSkew = 5 * time.Minute
	maxBody      = 64 << 10
)

var amountRE = regexp.MustCompile(`^[0-9]{1,13}\.[0-9]{2}$`)

type refundRequest struct {
	OrderNo *string `json:"order_no"`
	Amount  *string `json:"amount"`
	Reason  *string `json:"reason"`
}

// reply is an answer, kept per Idempotency-Key with the body it answered.
type reply struct {
	status int
	body   []byte
	req    []byte
}

// refund handles POST /refunds.
func (s *Sandbox) refund(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.fail(w, http.StatusRequestEntityTooLarge, "payload_too_large", "the body must be at most 64 KiB")
		return
	}
	if status, code, msg := s.authenticate(r, body); status != 0 {
		s.fail(w, status, code, msg)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		s.fail(w, http.StatusBadRequest, "invalid_request", "Idempotency-Key is required (at most 255 characters)")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.refunds[key]; ok {
		if !bytes.Equal(prev.req, body) {
			s.fail(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used with another body")
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		s.write(w, prev.status, prev.body)
		return
	}
	var in refundRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if r.Header.Get("Content-Type") != "application/json" || dec.Decode(&in) != nil ||
		in.OrderNo == nil || *in.OrderNo == "" || in.Amount == nil || !amountRE.MatchString(*in.Amount) {
		s.fail(w, http.StatusBadRequest, "invalid_request", `want application/json {"order_no": "...", "amount": "99.90", "reason": "..."}`)
		return
	}
	out, _ := json.Marshal(map[string]string{
		"refund_id": secret.RandomToken("rf_sandbox_", 9),
		"order_no":  *in.OrderNo,
		"amount":    *in.Amount,
		"status":    "succeeded",
	})
	s.refunds[key] = reply{status: http.StatusOK, body: out, req: body}
	s.log.Info("payment SANDBOX accepted a refund (no money moved)", "order_no", *in.OrderNo, "amount", *in.Amount)
	s.write(w, http.StatusOK, out)
}

// authenticate checks the four signed headers; a zero status means the
// request is gatehouse's.
func (s *Sandbox) authenticate(r *http.Request, body []byte) (int, string, string) {
	if !secret.Equal(r.Header.Get(outbound.HeaderAPIKey), s.APIKey) {
		return http.StatusUnauthorized, "invalid_api_key", "unknown X-API-Key"
	}
	ts, nonce := r.Header.Get(outbound.HeaderTimestamp), r.Header.Get(outbound.HeaderNonce)
	ms, err := strconv.ParseInt(ts, 10, 64)
	now := s.now()
	if err != nil || now.Sub(time.UnixMilli(ms)).Abs() > maxClockSkew {
		return http.StatusUnauthorized, "request_expired", "X-Timestamp must be milliseconds since the epoch, within 5 minutes"
	}
	if nonce == "" || len(nonce) > 64 {
		return http.StatusUnauthorized, "invalid_nonce", "X-Nonce must be 1 to 64 characters"
	}
	if !secret.Equal(r.Header.Get(outbound.HeaderSignature), s.signature(body, ts, nonce)) {
		return http.StatusUnauthorized, "invalid_signature", "X-Signature is not Base64(HMAC-SHA256(secret, body + timestamp + nonce))"
	}
	if !s.useNonce(nonce, now) {
		return http.StatusUnauthorized, "duplicate_nonce", "this X-Nonce was already used"
	}
	return 0, "", ""
}

// useNonce records nonce and reports whether it was new. A nonce is kept
// as long as a request carrying it could still pass the timestamp check.
func (s *Sandbox) useNonce(nonce string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, until := range s.nonces {
		if now.After(until) {
			delete(s.nonces, n)
		}
	}
	if _, seen := s.nonces[nonce]; seen {
		return false
	}
	s.nonces[nonce] = now.Add(2 * maxClockSkew)
	return true
}

func (s *Sandbox) fail(w http.ResponseWriter, status int, code, msg string) {
	s.log.Warn("payment SANDBOX refused a request", "status", status, "error", code)
	body, _ := json.Marshal(map[string]string{"error": code, "message": msg})
	s.write(w, status, body)
}

func (s *Sandbox) write(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
