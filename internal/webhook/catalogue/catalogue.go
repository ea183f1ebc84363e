// Package catalogue is the catalogue of webhook event types: the built-in
// ones (declared by the domains that raise them) and the custom ones an
// operator declares, each with the JSON Schema its bizData must satisfy.
package catalogue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"gatehouse/ent"
	"gatehouse/ent/webhookeventtype"
	"gatehouse/internal/errs"
	"gatehouse/internal/redact"
	"gatehouse/internal/store"
)

// EventType is one type of the webhook catalogue: the eventType of its
// messages, what it means, the JSON Schema its bizData satisfies and an
// example bizData. Types are data: the webhook package sends whatever type
// the catalogue holds and names none but its own webhook.test. The domain
// that raises an event declares its type (order.EventTypes, handed to
// Options.EventTypes); operators declare custom ones (CreateEventType) for
// the events the company's other services publish (Publish).
type EventType struct {
	Name        string
	Description string
	// Schema is the JSON Schema of bizData (draft 2020-12 unless it names
	// another with $schema).
	Schema json.RawMessage
	// Example is a bizData that satisfies Schema; sendTestWebhook with the
	// type sends it. Nil when a custom type was declared without one.
	Example json.RawMessage
	// BuiltIn types are raised by gatehouse itself; only custom types may
	// be published.
	BuiltIn bool
	// CreateTime is when a custom type was declared (nil for built-ins).
	CreateTime *time.Time
}

// Limits of custom event types.
const (
	// MaxTypeNameLen is the longest event type name (the deliveries'
	// event_type column).
	MaxTypeNameLen = 64
	// MaxTypeDescriptionLen bounds a custom type's description.
	MaxTypeDescriptionLen = 1024
	// MaxSchemaLen bounds a custom type's JSON Schema (and its example).
	MaxSchemaLen = 64 << 10
	// MaxCustomTypes is how many custom types the catalogue holds.
	MaxCustomTypes = 500
)

// typeName is the shape of an event type name: two or more dot-separated
// segments of lower-case letters, digits and underscores, each starting
// with a letter ("invoice.issued", "shipment.label_printed").
var typeName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

// ErrTypeNotFound: no event type of the catalogue has the given name.
var ErrTypeNotFound = errs.New(errs.NotFound, "event type not found")

// Type is an event type with its compiled schema: idle compiled
// copies, each metered by its own budget and so used by one validation
// at a time (see meter); a validation takes one, or compiles another when
// all are busy, and gives it back to be kept while fewer than
// idleSchemas are.
type Type struct {
	EventType
	idle chan *compiled
}

// idleSchemas is how many compiled copies of a type are kept between
// validations: concurrent publishes of one type beyond it compile their
// own (a bounded schema compiles in well under a millisecond).
const idleSchemas = 4

// maxCachedTypes bounds the custom types kept compiled: past it, one is
// dropped (read and compiled again when next used).
const maxCachedTypes = 128

func newSchemaType(t EventType, c *compiled) *Type {
	st := &Type{EventType: t, idle: make(chan *compiled, idleSchemas)}
	st.idle <- c
	return st
}

// Validate validates bizData against the type's schema under ctx and the
// validation budget (see validate).
func (t *Type) Validate(ctx context.Context, bizData []byte) error {
	var c *compiled
	select {
	case c = <-t.idle:
	default:
		var err error
		if c, err = compileSchema(t.Name, t.Schema); err != nil {
			return err // it compiled before: not expected
		}
	}
	err := validate(ctx, c, bizData)
	select {
	case t.idle <- c:
	default:
	}
	return err
}

// Catalogue holds the built-in event types and caches the custom ones,
// which never change once declared, with their compiled schemas.
type Catalogue struct {
	client  *ent.Client
	dialect string
	now     func() time.Time
	// known is told of every type the catalogue learns (the alert's
	// counter of failed deliveries exists at 0 for each).
	known    func(name string)
	builtIn  []*Type // in declaration order
	byName   map[string]*Type
	reserved map[string]bool // first segments of built-in names

	mu     sync.RWMutex
	custom map[string]*Type
}

// EventTest is the webhook package's own event type: the operator's test
// webhook (sendTestWebhook). Every other type is data: declared by the
// domain that raises it or by an operator (CreateEventType).
const EventTest = "webhook.test"

// testType is EventTest's declaration.
var testType = EventType{
	Name:        EventTest,
	Description: "The operator's test webhook (sendTestWebhook without eventType): checks that a receiver gets and verifies deliveries.",
	Schema: json.RawMessage(`{"type":"object","required":["app_key","message","sent_at"],"properties":{` +
		`"app_key":{"type":"string","description":"The app the test was sent to."},` +
		`"message":{"type":"string"},` +
		`"sent_at":{"type":"string","format":"date-time","description":"When the test was queued (RFC 3339 UTC, milliseconds)."}}}`),
	Example: json.RawMessage(`{"app_key":"demo-app","message":"Test webhook from gatehouse: if you can read this, your endpoint receives and can verify our deliveries.","sent_at":"2026-11-27T09:30:00.000Z"}`),
}

// New compiles the built-in types (webhook.test and the given
// ones) and checks each example against its schema: a type declared wrong
// is a programming error, reported at start.
func New(db *store.DB, now func() time.Time, known func(name string), types []EventType) (*Catalogue, error) {
	c := &Catalogue{client: db.Client, dialect: db.Dialect, now: now, known: known, byName: map[string]*Type{}, reserved: map[string]bool{}, custom: map[string]*Type{}}
	for _, t := range append([]EventType{testType}, types...) {
		if !typeName.MatchString(t.Name) || len(t.Name) > MaxTypeNameLen {
			return nil, fmt.Errorf("webhook: event type %q: not a valid name", t.Name)
		}
		if c.byName[t.Name] != nil {
			return nil, fmt.Errorf("webhook: event type %s declared twice", t.Name)
		}
		sch, err := compileSchema(t.Name, t.Schema)
		if err != nil {
			return nil, fmt.Errorf("webhook: event type %s: schema: %w", t.Name, err)
		}
		if t.Example == nil {
			return nil, fmt.Errorf("webhook: event type %s: no example", t.Name)
		}
		if err := validate(context.Background(), sch, t.Example); err != nil {
			return nil, fmt.Errorf("webhook: event type %s: its example: %w", t.Name, err)
		}
		t.BuiltIn = true
		st := newSchemaType(t, sch)
		c.builtIn = append(c.builtIn, st)
		c.byName[t.Name] = st
		c.reserved[strings.SplitN(t.Name, ".", 2)[0]] = true
		known(t.Name)
	}
	return c, nil
}

// Lookup returns the type called name: a built-in one, or a custom one
// (read once from the database, then cached). Unknown: ErrTypeNotFound.
func (c *Catalogue) Lookup(ctx context.Context, name string) (*Type, error) {
	if t := c.byName[name]; t != nil {
		return t, nil
	}
	c.mu.RLock()
	t := c.custom[name]
	c.mu.RUnlock()
	if t != nil {
		return t, nil
	}
	notFound := &errs.Error{Kind: errs.NotFound, Err: ErrTypeNotFound, Msg: fmt.Sprintf(
		"no event type %s in the catalogue (webhookEventTypes lists them; createWebhookEventType declares one)", redact.Echo(name))}
	if len(name) > MaxTypeNameLen || !typeName.MatchString(name) {
		return nil, notFound // no type can have that name
	}
	row, err := c.client.WebhookEventType.Query().Where(webhookeventtype.Name(name)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: event type %s: %w", errs.Unavailable, redact.Echo(name), err)
	}
	return c.remember(row)
}

// remember compiles a stored custom type and caches it (at most
// maxCachedTypes). A type stored before the schema bounds existed (see
// MaxSchemaDepth) and beyond one is refused here, naming the bound: it
// cannot be published to, and is never compiled.
func (c *Catalogue) remember(row *ent.WebhookEventType) (*Type, error) {
	sch, err := compileSchema(row.Name, []byte(row.Schema))
	if err != nil {
		return nil, errs.Invalid("eventType", "the schema of event type %s %s: declare a new type whose schema keeps within the limits", redact.Echo(row.Name), err)
	}
	t := newSchemaType(customType(row), sch)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.custom[row.Name]; old != nil {
		return old, nil
	}
	if len(c.custom) >= maxCachedTypes {
		for name := range c.custom { // any one: map order
			delete(c.custom, name)
			break
		}
	}
	c.custom[row.Name] = t
	c.known(row.Name)
	return t, nil
}

func customType(row *ent.WebhookEventType) EventType {
	t := EventType{Name: row.Name, Description: row.Description, Schema: json.RawMessage(row.Schema), CreateTime: &row.CreateTime}
	if row.Example != "" {
		t.Example = json.RawMessage(row.Example)
	}
	return t
}

// EventTypes lists the catalogue: the built-in types in the order they
// were declared, then the custom ones by name.
func (c *Catalogue) EventTypes(ctx context.Context) ([]EventType, error) {
	out := make([]EventType, 0, len(c.builtIn))
	for _, t := range c.builtIn {
		out = append(out, t.EventType)
	}
	rows, err := c.client.WebhookEventType.Query().Order(ent.Asc(webhookeventtype.FieldName)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: list event types: %w", errs.Unavailable, err)
	}
	for _, r := range rows {
		out = append(out, customType(r))
	}
	return out, nil
}

// EventType returns the type called name (ErrTypeNotFound when the
// catalogue has none).
func (c *Catalogue) EventType(ctx context.Context, name string) (EventType, error) {
	t, err := c.Lookup(ctx, name)
	if err != nil {
		return EventType{}, err
	}
	return t.EventType, nil
}

// CheckTypeName says whether name may name a new custom event type: 3 to
// 64 characters, two or more dot-separated segments of lower-case letters,
// digits and underscores each starting with a letter, and outside the
// namespaces of the built-in types (their first segment: "order.",
// "webhook."), so that a type gatehouse adds later cannot collide with one
// of yours.
func (c *Catalogue) CheckTypeName(name string) error {
	switch {
	case len(name) > MaxTypeNameLen || !typeName.MatchString(name):
		return errs.Invalid("name", "must be at most %d characters: two or more dot-separated segments of a-z, 0-9 and _, each starting with a letter (e.g. invoice.issued)", MaxTypeNameLen)
	case c.reserved[strings.SplitN(name, ".", 2)[0]]:
		return errs.Invalid("name", "%s. is the namespace of built-in event types; choose another first segment (e.g. your service's name)", strings.SplitN(name, ".", 2)[0])
	}
	return nil
}

// CreateEventType declares a custom event type: name (see CheckTypeName),
// a description (1 to 1024 characters), the JSON Schema of its bizData
// (an object, at most 64 KiB, that compiles; references may only point
// inside it) and optionally an example, which must satisfy the schema
// (without one, the schema's first "examples" entry is taken when it
// does). A name already declared is a Conflict.
func (c *Catalogue) CreateEventType(ctx context.Context, name, description string, schema, example json.RawMessage) (EventType, error) {
	if err := c.CheckTypeName(name); err != nil {
		return EventType{}, err
	}
	if c.byName[name] != nil {
		return EventType{}, &errs.Error{Kind: errs.Conflict, Msg: fmt.Sprintf("%s is a built-in event type", name)}
	}
	if n := len([]rune(description)); n == 0 || n > MaxTypeDescriptionLen {
		return EventType{}, errs.Invalid("description", "must be 1 to %d characters", MaxTypeDescriptionLen)
	}
	if len(schema) > MaxSchemaLen || len(example) > MaxSchemaLen {
		return EventType{}, errs.Invalid("schema", "the schema and the example must each be at most %d bytes", MaxSchemaLen)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(schema), []byte("{")) {
		return EventType{}, errs.Invalid("schema", "must be a JSON Schema object")
	}
	sch, err := compileSchema(name, schema)
	var le *limitError
	switch {
	case errors.As(err, &le):
		return EventType{}, errs.Invalid("schema", "%s", le.msg)
	case err != nil:
		return EventType{}, errs.Invalid("schema", "does not compile as a JSON Schema: %s", err)
	}
	if msg := refCycle(ctx, sch, example); msg != "" {
		return EventType{}, errs.Invalid("schema", "%s (no bizData could ever satisfy it)", msg)
	}
	if example == nil || string(example) == "null" {
		example = firstExample(ctx, sch, schema)
	} else if err := validate(ctx, sch, example); err != nil {
		var se *SchemaError
		if errors.As(err, &se) {
			return EventType{}, errs.Invalid("example", "does not satisfy the schema at %s: %s", se.Path, se.Reason)
		}
		return EventType{}, errs.Invalid("example", "%s", err)
	}
	// The count and the insert are one transaction that concurrent
	// declarations take in turn (the catalogue's lock, see
	// lockCatalogue), so that several at once cannot pass MaxCustomTypes
	// together.
	var row *ent.WebhookEventType
	err = store.WithTx(ctx, c.client, func(tx *ent.Tx) error {
		if _, err := tx.ExecContext(ctx, lockCatalogue(c.dialect)); err != nil {
			return fmt.Errorf("%w: lock the catalogue: %w", errs.Unavailable, err)
		}
		n, err := tx.WebhookEventType.Query().Count(ctx)
		if err != nil {
			return fmt.Errorf("%w: count event types: %w", errs.Unavailable, err)
		}
		if n >= MaxCustomTypes {
			return &errs.Error{Kind: errs.InvalidState, Msg: fmt.Sprintf("the catalogue already holds %d custom event types, the most it may", n)}
		}
		create := tx.WebhookEventType.Create().
			SetName(name).
			SetDescription(description).
			SetSchema(string(schema)).
			SetCreateTime(c.now().UTC().Truncate(time.Microsecond))
		if example != nil {
			create.SetExample(string(example))
		}
		row, err = create.Save(ctx)
		return err
	})
	var ce *errs.Error
	switch {
	case ent.IsConstraintError(err):
		return EventType{}, &errs.Error{Kind: errs.Conflict, Msg: fmt.Sprintf("event type %s already exists (types never change once declared: declare a new name, e.g. %s_v2)", name, name)}
	case errors.As(err, &ce):
		return EventType{}, err
	case err != nil:
		return EventType{}, fmt.Errorf("create event type %s: %w", name, err)
	}
	if _, err := c.remember(row); err != nil {
		return EventType{}, err
	}
	return customType(row), nil
}

// firstExample is the schema's first "examples" entry when it satisfies
// the schema, else nil.
func firstExample(ctx context.Context, sch *compiled, schema []byte) json.RawMessage {
	var doc struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if json.Unmarshal(schema, &doc) != nil || len(doc.Examples) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, doc.Examples[0]) != nil || validate(ctx, sch, buf.Bytes()) != nil {
		return nil
	}
	return buf.Bytes()
}

// refCycle reports a reference cycle of a compiled schema ("$ref"s that
// lead back to themselves without consuming any of the document), which
// compiles but fails every document that reaches it: it validates a few
// probe documents (null, {}, the example) and returns the cycle's
// description, or "" when none showed.
func refCycle(ctx context.Context, sch *compiled, example json.RawMessage) string {
	probes := []any{nil, map[string]any{}}
	if example != nil {
		if v, err := jsonschema.UnmarshalJSON(bytes.NewReader(example)); err == nil {
			probes = append(probes, v)
		}
	}
	var found string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if k, ok := e.ErrorKind.(*kind.RefCycle); ok && found == "" {
			found = "has a reference cycle: " + k.KeywordLocation1 + " and " + k.KeywordLocation2 + " resolve to the same schema"
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	for _, v := range probes {
		var ve *jsonschema.ValidationError
		if errors.As(sch.run(ctx, v), &ve) {
			walk(ve)
		}
		if found != "" {
			return found
		}
	}
	return ""
}

// noLoader refuses every schema reference that leaves the schema itself
// (files, URLs): a declared schema must not make the service read a file
// or call out. The standard meta-schemas are built into the library.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references outside the schema are not allowed (%s)", url)
}

// compiled is a compiled schema metered by its budget (see meter): one
// validation at a time.
type compiled struct {
	sch *jsonschema.Schema
	b   *budget
}

// limitError is a schema beyond one of the bounds (MaxSchemaDepth and
// the others); msg names the bound.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// compileSchema compiles a type's JSON Schema: draft 2020-12 unless it
// names another, formats asserted ("format": "date-time" is checked), and
// no reference outside the document. A schema beyond MaxSchemaLen or one
// of the shape bounds (checkShape) is refused before it is compiled, one
// beyond MaxSchemaExpansion after; the result counts its steps (meter).
func compileSchema(name string, schema []byte) (*compiled, error) {
	if len(schema) > MaxSchemaLen {
		return nil, &limitError{fmt.Sprintf("is larger than %d bytes (limit: schema size %d)", MaxSchemaLen, MaxSchemaLen)}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if err := checkShape(doc); err != nil {
		return nil, &limitError{err.Error()}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	loc := "mem:///event-types/" + name + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), loc, "schema"))
	}
	b := &budget{limit: ValidationSteps}
	if err := checkExpansion(meter(sch, b)); err != nil {
		return nil, &limitError{err.Error()}
	}
	return &compiled{sch: sch, b: b}, nil
}

// run validates v (decoded) with c under ctx and the validation budget:
// the library's error, or budgetError when the budget or ctx stopped it.
func (c *compiled) run(ctx context.Context, v any) (err error) {
	c.b.ctx, c.b.steps = ctx, 0
	defer func() {
		c.b.ctx = nil
		if r := recover(); r != nil {
			stop, ok := r.(budgetStop)
			if !ok {
				panic(r)
			}
			err = budgetError(stop.err)
		}
	}()
	return c.sch.Validate(v)
}

// Check validates bizData against the type's schema (a *SchemaError,
// wrapped as a validation error, when it does not satisfy it). For tests
// and tools; the service keeps its types compiled.
func (t EventType) Check(bizData []byte) error {
	sch, err := compileSchema(t.Name, t.Schema)
	if err != nil {
		return err
	}
	return validate(context.Background(), sch, bizData)
}
