package partnerclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls the partner API of one gatehouse for one app.
type Client struct {
	// BaseURL is the public listener, e.g. https://gatehouse.example.com.
	BaseURL string
	Signer
	// HTTPClient defaults to a client with a 10 s timeout.
	HTTPClient *http.Client
	// DeductVersion is the API version Deduct calls ("v1", "v2", "v3");
	// empty means v1. The deduction is the same in every version.
	DeductVersion string
}

// New returns a client signing with MD5; set SignType for HMAC-SHA256.
func New(baseURL, appKey, appSecret string) *Client {
	return &Client{
		BaseURL: strings.TrimRight(baseURL, "/"),
		Signer:  Signer{AppKey: appKey, AppSecret: appSecret},
	}
}

var defaultHTTPClient = &http.Client{Timeout: 10 * time.Second}

// Response is a decoded envelope with the HTTP status and headers.
type Response struct {
	HTTPStatus int             `json:"-"`
	Header     http.Header     `json:"-"`
	Code       int             `json:"code"`
	Message    string          `json:"message"`
	Data       json.RawMessage `json:"data,omitempty"`
	Timestamp  int64           `json:"timestamp"`
	RequestID  string          `json:"request_id"`
}

// Err returns an *APIError when the envelope's code is not 200.
func (r *Response) Err() error {
	if r.Code == 200 {
		return nil
	}
	return &APIError{HTTPStatus: r.HTTPStatus, Code: r.Code, Message: r.Message, RequestID: r.RequestID, RetryAfter: retryAfter(r.Header)}
}

// APIError is a reply whose code is not 200.
type APIError struct {
	HTTPStatus int
	Code       int
	Message    string
	RequestID  string
	// RetryAfter is the Retry-After of a 429, else 0.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("partner API: HTTP %d, code %d: %s (request %s)", e.HTTPStatus, e.Code, e.Message, e.RequestID)
}

func retryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// Do signs params and sends them as the query string of method path
// (e.g. "GET", "/api/v1/orders/query"). A transport error or a body that is
// not an envelope is returned as an error; an envelope with any code is a
// Response (see Response.Err).
func (c *Client) Do(ctx context.Context, method, path string, params url.Values) (*Response, error) {
	return c.DoBody(ctx, method, path, params, nil)
}

// DoBody is Do with a JSON body (nil: none), bound to the signature by the
// signed parameter content_sha256, the hex SHA-256 of the body.
func (c *Client) DoBody(ctx context.Context, method, path string, params url.Values, body []byte) (*Response, error) {
	if body != nil {
		sum := sha256.Sum256(body)
		p := url.Values{}
		for k, v := range params {
			p[k] = v
		}
		p.Set("content_sha256", hex.EncodeToString(sum[:]))
		params = p
	}
	signed, err := c.Sign(params)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path+"?"+signed.Encode(), rd)
	if err != nil {
		return nil, fmt.Errorf("partnerclient: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("partnerclient: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("partnerclient: read reply: %w", err)
	}
	r := &Response{HTTPStatus: resp.StatusCode, Header: resp.Header}
	if err := json.Unmarshal(reply, r); err != nil || r.Code == 0 {
		return nil, fmt.Errorf("partnerclient: %s %s: HTTP %d with a reply that is not an envelope: %.200q", method, path, resp.StatusCode, reply)
	}
	return r, nil
}

// call runs Do and decodes data into v on success.
func (c *Client) call(ctx context.Context, method, path string, params url.Values, v any) (*Response, error) {
	r, err := c.Do(ctx, method, path, params)
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return r, err
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		return r, fmt.Errorf("partnerclient: decode data: %w", err)
	}
	return r, nil
}

// OrderV1 is the data of GET /api/v1/orders/query. Amount keeps the
// decimal text ("99.90"), so no precision is lost to floating point.
type OrderV1 struct {
	OrderNo string      `json:"order_no"`
	Amount  json.Number `json:"amount"`
	Status  string      `json:"status"`
}

// CustomerInfo is the masked customer of an order (v2).
type CustomerInfo struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

// OrderV2 is the data of GET /api/v2/orders/query.
type OrderV2 struct {
	OrderV1
	CreateTime   time.Time    `json:"create_time"`
	PayTime      *time.Time   `json:"pay_time"`
	CustomerInfo CustomerInfo `json:"customer_info"`
}

// OrderV3 is the data of GET /api/v3/orders/query: v2's without
// customer_info, which v3 removes. During the transition period (6 months
// from v3's release) replies still carry it, and DeprecatedFields holds the
// Deprecated-Fields header naming its removal date; afterwards
// CustomerInfo is nil and DeprecatedFields empty.
type OrderV3 struct {
	OrderV1
	CreateTime time.Time  `json:"create_time"`
	PayTime    *time.Time `json:"pay_time"`
	// Deprecated: v3 removes customer_info; do not rely on it.
	CustomerInfo *CustomerInfo `json:"customer_info,omitempty"`
	// DeprecatedFields is the reply's Deprecated-Fields header, e.g.
	// `customer_info; removal="2027-05-27"`.
	DeprecatedFields string `json:"-"`
}

// QueryParams are the optional paging parameters of the order query; zero
// values are not sent.
type QueryParams struct {
	Page, PageSize int
}

func orderParams(orderNo string, p []QueryParams) url.Values {
	v := url.Values{"order_no": {orderNo}}
	if len(p) > 0 {
		if p[0].Page != 0 {
			v.Set("page", strconv.Itoa(p[0].Page))
		}
		if p[0].PageSize != 0 {
			v.Set("page_size", strconv.Itoa(p[0].PageSize))
		}
	}
	return v
}

// OrderV1 queries an order with the v1 shape.
func (c *Client) OrderV1(ctx context.Context, orderNo string, p ...QueryParams) (OrderV1, error) {
	var o OrderV1
	_, err := c.call(ctx, http.MethodGet, "/api/v1/orders/query", orderParams(orderNo, p), &o)
	return o, err
}

// OrderV2 queries an order with the v2 shape.
func (c *Client) OrderV2(ctx context.Context, orderNo string, p ...QueryParams) (OrderV2, error) {
	var o OrderV2
	_, err := c.call(ctx, http.MethodGet, "/api/v2/orders/query", orderParams(orderNo, p), &o)
	return o, err
}

// OrderV3 queries an order with the v3 shape.
func (c *Client) OrderV3(ctx context.Context, orderNo string, p ...QueryParams) (OrderV3, error) {
	var o OrderV3
	r, err := c.call(ctx, http.MethodGet, "/api/v3/orders/query", orderParams(orderNo, p), &o)
	if r != nil {
		o.DeprecatedFields = r.Header.Get("Deprecated-Fields")
	}
	return o, err
}

// DeductRequest deducts Quantity units of SKU SkuID, once per BizNo.
type DeductRequest struct {
	BizNo    string
	SkuID    int64
	Quantity int64
}

// DeductResult is the data of a successful deduction. Replayed is true
// when the server answered with the stored result of an earlier call with
// the same biz_no (Idempotent-Replayed: true).
type DeductResult struct {
	BizNo          string `json:"biz_no"`
	SkuID          int64  `json:"sku_id"`
	Quantity       int64  `json:"quantity"`
	RemainingStock int64  `json:"remaining_stock"`
	Replayed       bool   `json:"-"`
}

// Deduct calls POST /api/{DeductVersion}/inventory/deduct (v1 by
// default). Retrying with the same BizNo is safe, on any version: the
// server deducts at most once.
func (c *Client) Deduct(ctx context.Context, d DeductRequest) (DeductResult, error) {
	if d.BizNo == "" {
		return DeductResult{}, errors.New("partnerclient: deduct: BizNo is required")
	}
	params := url.Values{
		"biz_no":   {d.BizNo},
		"sku_id":   {strconv.FormatInt(d.SkuID, 10)},
		"quantity": {strconv.FormatInt(d.Quantity, 10)},
	}
	var res DeductResult
	version := c.DeductVersion
	if version == "" {
		version = "v1"
	}
	r, err := c.call(ctx, http.MethodPost, "/api/"+url.PathEscape(version)+"/inventory/deduct", params, &res)
	if r != nil {
		res.Replayed = r.Header.Get("Idempotent-Replayed") == "true"
	}
	return res, err
}
