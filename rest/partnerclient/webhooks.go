package partnerclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The partner's own webhooks (v3): endpoints, deliveries, the catalogue
// and usage.

// Endpoint is a webhook endpoint of the calling app (never its secret).
type Endpoint struct {
	ID                      int        `json:"id"`
	URL                     string     `json:"url"`
	Description             string     `json:"description"`
	EventTypes              []string   `json:"event_types"`
	Enabled                 bool       `json:"enabled"`
	AutoDisabledAt          *time.Time `json:"auto_disabled_at"`
	RateLimit               *int       `json:"rate_limit"`
	RetrySchedule           []int      `json:"retry_schedule"`
	HeaderNames             []string   `json:"header_names"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	CreateTime              time.Time  `json:"create_time"`
	UpdateTime              time.Time  `json:"update_time"`
}

// EndpointInput creates or changes an endpoint; nil fields are left out
// (on a change: left as they are).
type EndpointInput struct {
	URL         *string   `json:"url,omitempty"`
	Description *string   `json:"description,omitempty"`
	EventTypes  *[]string `json:"event_types,omitempty"`
	RateLimit   *int      `json:"rate_limit,omitempty"`
	Enabled     *bool     `json:"enabled,omitempty"`
	// RetrySchedule is the seconds to wait before each retry (at most 19
	// waits, 30 days in all); RetryPreset names one instead: DEFAULT or
	// LONG.
	RetrySchedule *[]int  `json:"retry_schedule,omitempty"`
	RetryPreset   *string `json:"retry_preset,omitempty"`
	// Headers are sent with every delivery (never a signature or
	// webhook-* header); only their names are shown back.
	Headers *map[string]string `json:"headers,omitempty"`
}

// EndpointSecret is a created or rotated endpoint with its signing secret
// (whsec_…), shown this once.
type EndpointSecret struct {
	Endpoint Endpoint `json:"endpoint"`
	Secret   string   `json:"secret"`
}

// Attempt is one attempt of a delivery.
type Attempt struct {
	AttemptNo      int       `json:"attempt_no"`
	StartedAt      time.Time `json:"started_at"`
	DurationMs     int64     `json:"duration_ms"`
	ResponseStatus *int      `json:"response_status"`
	ResponseBody   string    `json:"response_body"`
	Error          string    `json:"error"`
}

// Delivery is a webhook delivery of the calling app; Payload and Attempts
// only in a delivery's detail.
type Delivery struct {
	ID            int        `json:"id"`
	EventID       string     `json:"event_id"`
	EventType     string     `json:"event_type"`
	EndpointID    *int       `json:"endpoint_id"`
	Status        string     `json:"status"`
	AttemptCount  int        `json:"attempt_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	LastError     string     `json:"last_error"`
	CreateTime    time.Time  `json:"create_time"`
	UpdateTime    time.Time  `json:"update_time"`
	Payload       *string    `json:"payload"`
	Attempts      []Attempt  `json:"attempts"`
}

// DeliveryPage is one page of deliveries, newest first; NextCursor is
// the Cursor of the next page (nil on the last).
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextCursor *string    `json:"next_cursor"`
}

// DeliveryQuery filters the listing (zero values: no filter).
type DeliveryQuery struct {
	Status, EventType string
	EndpointID        int
	Since             time.Time
	Limit             int
	Cursor            string
}

// EventType is one type of the catalogue.
type EventType struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	BuiltIn     bool            `json:"built_in"`
}

// Usage is the calling app's use of the API.
type Usage struct {
	WindowDays int `json:"window_days"`
	RateLimit  int `json:"rate_limit"`
	PerDay     []struct {
		Day     string `json:"day"`
		Version string `json:"version"`
		Calls   int64  `json:"calls"`
	} `json:"per_day"`
	Versions           []VersionUsage `json:"versions"`
	DeprecatedVersions []VersionUsage `json:"deprecated_versions"`
}

// VersionUsage is one version the app called, with its lifecycle.
type VersionUsage struct {
	Version    string     `json:"version"`
	Calls      int64      `json:"calls"`
	Deprecated *time.Time `json:"deprecated_at"`
	Sunset     *time.Time `json:"sunset_at"`
}

const webhooksPath = "/api/v3/webhooks"

// callBody runs DoBody with v's JSON and decodes data into out.
func (c *Client) callBody(ctx context.Context, method, path string, params url.Values, in, out any) (*Response, error) {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = b
	}
	r, err := c.DoBody(ctx, method, path, params, body)
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return r, err
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Endpoints lists the app's endpoints.
func (c *Client) Endpoints(ctx context.Context) ([]Endpoint, error) {
	var out struct {
		Endpoints []Endpoint `json:"endpoints"`
	}
	_, err := c.callBody(ctx, http.MethodGet, webhooksPath+"/endpoints", nil, nil, &out)
	return out.Endpoints, err
}

// CreateEndpoint adds an endpoint; the secret is shown this once.
func (c *Client) CreateEndpoint(ctx context.Context, in EndpointInput) (EndpointSecret, error) {
	var out EndpointSecret
	_, err := c.callBody(ctx, http.MethodPost, webhooksPath+"/endpoints", nil, in, &out)
	return out, err
}

// Endpoint reads one endpoint.
func (c *Client) Endpoint(ctx context.Context, id int) (Endpoint, error) {
	var out Endpoint
	_, err := c.callBody(ctx, http.MethodGet, webhooksPath+"/endpoints/"+strconv.Itoa(id), nil, nil, &out)
	return out, err
}

// UpdateEndpoint changes the fields in set.
func (c *Client) UpdateEndpoint(ctx context.Context, id int, in EndpointInput) (Endpoint, error) {
	var out Endpoint
	_, err := c.callBody(ctx, http.MethodPatch, webhooksPath+"/endpoints/"+strconv.Itoa(id), nil, in, &out)
	return out, err
}

// DeleteEndpoint deletes an endpoint.
func (c *Client) DeleteEndpoint(ctx context.Context, id int) (Endpoint, error) {
	var out Endpoint
	_, err := c.callBody(ctx, http.MethodDelete, webhooksPath+"/endpoints/"+strconv.Itoa(id), nil, nil, &out)
	return out, err
}

// RotateEndpointSecret replaces an endpoint's secret; the new one is shown
// this once (the old one still signs for 24 hours).
func (c *Client) RotateEndpointSecret(ctx context.Context, id int) (EndpointSecret, error) {
	var out EndpointSecret
	_, err := c.callBody(ctx, http.MethodPost, webhooksPath+"/endpoints/"+strconv.Itoa(id)+"/rotate-secret", nil, nil, &out)
	return out, err
}

// SendTest sends a test event to an endpoint (eventType "": the test type).
func (c *Client) SendTest(ctx context.Context, id int, eventType string) (Delivery, error) {
	var params url.Values
	if eventType != "" {
		params = url.Values{"event_type": {eventType}}
	}
	var out Delivery
	_, err := c.callBody(ctx, http.MethodPost, webhooksPath+"/endpoints/"+strconv.Itoa(id)+"/test", params, nil, &out)
	return out, err
}

// Deliveries lists the app's deliveries, newest first.
func (c *Client) Deliveries(ctx context.Context, q DeliveryQuery) (DeliveryPage, error) {
	p := url.Values{}
	set := func(k, v string) {
		if v != "" {
			p.Set(k, v)
		}
	}
	set("status", q.Status)
	set("event_type", q.EventType)
	set("cursor", q.Cursor)
	if q.EndpointID != 0 {
		p.Set("endpoint_id", strconv.Itoa(q.EndpointID))
	}
	if q.Limit != 0 {
		p.Set("limit", strconv.Itoa(q.Limit))
	}
	if !q.Since.IsZero() {
		p.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	var out DeliveryPage
	_, err := c.callBody(ctx, http.MethodGet, webhooksPath+"/deliveries", p, nil, &out)
	return out, err
}

// Delivery reads one delivery with its payload and attempts.
func (c *Client) Delivery(ctx context.Context, id int) (Delivery, error) {
	var out Delivery
	_, err := c.callBody(ctx, http.MethodGet, webhooksPath+"/deliveries/"+strconv.Itoa(id), nil, nil, &out)
	return out, err
}

// Resend queues a delivery again, as new.
func (c *Client) Resend(ctx context.Context, id int) (Delivery, error) {
	var out Delivery
	_, err := c.callBody(ctx, http.MethodPost, webhooksPath+"/deliveries/"+strconv.Itoa(id)+"/resend", nil, nil, &out)
	return out, err
}

// Recover queues again every FAILED delivery created since, and returns
// how many.
func (c *Client) Recover(ctx context.Context, since time.Time) (int, error) {
	var out struct {
		Requeued int `json:"requeued"`
	}
	_, err := c.callBody(ctx, http.MethodPost, webhooksPath+"/recover", url.Values{"since": {since.UTC().Format(time.RFC3339)}}, nil, &out)
	return out.Requeued, err
}

// EventTypes lists the catalogue.
func (c *Client) EventTypes(ctx context.Context) ([]EventType, error) {
	var out struct {
		EventTypes []EventType `json:"event_types"`
	}
	_, err := c.callBody(ctx, http.MethodGet, webhooksPath+"/event-types", nil, nil, &out)
	return out.EventTypes, err
}

// Usage reads the app's calls per day and version, its rate limit and the
// deprecated versions it calls.
func (c *Client) Usage(ctx context.Context) (Usage, error) {
	var out Usage
	_, err := c.callBody(ctx, http.MethodGet, "/api/v3/usage", nil, nil, &out)
	return out, err
}
