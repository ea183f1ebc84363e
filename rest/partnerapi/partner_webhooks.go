package partnerapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// The partner's own webhooks (v3, /api/v3/webhooks/… and /api/v3/usage):
// endpoints, deliveries, the catalogue and usage, each scoped to the app
// that signed the call. A JSON body is bound to the signature by the signed
// parameter content_sha256 (hex SHA-256 of the body).

// webhookEndpoints are the v3 endpoints of the partner's webhooks.
var webhookEndpoints = []PartnerEndpoint{
	{http.MethodGet, "/webhooks/endpoints", partnerWebhooks.listEndpoints},
	{http.MethodPost, "/webhooks/endpoints", partnerWebhooks.createEndpoint},
	{http.MethodGet, "/webhooks/endpoints/{id}", partnerWebhooks.getEndpoint},
	{http.MethodPatch, "/webhooks/endpoints/{id}", partnerWebhooks.updateEndpoint},
	{http.MethodDelete, "/webhooks/endpoints/{id}", partnerWebhooks.deleteEndpoint},
	{http.MethodPost, "/webhooks/endpoints/{id}/rotate-secret", partnerWebhooks.rotateSecret},
	{http.MethodPost, "/webhooks/endpoints/{id}/test", partnerWebhooks.sendTest},
	{http.MethodGet, "/webhooks/deliveries", partnerWebhooks.listDeliveries},
	{http.MethodGet, "/webhooks/deliveries/{id}", partnerWebhooks.getDelivery},
	{http.MethodPost, "/webhooks/deliveries/{id}/resend", partnerWebhooks.resend},
	{http.MethodPost, "/webhooks/recover", partnerWebhooks.recover},
	{http.MethodGet, "/webhooks/event-types", partnerWebhooks.eventTypes},
	{http.MethodGet, "/usage", partnerWebhooks.usage},
}

// partnerWebhooks groups the handlers' builders (a namespace).
var partnerWebhooks partnerWebhookHandlers

type partnerWebhookHandlers struct{}

// ParamContentSHA256 is the signed parameter that binds a request body.
const ParamContentSHA256 = "content_sha256"

// appHandler is a handler of an admitted call: app is the caller's id, body
// the request body (verified against content_sha256; nil when empty).
type appHandler func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, body []byte)

// scoped adapts fn into an endpoint builder: it finds the admitted caller,
// reads and checks the body, and maps errors in the envelope.
func scoped(fn appHandler) func(Partner) http.Handler {
	return func(h Partner) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			adm, ok := partner.AdmittedFromContext(r.Context())
			if !ok || adm.App == nil || h.Webhooks == nil {
				WritePartnerError(w, r, h.Log, errors.New("partner webhooks: reached without the gate or the webhook service"))
				return
			}
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpx.MaxBodyBytes))
			if err != nil {
				WriteEnvelopeErrorStatus(w, r, http.StatusRequestEntityTooLarge, CodeParamInvalid,
					message(codeInfo[CodeParamInvalid].meaning, "request body must be at most 64 KiB"))
				return
			}
			if detail := bodyBinding(body, param(adm, ParamContentSHA256)); detail != "" {
				WriteEnvelopeError(w, r, CodeSignatureError, detail)
				return
			}
			if len(body) == 0 {
				body = nil
			}
			fn(h, w, r, adm, body)
		})
	}
}

// bodyBinding says why body does not match the signed digest, or "".
func bodyBinding(body []byte, signed string) string {
	if len(body) == 0 && signed == "" {
		return ""
	}
	if signed == "" {
		return "a request with a body must sign content_sha256, the hex SHA-256 of the body"
	}
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(signed)), []byte(want)) != 1 {
		return "content_sha256 does not match the body's SHA-256: the body was changed after signing, or the digest was taken of other bytes"
	}
	return ""
}

// param is the signed parameter name's value ("" when absent).
func param(adm *partner.Admitted, name string) string {
	v, _ := adm.Query.Get(name)
	return v
}

// pathID reads the {id} of the route; a malformed id is as unknown as any.
func pathID(r *http.Request) (int, bool) {
	id, err := strconv.Atoi(chi.URLParam(r, "id"))
	return id, err == nil && id > 0
}

// endpointJSON is a webhook endpoint as a partner sees it (never its secret).
type endpointJSON struct {
	ID                      int      `json:"id"`
	URL                     string   `json:"url"`
	Description             string   `json:"description"`
	EventTypes              []string `json:"event_types"`
	Enabled                 bool     `json:"enabled"`
	AutoDisabledAt          *string  `json:"auto_disabled_at"`
	RateLimit               *int     `json:"rate_limit"`
	RetrySchedule           []int    `json:"retry_schedule"`
	HeaderNames             []string `json:"header_names"`
	PreviousSecretExpiresAt *string  `json:"previous_secret_expires_at"`
	CreateTime              string   `json:"create_time"`
	UpdateTime              string   `json:"update_time"`
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func fmtTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := fmtTime(*t)
	return &s
}

// presentEndpoint shows ep (loaded whole: its custom headers are named,
// never their values); retry_schedule is null for the default schedule.
func presentEndpoint(h Partner, ep *ent.WebhookEndpoint) (endpointJSON, error) {
	types := ep.EventTypes
	if types == nil {
		types = []string{}
	}
	names, err := h.Webhooks.HeaderNamesOf(ep)
	if err != nil {
		return endpointJSON{}, err
	}
	return endpointJSON{
		ID: ep.ID, URL: ep.URL, Description: ep.Description, EventTypes: types, Enabled: ep.Enabled,
		AutoDisabledAt: fmtTimePtr(ep.AutoDisabledAt), RateLimit: ep.RateLimit,
		RetrySchedule: ep.RetrySchedule, HeaderNames: names,
		PreviousSecretExpiresAt: fmtTimePtr(ep.PreviousSecretExpiresAt),
		CreateTime:              fmtTime(ep.CreateTime), UpdateTime: fmtTime(ep.UpdateTime),
	}, nil
}

// writeEndpoint answers ep, or the error of showing it.
func writeEndpoint(h Partner, w http.ResponseWriter, r *http.Request, ep *ent.WebhookEndpoint, secret string) {
	out, err := presentEndpoint(h, ep)
	if err != nil {
		WritePartnerError(w, r, h.Log, err)
		return
	}
	if secret != "" {
		WriteEnvelope(w, r, endpointWithSecret{Endpoint: out, Secret: secret})
		return
	}
	WriteEnvelope(w, r, out)
}

// endpointWithSecret answers a create or a rotation: the secret, once.
type endpointWithSecret struct {
	Endpoint endpointJSON `json:"endpoint"`
	Secret   string       `json:"secret"`
}

func (partnerWebhookHandlers) listEndpoints(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		eps, err := h.Webhooks.AppEndpoints(r.Context(), adm.App.ID)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		out := make([]endpointJSON, len(eps))
		for i, ep := range eps {
			if out[i], err = presentEndpoint(h, ep); err != nil {
				WritePartnerError(w, r, h.Log, err)
				return
			}
		}
		WriteEnvelope(w, r, map[string]any{"endpoints": out})
	})(h)
}

// endpointBody reads a create or update body into in: url, description,
// event_types (null or []: every type), rate_limit (null clears it),
// enabled, retry_schedule (seconds before each retry; null: the default
// schedule) or retry_preset (DEFAULT, LONG), headers (name → value; null
// or {}: none). Unknown members are refused, naming them.
func endpointBody(body []byte, in *webhook.EndpointInput) error {
	if body == nil {
		return errs.Invalid("", "a JSON object is required, e.g. {\"url\": \"https://…\"}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return errs.Invalid("", "the body must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.Invalid("", "the body must hold one JSON object and nothing after it")
	}
	for name, raw := range obj {
		null := string(raw) == "null"
		var err error
		switch name {
		case "url":
			in.URL = new(string)
			err = json.Unmarshal(raw, in.URL)
		case "description":
			in.Description = new(string)
			err = json.Unmarshal(raw, in.Description)
		case "event_types":
			types := []string{}
			if !null {
				err = json.Unmarshal(raw, &types)
			}
			in.EventTypes = &types
		case "rate_limit":
			if null {
				in.ClearRateLimit = true
				continue
			}
			in.RateLimit = new(int)
			err = json.Unmarshal(raw, in.RateLimit)
		case "enabled":
			in.Enabled = new(bool)
			err = json.Unmarshal(raw, in.Enabled)
		case "retry_schedule":
			if null {
				p := sender.PresetDefault
				in.RetryPreset = &p
				continue
			}
			in.RetrySchedule = new([]int)
			err = json.Unmarshal(raw, in.RetrySchedule)
		case "retry_preset":
			in.RetryPreset = new(sender.RetryPreset)
			err = json.Unmarshal(raw, in.RetryPreset)
		case "headers":
			hs := map[string]string{}
			if !null {
				err = json.Unmarshal(raw, &hs)
			}
			in.Headers = &hs
		default:
			return errs.Invalid(name, "is not a member of a webhook endpoint (url, description, event_types, rate_limit, enabled, retry_schedule, retry_preset, headers)")
		}
		if err != nil || (null && name != "event_types" && name != "headers") {
			return errs.Invalid(name, "%s has the wrong type", name)
		}
	}
	return nil
}

func (partnerWebhookHandlers) createEndpoint(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, body []byte) {
		var in webhook.EndpointInput
		if err := endpointBody(body, &in); err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		ep, secret, err := h.Webhooks.CreateEndpoint(r.Context(), adm.App.ID, in)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		writeEndpoint(h, w, r, ep, secret)
	})(h)
}

// ownEndpoint is the {id} endpoint if the caller owns it; else it answers
// 404/5001 (another app's id is as unknown as a missing one) and false.
func ownEndpoint(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted) (*ent.WebhookEndpoint, bool) {
	id, ok := pathID(r)
	if !ok {
		WritePartnerError(w, r, h.Log, webhook.ErrEndpointNotFound)
		return nil, false
	}
	ep, err := h.Webhooks.AppEndpoint(r.Context(), adm.App.ID, id)
	if err != nil {
		WritePartnerError(w, r, h.Log, err)
		return nil, false
	}
	return ep, true
}

func (partnerWebhookHandlers) getEndpoint(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		if ep, ok := ownEndpoint(h, w, r, adm); ok {
			writeEndpoint(h, w, r, ep, "")
		}
	})(h)
}

func (partnerWebhookHandlers) updateEndpoint(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, body []byte) {
		ep, ok := ownEndpoint(h, w, r, adm)
		if !ok {
			return
		}
		var in webhook.EndpointInput
		if err := endpointBody(body, &in); err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		enabled := in.Enabled
		in.Enabled = nil
		out, err := h.Webhooks.UpdateEndpoint(r.Context(), ep.ID, in)
		if err == nil && enabled != nil && *enabled != out.Enabled {
			out, err = h.Webhooks.SetEndpointEnabled(r.Context(), ep.ID, *enabled)
		}
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		writeEndpoint(h, w, r, out, "")
	})(h)
}

func (partnerWebhookHandlers) deleteEndpoint(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		ep, ok := ownEndpoint(h, w, r, adm)
		if !ok {
			return
		}
		out, err := h.Webhooks.DeleteEndpoint(r.Context(), ep.ID)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		writeEndpoint(h, w, r, out, "")
	})(h)
}

func (partnerWebhookHandlers) rotateSecret(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		ep, ok := ownEndpoint(h, w, r, adm)
		if !ok {
			return
		}
		out, secret, err := h.Webhooks.RotateEndpointSecret(r.Context(), ep.ID)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		writeEndpoint(h, w, r, out, secret)
	})(h)
}

func (partnerWebhookHandlers) sendTest(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		ep, ok := ownEndpoint(h, w, r, adm)
		if !ok {
			return
		}
		d, err := h.Webhooks.SendTest(r.Context(), adm.App.ID, ep.ID, param(adm, "event_type"))
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		WriteEnvelope(w, r, presentDelivery(d))
	})(h)
}

// deliveryJSON is a delivery as a partner sees it.
type deliveryJSON struct {
	ID            int            `json:"id"`
	EventID       string         `json:"event_id"`
	EventType     string         `json:"event_type"`
	EndpointID    *int           `json:"endpoint_id"`
	Status        string         `json:"status"`
	AttemptCount  int            `json:"attempt_count"`
	NextAttemptAt *string        `json:"next_attempt_at"`
	LastError     string         `json:"last_error,omitempty"`
	CreateTime    string         `json:"create_time"`
	UpdateTime    string         `json:"update_time"`
	Payload       *string        `json:"payload,omitempty"`
	Attempts      *[]attemptJSON `json:"attempts,omitempty"`
}

// attemptJSON is one attempt of a delivery.
type attemptJSON struct {
	AttemptNo      int    `json:"attempt_no"`
	StartedAt      string `json:"started_at"`
	DurationMs     int64  `json:"duration_ms"`
	ResponseStatus *int   `json:"response_status"`
	ResponseBody   string `json:"response_body"`
	Error          string `json:"error,omitempty"`
}

func presentDelivery(d *ent.WebhookDelivery) deliveryJSON {
	out := deliveryJSON{
		ID: d.ID, EventID: d.EventID, EventType: d.EventType, EndpointID: d.EndpointID, Status: string(d.Status),
		AttemptCount: d.AttemptCount, LastError: d.LastError, CreateTime: fmtTime(d.CreateTime), UpdateTime: fmtTime(d.UpdateTime),
	}
	if d.Status == dispatch.StatusPending || d.Status == dispatch.StatusRetrying {
		out.NextAttemptAt = fmtTimePtr(&d.NextAttemptAt)
	}
	return out
}

// maxResponseExcerpt bounds the receiver's answer shown per attempt.
const maxResponseExcerpt = 2048

func presentDeliveryDetail(d *ent.WebhookDelivery) deliveryJSON {
	out := presentDelivery(d)
	payload := d.BizData
	out.Payload = &payload
	attempts := []attemptJSON{}
	for _, a := range d.Edges.Attempts {
		body := a.ResponseBody
		if len(body) > maxResponseExcerpt {
			body = body[:maxResponseExcerpt]
		}
		attempts = append(attempts, attemptJSON{
			AttemptNo: a.AttemptNo, StartedAt: fmtTime(a.StartedAt), DurationMs: a.DurationMs,
			ResponseStatus: a.ResponseStatus, ResponseBody: body, Error: a.Error,
		})
	}
	out.Attempts = &attempts
	return out
}

// deliveryFilter reads the listing's parameters: status, event_type,
// endpoint_id, since (RFC 3339), limit (1–100, default 20), cursor (the
// next_cursor of the previous page).
func deliveryFilter(get func(string) string) (webhook.DeliveryFilter, error) {
	f := webhook.DeliveryFilter{Status: get("status"), EventType: get("event_type")}
	atoi := func(name string) (int, error) {
		v := get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, errs.Invalid(name, "%s must be a positive whole number", name)
		}
		return n, nil
	}
	var err error
	if f.EndpointID, err = atoi("endpoint_id"); err != nil {
		return f, err
	}
	if f.Before, err = atoi("cursor"); err != nil {
		return f, err
	}
	if f.Limit, err = atoi("limit"); err != nil {
		return f, err
	}
	if v := get("since"); v != "" {
		if f.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return f, errs.Invalid("since", "since must be an RFC 3339 time such as 2026-11-29T00:00:00Z")
		}
	}
	return f, nil
}

func (partnerWebhookHandlers) listDeliveries(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		f, err := deliveryFilter(func(n string) string { return param(adm, n) })
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		ds, more, err := h.Webhooks.AppDeliveries(r.Context(), adm.App.ID, f)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		out := make([]deliveryJSON, len(ds))
		for i, d := range ds {
			out[i] = presentDelivery(d)
		}
		var next *string
		if more {
			c := strconv.Itoa(ds[len(ds)-1].ID)
			next = &c
		}
		WriteEnvelope(w, r, map[string]any{"deliveries": out, "next_cursor": next})
	})(h)
}

// ownDelivery reads the {id} of the route; a malformed id is not found.
func ownDeliveryID(h Partner, w http.ResponseWriter, r *http.Request) (int, bool) {
	id, ok := pathID(r)
	if !ok {
		WritePartnerError(w, r, h.Log, webhook.ErrNotFound)
	}
	return id, ok
}

func (partnerWebhookHandlers) getDelivery(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		id, ok := ownDeliveryID(h, w, r)
		if !ok {
			return
		}
		d, err := h.Webhooks.AppDelivery(r.Context(), adm.App.ID, id)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		WriteEnvelope(w, r, presentDeliveryDetail(d))
	})(h)
}

func (partnerWebhookHandlers) resend(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		id, ok := ownDeliveryID(h, w, r)
		if !ok {
			return
		}
		d, err := h.Webhooks.AppResend(r.Context(), adm.App.ID, id)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		WriteEnvelope(w, r, presentDelivery(d))
	})(h)
}

func (partnerWebhookHandlers) recover(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		v := param(adm, "since")
		since, err := time.Parse(time.RFC3339, v)
		if err != nil {
			WritePartnerError(w, r, h.Log, errs.Invalid("since", "since is required: an RFC 3339 time such as 2026-11-29T00:00:00Z"))
			return
		}
		f := webhook.ResendFilter{AppID: &adm.App.ID, Since: &since}
		if v, set := adm.Query.Get("endpoint_id"); set {
			id, err := strconv.Atoi(v)
			if err != nil || id < 1 {
				WritePartnerError(w, r, h.Log, webhook.ErrEndpointNotFound)
				return
			}
			f.EndpointID = &id
		}
		n, err := h.Webhooks.ResendFailed(r.Context(), f)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		WriteEnvelope(w, r, map[string]any{"requeued": n})
	})(h)
}

// eventTypeJSON is one type of the catalogue.
type eventTypeJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	BuiltIn     bool            `json:"built_in"`
}

func (partnerWebhookHandlers) eventTypes(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, _ *partner.Admitted, _ []byte) {
		ts, err := h.Webhooks.EventTypes(r.Context())
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		out := make([]eventTypeJSON, len(ts))
		for i, t := range ts {
			out[i] = eventTypeJSON{Name: t.Name, Description: t.Description, Schema: t.Schema, Example: t.Example, BuiltIn: t.BuiltIn}
			if out[i].Example == nil {
				out[i].Example = json.RawMessage("null")
			}
		}
		WriteEnvelope(w, r, map[string]any{"event_types": out})
	})(h)
}

// versionUsageJSON is what the caller should know of a version it calls.
type versionUsageJSON struct {
	Version    string  `json:"version"`
	Calls      int64   `json:"calls"`
	Deprecated *string `json:"deprecated_at"`
	Sunset     *string `json:"sunset_at"`
}

func (partnerWebhookHandlers) usage(h Partner) http.Handler {
	return scoped(func(h Partner, w http.ResponseWriter, r *http.Request, adm *partner.Admitted, _ []byte) {
		if h.Usage == nil {
			WritePartnerError(w, r, h.Log, errors.New("partner usage: not counted on this listener"))
			return
		}
		days, err := h.Usage.AppDaily(r.Context(), adm.App.ID)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		type dayJSON struct {
			Day     string `json:"day"`
			Version string `json:"version"`
			Calls   int64  `json:"calls"`
		}
		perDay := make([]dayJSON, len(days))
		totals := map[string]int64{}
		for i, d := range days {
			perDay[i] = dayJSON{Day: d.Day, Version: d.Version, Calls: d.Calls}
			totals[d.Version] += d.Calls
		}
		versions := []versionUsageJSON{}
		deprecated := []versionUsageJSON{}
		for _, name := range slices.Sorted(maps.Keys(totals)) {
			n := totals[name]
			v, _ := h.Versions.Get(name)
			u := versionUsageJSON{Version: name, Calls: n}
			if !v.Deprecated.IsZero() {
				u.Deprecated = fmtTimePtr(&v.Deprecated)
			}
			if !v.Sunset.IsZero() {
				u.Sunset = fmtTimePtr(&v.Sunset)
			}
			versions = append(versions, u)
			if u.Deprecated != nil || u.Sunset != nil {
				deprecated = append(deprecated, u)
			}
		}
		WriteEnvelope(w, r, map[string]any{
			"window_days": partner.UsageWindowDays, "rate_limit": adm.App.RateLimit,
			"per_day": perDay, "versions": versions, "deprecated_versions": deprecated,
		})
	})(h)
}
