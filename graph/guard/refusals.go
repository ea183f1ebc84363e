package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"

	"gatehouse/internal/apikey"
	"gatehouse/internal/audit"
	"gatehouse/internal/httpx"
)

// MaxRefusedEvents bounds the audit events one refused document adds:
// one per mutation field up to this many. Twice the mutations one
// operation may run (MaxCost / MutationCost), so every document that
// could have run is audited field by field; a larger one is itself the
// refusal, and the rest of its fields are counted in a WARN.
const MaxRefusedEvents = 2 * MaxCost / MutationCost

// CodeMethodNotAllowed refuses a mutation sent with GET, and any method
// but GET and POST (HTTP 405).
const CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"

// CodeUnsupportedMediaType refuses a POST whose body is not declared as
// JSON (HTTP 415): no Content-Type (curl -d sends a form's), or another one.
const CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"

// CodePayloadTooLarge is the audit code of a request body over 64 KiB
// (the reply is the listener's 413 {"error": "payload_too_large"}).
const CodePayloadTooLarge = "PAYLOAD_TOO_LARGE"

// unnamed is the mutation of an audit event for a document that holds a
// mutation whose fields cannot be named (it does not parse, or its body
// was cut at 64 KiB).
const unnamed = "?"

// refusalAuditor audits the mutations of documents refused before they
// run: by their size, a parse or validation error (an unknown field, a
// missing argument), their price, a NUL, or because they came with GET.
// mutationGate audits every mutation that reaches execution (and the role
// rule's refusals); this covers the rest, so the audit log misses nothing
// an admin key tried. Every event is REFUSED with the code the caller saw.
type refusalAuditor struct {
	gate mutationGate
	apq  *lru.LRU[string]
	log  *slog.Logger
}

// stateKey carries a *requestState from the auditor to the gate.
type stateKey struct{}

// requestState records whether any mutation field of the request reached
// the gate (and was audited there).
type requestState struct{ gateRan atomic.Bool }

// markGateRan tells the auditor that the gate handled a mutation field of
// this request.
func markGateRan(ctx context.Context) {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		st.gateRan.Store(true)
	}
}

// wrap audits the request when it holds a mutation, none of its fields
// reached the gate, and the reply is a refusal (errors and no data).
// Requests whose document cannot hold a mutation (no "mutation" in its
// text) pass untouched.
func (a refusalAuditor) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := paramsOf(r)
		query := a.queryOf(r.Context(), p)
		if a.gate.audit == nil || !strings.Contains(query, "mutation") {
			next.ServeHTTP(w, r)
			return
		}
		st := &requestState{}
		cw := &captureWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
		if st.gateRan.Load() {
			return
		}
		code, refused := cw.refusal()
		if !refused {
			return
		}
		a.record(r.Context(), a.mutationFields(query, p.OperationName, p.Variables), code)
	})
}

// tooLarge audits a body cut at 64 KiB: one unnamed event when what was
// read mentions a mutation (its document cannot be read whole).
func (a refusalAuditor) tooLarge(ctx context.Context, prefix []byte) {
	if a.gate.audit != nil && bytes.Contains(prefix, []byte("mutation")) {
		a.record(ctx, []refusedField{{name: unnamed}}, CodePayloadTooLarge)
	}
}

// queryOf is the request's document: its query, or the persisted query
// its hash names.
func (a refusalAuditor) queryOf(ctx context.Context, p params) string {
	if p.Query != "" || a.apq == nil {
		return p.Query
	}
	if pq := p.Extensions.PersistedQuery; pq != nil && pq.Sha256Hash != "" {
		q, _ := a.apq.Get(ctx, pq.Sha256Hash)
		return q
	}
	return ""
}

// refusedField is one mutation field of a refused document.
type refusedField struct{ name, targetType, targetID string }

// record appends one REFUSED event per field (at most MaxRefusedEvents).
func (a refusalAuditor) record(ctx context.Context, fields []refusedField, code string) {
	key := apikey.FromContext(ctx)
	if len(fields) > MaxRefusedEvents {
		a.log.WarnContext(ctx, "graphql: a refused document held more mutation fields than are audited one by one",
			"fields", len(fields), "audited", MaxRefusedEvents, "code", code, "request_id", httpx.GetRequestID(ctx))
		fields = fields[:MaxRefusedEvents]
	}
	for _, f := range fields {
		ev := audit.Event{
			Mutation: f.name, TargetType: f.targetType, TargetID: f.targetID,
			Outcome: audit.Refused, ErrorCode: code, RequestID: httpx.GetRequestID(ctx),
		}
		if key != nil {
			ev.APIKeyID, ev.APIKeyName = key.ID, key.Name
		}
		// Record logs a failure with the whole event; the reply stands.
		_ = a.gate.audit.Record(ctx, ev)
	}
}

// mutationFields names the root fields of the mutations the document
// would have run: those of the operation operationName selects, or of
// every mutation operation when the selection is unclear (no name among
// several operations, an unknown name). A document that does not parse
// yields one unnamed field if a mutation operation can be seen in it.
func (a refusalAuditor) mutationFields(query, operationName string, vars map[string]any) []refusedField {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		if mentionsMutation(query) {
			return []refusedField{{name: unnamed}}
		}
		return nil
	}
	var ops []*ast.OperationDefinition
	if op := doc.Operations.ForName(operationName); op != nil {
		ops = []*ast.OperationDefinition{op}
	} else {
		ops = doc.Operations
	}
	var out []refusedField
	for _, op := range ops {
		if op.Operation != ast.Mutation {
			continue
		}
		seen := map[string]bool{}
		var walk func(set ast.SelectionSet)
		walk = func(set ast.SelectionSet) {
			for _, sel := range set {
				if len(out) > MaxRefusedEvents {
					return
				}
				switch s := sel.(type) {
				case *ast.Field:
					out = append(out, a.fieldOf(s, vars))
				case *ast.InlineFragment:
					walk(s.SelectionSet)
				case *ast.FragmentSpread:
					fr := doc.Fragments.ForName(s.Name)
					switch {
					case fr == nil:
						out = append(out, refusedField{name: unnamed})
					case !seen[s.Name]:
						seen[s.Name] = true
						walk(fr.SelectionSet)
						seen[s.Name] = false
					}
				}
			}
		}
		walk(op.SelectionSet)
	}
	return out
}

// fieldOf names a mutation field and, as the gate does, its target: the
// type the mutation returns and the argument marked @auditTarget, else
// `id` (only ids and order numbers are kept; see idString).
func (a refusalAuditor) fieldOf(f *ast.Field, vars map[string]any) refusedField {
	out := refusedField{name: f.Name}
	if a.gate.schema == nil || a.gate.schema.Mutation == nil {
		return out
	}
	def := a.gate.schema.Mutation.Fields.ForName(f.Name)
	if def == nil {
		return out
	}
	out.targetType = a.gate.entityType(def.Type.Name())
	arg := "id"
	for _, ad := range def.Arguments {
		if d := ad.Directives.ForName(auditTargetDirective); d != nil {
			arg = ad.Name
			if t := d.Arguments.ForName("type"); t != nil && t.Value != nil {
				out.targetType = t.Value.Raw
			}
			break
		}
	}
	if v := f.Arguments.ForName(arg); v != nil && v.Value != nil {
		if val, err := v.Value.Value(vars); err == nil {
			out.targetID = idString(val)
		}
	}
	return out
}

// mentionsMutation reports whether a document that does not parse starts
// a mutation operation before its error: the name `mutation` outside any
// braces and not a variable's name.
func mentionsMutation(query string) bool {
	lx := lexer.New(&ast.Source{Input: query})
	depth, prev := 0, lexer.Invalid
	for {
		tok, err := lx.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return false
		}
		switch tok.Kind {
		case lexer.BraceL:
			depth++
		case lexer.BraceR:
			depth--
		case lexer.Name:
			if depth == 0 && tok.Value == "mutation" && prev != lexer.Dollar {
				return true
			}
		}
		prev = tok.Kind
	}
}

// refuseGETMutations answers a GET whose selected operation is a mutation
// with 405 Method Not Allowed (Allow: POST) and a GraphQL error coded
// METHOD_NOT_ALLOWED, as the GraphQL-over-HTTP specification asks: a GET
// must be safe to repeat, prefetch and cache, a mutation is not. (gqlgen
// alone answers 406 with an error without a code.)
func (a refusalAuditor) refuseGETMutations(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		p, _ := paramsOf(r)
		query := a.queryOf(r.Context(), p)
		if !strings.Contains(query, "mutation") {
			next.ServeHTTP(w, r)
			return
		}
		doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, MaxTokens)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if op := doc.Operations.ForName(p.OperationName); op == nil || op.Operation != ast.Mutation {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", http.MethodPost)
		writeGraphQLError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
			"mutations must be sent with POST; GET runs queries only", nil)
	})
}

// requireTransport refuses what gqlgen's two transports (GET and POST
// with a JSON body) do not take, in the shapes of the listener's other
// refusals of /graphql (its {"error", "message"} and a GraphQL error with
// its code), where gqlgen alone answered 400 "transport not supported"
// with a text/plain type and no code:
//   - a POST whose Content-Type is not application/json (charset
//     parameters aside): 415 UNSUPPORTED_MEDIA_TYPE naming the type
//     expected and the one received, with Accept-Post: application/json;
//   - any method but GET and POST (PUT, PATCH, DELETE, OPTIONS, HEAD, …):
//     405 METHOD_NOT_ALLOWED with Allow: GET, POST.
//
// A mutation in such a body (JSON, a form, a multipart "operations" part or
// the bare document: see refusedBody) is audited as refused.
func (a refusalAuditor) requireTransport(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var status int
		var code, short, msg string
		switch r.Method {
		case http.MethodGet:
			if !a.refuseInvalidGETParams(w, r) {
				next.ServeHTTP(w, r)
			}
			return
		case http.MethodPost:
			ct := r.Header.Get("Content-Type")
			if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
				if b, ok := r.Body.(*bodyBytes); ok {
					if why := undecodable(b.data, new(graphql.RawParams)); why != "" {
						a.refuseInvalidJSON(w, r, b.data, why)
						return
					}
				}
				next.ServeHTTP(w, r)
				return
			}
			got := "none"
			if ct != "" {
				got = strconv.Quote(ct)
			}
			status, code, short = http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "unsupported_media_type"
			msg = "a GraphQL POST must be sent with Content-Type: application/json (got " + got + "); the body is {\"query\": …, \"variables\": …}"
			w.Header().Set("Accept-Post", "application/json")
		default:
			status, code, short = http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method_not_allowed"
			msg = "GraphQL is served over POST (Content-Type: application/json) and GET (queries only), not " + methodName(r.Method)
			w.Header().Set("Allow", "GET, POST")
		}
		ext := map[string]string{"code": code}
		if status == http.StatusUnsupportedMediaType {
			ext["expected"] = "application/json"
		}
		httpx.WriteJSON(w, status, map[string]any{
			"error":   short,
			"message": msg,
			"errors":  []map[string]any{{"message": msg, "extensions": ext}},
		})
		if b, ok := r.Body.(*bodyBytes); ok && a.gate.audit != nil {
			if p, ok := refusedBody(r.Header.Get("Content-Type"), b.data); ok && strings.Contains(p.Query, "mutation") {
				a.record(r.Context(), a.mutationFields(p.Query, p.OperationName, p.Variables), code)
			}
		}
	})
}

// CodeInvalidJSON refuses a POST declared as JSON whose body does not
// decode as a GraphQL request ({"query": "<document>", "variables": {…},
// …}): not JSON, cut short, or a member of the wrong type (HTTP 400, the
// ticket API's invalid_json).
const CodeInvalidJSON = "INVALID_JSON"

// undecodable says why data does not decode into v as gqlgen's
// transports decode a request (one JSON value, numbers kept as text), or
// "" when it does: a phrase whose subject is the body or parameter
// ("is empty", "is not valid JSON at byte 9"). It never quotes data.
func undecodable(data []byte, v any) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := dec.Decode(v)
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		if _, err := dec.Token(); err != io.EOF {
			return "has more after its JSON value (at byte " + strconv.FormatInt(dec.InputOffset(), 10) + ")"
		}
		if k, ok := duplicateKey(data); ok {
			return "names " + strconv.Quote(k) + " twice in one object"
		}
		return ""
	case errors.Is(err, io.EOF):
		return "is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "ends before its JSON does"
	case errors.As(err, &se):
		return "is not valid JSON at byte " + strconv.FormatInt(se.Offset, 10)
	case errors.As(err, &te) && te.Field != "":
		return "holds " + strconv.Quote(te.Field) + " as a JSON " + te.Value + ", of the wrong type"
	case errors.As(err, &te):
		return "is a JSON " + te.Value + ", not an object"
	}
	return "is not a JSON object"
}

// duplicateKey finds a member name given twice in one object of data (a
// JSON value already known to be valid), at any depth. Decoders disagree
// on which of the two counts (Go's keeps the last), so a body with one
// could run another document than the one a proxy or a log read.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		seen   map[string]struct{}
		key    bool // the next token of an object is a member name
	}
	var stack []*frame
	for {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := t.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := t.(string)
			if _, dup := top.seen[k]; dup {
				return k, true
			}
			top.seen[k] = struct{}{}
			top.key = false
			continue
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, seen: map[string]struct{}{}, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if top != nil && top.object && t != json.Delim('}') {
			// A value of top's member was read (or begun): a name is next.
			top.key = true
		}
	}
}

// writeInvalidJSON answers 400 in both shapes of the listener's refusals:
// {"error": "invalid_json", "message": msg} and a GraphQL error coded
// INVALID_JSON.
func writeInvalidJSON(w http.ResponseWriter, msg string) {
	httpx.WriteJSON(w, http.StatusBadRequest, map[string]any{
		"error":   "invalid_json",
		"message": msg,
		"errors":  []map[string]any{{"message": msg, "extensions": map[string]string{"code": CodeInvalidJSON}}},
	})
}

// refuseInvalidGETParams answers a GET whose variables or extensions
// parameter is no JSON object with 400 INVALID_JSON (gqlgen alone
// answered an error without a code), and reports whether it did. A
// mutation in its query is audited as refused.
func (a refusalAuditor) refuseInvalidGETParams(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	for _, name := range []string{"variables", "extensions"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		var m map[string]any
		why := undecodable([]byte(v), &m)
		if why == "" {
			continue
		}
		writeInvalidJSON(w, "the "+name+" parameter "+why+`; it must be a JSON object such as {"id": "1"}`)
		if doc := q.Get("query"); a.gate.audit != nil && strings.Contains(doc, "mutation") {
			a.record(r.Context(), a.mutationFields(doc, q.Get("operationName"), nil), CodeInvalidJSON)
		}
		return true
	}
	return false
}

// refuseInvalidJSON answers a JSON body that undecodable refused with 400
// in both shapes of the listener's refusals ({"error": "invalid_json", …}
// and a GraphQL error coded INVALID_JSON), where gqlgen alone answered a
// GraphQL error without a code that quoted the body back. A mutation in
// it is audited as refused: the fields of the "query" member when it can
// still be read, else one unnamed event when the body mentions a mutation.
func (a refusalAuditor) refuseInvalidJSON(w http.ResponseWriter, r *http.Request, data []byte, why string) {
	writeInvalidJSON(w, "the request body "+why+`; a GraphQL request is {"query": "<document>", "variables": {…}}`)
	if a.gate.audit == nil || !bytes.Contains(data, []byte("mutation")) {
		return
	}
	q, ok := queryMember(data)
	switch {
	case ok:
		a.record(r.Context(), a.mutationFields(q, "", nil), CodeInvalidJSON)
	default:
		a.record(r.Context(), []refusedField{{name: unnamed}}, CodeInvalidJSON)
	}
}

// queryMember reads the "query" string of a JSON object that may not
// decode whole (cut short, or broken after its query), as far as that
// member: false when it cannot be reached or is no string. Of an object
// that names "query" twice, it is the first that mentions a mutation (the
// one an admin would want audited), else the first.
func queryMember(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	first, found := "", false
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		if k == "query" {
			v, err := dec.Token()
			q, ok := v.(string)
			if err != nil || !ok {
				break
			}
			if mentionsMutation(q) {
				return q, true
			}
			if !found {
				first, found = q, true
			}
			continue
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return first, found
}

// refusedBodyParams is what a refused body asked to run.
type refusedBodyParams struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// refusedBody reads the document of a body refused for its method or
// content type, whatever shape a client used: JSON (under any type), a
// form (curl -d 'query=mutation …'), a multipart upload's "operations"
// part, or the bare document (text/plain, application/graphql).
func refusedBody(contentType string, data []byte) (refusedBodyParams, bool) {
	var p refusedBodyParams
	if json.Unmarshal(data, &p) == nil {
		return p, true
	}
	mt, mp, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		f, err := url.ParseQuery(string(data))
		if err != nil {
			return p, false
		}
		p.Query, p.OperationName = f.Get("query"), f.Get("operationName")
		_ = json.Unmarshal([]byte(f.Get("variables")), &p.Variables)
		return p, true
	case strings.HasPrefix(mt, "multipart/") && mp["boundary"] != "":
		mr := multipart.NewReader(bytes.NewReader(data), mp["boundary"])
		for {
			part, err := mr.NextPart()
			if err != nil {
				return p, false
			}
			if part.FormName() == "operations" {
				ops, err := io.ReadAll(part)
				return p, err == nil && json.Unmarshal(ops, &p) == nil
			}
		}
	}
	p.Query = string(data)
	return p, true
}

// methodName names a standard method; any other text a client sent is not
// echoed.
func methodName(m string) string {
	switch m {
	case http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "this method"
}

// writeGraphQLError writes a response holding one error with its code
// (and extra extensions).
func writeGraphQLError(w http.ResponseWriter, status int, code, msg string, ext map[string]any) {
	e := map[string]any{"code": code}
	for k, v := range ext {
		e[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{{"message": msg, "extensions": e}}})
}

// captureLimit bounds the reply kept to find a refusal's code: a refusal
// is a few errors, far smaller.
const captureLimit = 16 << 10

// captureWriter passes a reply through and keeps its status and its first
// captureLimit bytes.
type captureWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
	over   bool
}

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if room := captureLimit - c.buf.Len(); room > 0 {
		c.buf.Write(b[:min(len(b), room)])
	}
	c.over = c.over || c.buf.Len()+len(b) > captureLimit
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// refusal reads the reply kept: a refusal holds errors and no data (or is
// the listener's {"error": …}); its code is the first error's.
func (c *captureWriter) refusal() (code string, refused bool) {
	if c.over {
		return "", false
	}
	var body struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
		Error string `json:"error"`
	}
	if json.Unmarshal(c.buf.Bytes(), &body) != nil {
		if c.status >= 400 {
			return "HTTP_" + strconv.Itoa(c.status), true
		}
		return "", false
	}
	switch {
	case len(body.Errors) > 0 && (len(body.Data) == 0 || string(body.Data) == "null"):
		if s, ok := body.Errors[0].Extensions["code"].(string); ok && s != "" {
			return s, true
		}
		return CodeValidationFailed, true
	case body.Error != "":
		return strings.ToUpper(body.Error), true
	}
	return "", false
}
