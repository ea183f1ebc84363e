package rest

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"gatehouse/internal/httpx"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
)

// Business codes of the partner envelope (CONTRACT §2).
const (
	CodeSuccess          = 200
	CodeInvalidAppKey    = 4001
	CodeSignatureError   = 4002
	CodeRequestExpired   = 4003
	CodeDuplicateNonce   = 4004
	CodeRateLimited      = 429
	CodeOrderNotFound    = 5001
	CodeParamInvalid     = 5002
	CodePermissionDenied = 5003
	CodeSystemError      = 6000
)

// codeInfo is the one table of code → default HTTP status and message
// meaning. Messages on errors start with the meaning, optionally followed
// by ": <detail>".
var codeInfo = map[int]struct {
	status  int
	meaning string
}{
	CodeSuccess:          {http.StatusOK, "success"},
	CodeInvalidAppKey:    {http.StatusUnauthorized, "invalid app key"},
	CodeSignatureError:   {http.StatusUnauthorized, "signature verification failed"},
	CodeRequestExpired:   {http.StatusUnauthorized, "request expired"},
	CodeDuplicateNonce:   {http.StatusUnauthorized, "duplicate request"},
	CodeRateLimited:      {http.StatusTooManyRequests, "too many requests"},
	CodeOrderNotFound:    {http.StatusNotFound, "order does not exist"},
	CodeParamInvalid:     {http.StatusBadRequest, "parameter validation failed"},
	CodePermissionDenied: {http.StatusForbidden, "no access to the resource"},
	CodeSystemError:      {http.StatusInternalServerError, "system busy"},
}

// Envelope is the body of every reply under /api/v{n}/.
type Envelope struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Data is absent on errors.
	Data      any    `json:"data,omitempty"`
	Timestamp int64  `json:"timestamp"`
	RequestID string `json:"request_id"`
}

// WriteEnvelope writes a success (HTTP 200, code 200) carrying data.
func WriteEnvelope(w http.ResponseWriter, r *http.Request, data any) {
	writeEnvelope(w, r, http.StatusOK, Envelope{Code: CodeSuccess, Message: "success", Data: data})
}

// WriteEnvelopeError writes an error with code's HTTP status and message
// meaning, followed by ": detail" when detail is not empty.
func WriteEnvelopeError(w http.ResponseWriter, r *http.Request, code int, detail string) {
	info, ok := codeInfo[code]
	if !ok {
		info = codeInfo[CodeSystemError]
	}
	WriteEnvelopeErrorStatus(w, r, info.status, code, message(info.meaning, detail))
}

// WriteEnvelopeErrorStatus writes an error with an explicit status and the
// whole message, for replies whose wording the seed fixes itself (the
// deduction's "insufficient stock" 409/5002 and "business failed" 409/5001).
func WriteEnvelopeErrorStatus(w http.ResponseWriter, r *http.Request, status, code int, msg string) {
	writeEnvelope(w, r, status, Envelope{Code: code, Message: msg})
}

func message(meaning, detail string) string {
	if detail == "" {
		return meaning
	}
	return meaning + ": " + detail
}

func writeEnvelope(w http.ResponseWriter, r *http.Request, status int, e Envelope) {
	e.Timestamp = time.Now().UnixMilli()
	e.RequestID = httpx.GetRequestID(r.Context())
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	// The 4002 message shows "<secret>" literally; partners read it raw.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(e)
}

// WritePartnerError maps an error of the partner domain services to the
// envelope, in one place: a refused signed request, an order error, a
// validation error, a dependency that is down (503/6000), or anything else
// (500/6000, logged with the request id; its text never reaches the caller).
func WritePartnerError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var (
		rej  *partner.RejectError
		oval *order.ValidationError
	)
	switch {
	case errors.As(err, &rej):
		code := rejectCode(rej.Reason)
		if code == CodeRateLimited {
			h := w.Header()
			h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(rej.RetryAfter), 10))
			h.Set("X-RateLimit-Limit", strconv.Itoa(rej.Limit))
			h.Set("X-RateLimit-Remaining", "0")
		}
		// The detail can hold the signed string: it goes to the caller
		// only, never to the log.
		log.DebugContext(r.Context(), "signed request refused", "code", code, "request_id", httpx.GetRequestID(r.Context()))
		WriteEnvelopeError(w, r, code, rej.Detail)
	case errors.Is(err, order.ErrNotFound):
		WriteEnvelopeError(w, r, CodeOrderNotFound, "")
	case errors.Is(err, order.ErrForbidden):
		WriteEnvelopeError(w, r, CodePermissionDenied, "the order belongs to another app")
	case errors.As(err, &oval):
		WriteEnvelopeError(w, r, CodeParamInvalid, oval.Error())
	case errors.Is(err, partner.ErrUnavailable):
		log.ErrorContext(r.Context(), "partner API dependency unavailable", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		w.Header().Set("Retry-After", "1")
		WriteEnvelopeErrorStatus(w, r, http.StatusServiceUnavailable, CodeSystemError, message(codeInfo[CodeSystemError].meaning, "a dependency is unavailable, retry later"))
	default:
		log.ErrorContext(r.Context(), "partner API error", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		WriteEnvelopeError(w, r, CodeSystemError, "")
	}
}

func rejectCode(reason error) int {
	switch reason {
	case partner.ErrInvalidAppKey:
		return CodeInvalidAppKey
	case partner.ErrRequestExpired:
		return CodeRequestExpired
	case partner.ErrDuplicateNonce:
		return CodeDuplicateNonce
	case partner.ErrRateLimited:
		return CodeRateLimited
	default:
		return CodeSignatureError
	}
}

// retryAfterSeconds rounds up to whole seconds (Retry-After has no
// fractions), and is at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
