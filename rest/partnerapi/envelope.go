package partnerapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/partner"
)

// Business codes of the partner envelope (docs/reference.md).
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
// whole message, for replies the partner API words itself (the
// deduction's "insufficient stock" 409/5002 and "business failed" 409/5001).
func WriteEnvelopeErrorStatus(w http.ResponseWriter, r *http.Request, status, code int, msg string) {
	writeEnvelope(w, r, status, Envelope{Code: code, Message: msg})
}

// Message is the message of an error with code: its meaning, followed by
// ": detail" when detail is not empty (what WriteEnvelopeError writes).
func Message(code int, detail string) string {
	info, ok := codeInfo[code]
	if !ok {
		info = codeInfo[CodeSystemError]
	}
	return message(info.meaning, detail)
}

func message(meaning, detail string) string {
	if detail == "" {
		return meaning
	}
	return meaning + ": " + detail
}

// Constant header values of every envelope (canonical keys).
var (
	headerJSON    = []string{"application/json; charset=utf-8"}
	headerNoStore = []string{"no-store"}
)

func writeEnvelope(w http.ResponseWriter, r *http.Request, status int, e Envelope) {
	e.Timestamp = time.Now().UnixMilli()
	e.RequestID = httpx.GetRequestID(r.Context())
	if sp := httpx.SpanOf(r.Context()); sp != nil {
		sp.SetAttributes(httpx.AttrCode.Int(e.Code))
	}
	h := w.Header()
	// Shared, never modified value slices: Set would allocate one each.
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(status)
	if _, ok := e.Data.(jsonAppender); ok || e.Data == nil {
		_, _ = w.Write(appendEnvelope(make([]byte, 0, 512), &e))
		return
	}
	enc := json.NewEncoder(w)
	// The 4002 message shows "<secret>" literally; partners read it raw.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(e)
}

// WritePartnerError maps an error to the envelope, in one place: a refused
// signed request, then one case per error kind (validation 400/5002, not
// found 404/5001, forbidden 403/5003, conflict and invalid state 409/5002,
// a dependency that is down 503/6000, with the error's own message when
// it has one: unavailableDetail), or anything else (500/6000, logged
// with the request id; its text never reaches the caller). A failure of a
// request whose client went away is no answer at all (httpx.Abandon).
func WritePartnerError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var rej *partner.RejectError
	if errors.As(err, &rej) {
		writeRejected(w, r, log, rej)
		return
	}
	kind := errs.KindOf(err)
	if (kind == errs.Unavailable || kind == errs.Internal) && httpx.ClientGone(r) {
		// The client hung up: the calls it cut short say nothing about
		// the dependencies.
		httpx.Abandon(w, r, log, "partner API", err)
		return
	}
	switch kind {
	case errs.Validation:
		WriteEnvelopeError(w, r, CodeParamInvalid, errs.Message(err))
	case errs.NotFound:
		writeEnvelopeKind(w, r, CodeOrderNotFound, errs.Message(err))
	case errs.Forbidden:
		writeEnvelopeKind(w, r, CodePermissionDenied, errs.Message(err))
	case errs.Conflict, errs.InvalidState:
		WriteEnvelopeErrorStatus(w, r, http.StatusConflict, CodeParamInvalid, message(codeInfo[CodeParamInvalid].meaning, err.Error()))
	case errs.Unavailable:
		// A full replay memory is logged by the store, rate-limited: it
		// refuses every new signed request while it lasts.
		if !errors.Is(err, partner.ErrNonceMemoryFull) {
			httpx.DependencyRefused(r.Context(), log, "partner API", err)
		}
		w.Header().Set("Retry-After", "1")
		WriteEnvelopeErrorStatus(w, r, http.StatusServiceUnavailable, CodeSystemError, message(codeInfo[CodeSystemError].meaning, unavailableDetail(err)))
	default:
		log.ErrorContext(r.Context(), "partner API error", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		WriteEnvelopeError(w, r, CodeSystemError, "")
	}
}

// unavailableDetail is what a 503 says: the message of an unavailable
// error that has one of its own (a deduction's "outcome unknown: repeat
// the call with the same biz_no"), else that a dependency is unavailable.
func unavailableDetail(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Kind == errs.Unavailable && e.Msg != "" {
		return e.Msg
	}
	return "a dependency is unavailable, retry later"
}

// writeEnvelopeKind writes code with msg as its detail, unless msg is the
// code's meaning itself ("order does not exist"), which is then not repeated.
func writeEnvelopeKind(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if msg == codeInfo[code].meaning {
		msg = ""
	}
	WriteEnvelopeError(w, r, code, msg)
}

// writeRejected answers a signed request the gate refused.
func writeRejected(w http.ResponseWriter, r *http.Request, log *slog.Logger, rej *partner.RejectError) {
	code := rejectCode(rej.Reason)
	if code == CodeRateLimited {
		h := w.Header()
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(rej.RetryAfter), 10))
		h.Set("X-RateLimit-Limit", strconv.Itoa(rej.Limit))
		h.Set("X-RateLimit-Remaining", "0")
	}
	// The detail can hold the signed string: it goes to the caller only,
	// never to the log.
	log.DebugContext(r.Context(), "signed request refused", "code", code, "request_id", httpx.GetRequestID(r.Context()))
	WriteEnvelopeError(w, r, code, rej.Detail)
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
