// Package ticket is the ticket service: create, list, and move a ticket
// along OPEN → DOING → DONE. The rules live here, not in the HTTP layer.
package ticket

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/ent"
	entticket "gatehouse/ent/ticket"
	"gatehouse/internal/errs"
)

// Errors returned by the service; the REST layer maps their kinds to
// statuses. Bad input is an errs.Validation error whose message names the
// field in words ("title must be ..."), so it carries no separate field.
var (
	ErrNotFound          = errs.New(errs.NotFound, "ticket not found")
	ErrInvalidTransition = errs.New(errs.InvalidState, "invalid status transition")
)

// Status is a ticket status.
type Status = entticket.Status

// The ticket statuses.
const (
	Open  Status = entticket.StatusOPEN
	Doing Status = entticket.StatusDOING
	Done  Status = entticket.StatusDONE
)

// MaxTitleLen is the longest title, in characters, after trimming.
const MaxTitleLen = 200

// Ticket is the service's view of a ticket.
type Ticket struct {
	ID        int
	Title     string
	Status    Status
	CreatedAt time.Time
}

// Service implements the ticket rules over Ent.
type Service struct {
	client *ent.Client
	now    func() time.Time
}

// NewService returns a Service.
func NewService(client *ent.Client) *Service {
	return &Service{client: client, now: time.Now}
}

// ParseStatus accepts exactly OPEN, DOING or DONE.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if err := entticket.StatusValidator(st); err != nil {
		return "", errs.Invalid("", "status must be one of OPEN, DOING, DONE")
	}
	return st, nil
}

// NormalizeTitle trims surrounding white space and checks the title rules:
// 1–200 characters, no control characters, and none of the bidirectional,
// zero-width or invisible format characters that make text display
// differently from what it holds (RefusedRune). A refusal names the
// character.
func NormalizeTitle(title string) (string, error) {
	// Before trimming: U+0085 (NEXT LINE) is white space to TrimSpace, yet
	// a C1 control, refused wherever it stands.
	for _, r := range title {
		if r >= 0x80 {
			if why := RefusedRune(r); why != "" {
				return "", errs.Invalid("", "title must not contain %s", why)
			}
		}
	}
	t := strings.TrimSpace(title)
	if t == "" {
		return "", errs.Invalid("", "title is required and must not be blank")
	}
	if !utf8.ValidString(t) {
		return "", errs.Invalid("", "title must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(t); n > MaxTitleLen {
		return "", errs.Invalid("", "title must be at most %d characters (got %d)", MaxTitleLen, n)
	}
	for _, r := range t {
		if why := RefusedRune(r); why != "" {
			return "", errs.Invalid("", "title must not contain %s", why)
		}
	}
	return t, nil
}

// Create stores a new OPEN ticket.
func (s *Service) Create(ctx context.Context, title string) (Ticket, error) {
	t, err := NormalizeTitle(title)
	if err != nil {
		return Ticket{}, err
	}
	// Millisecond precision is what the API shows and what the list cursor
	// carries; storing exactly that keeps cursors exact on every database.
	created := s.now().UTC().Truncate(time.Millisecond)
	row, err := s.client.Ticket.Create().SetTitle(t).SetCreatedAt(created).Save(ctx)
	if err != nil {
		return Ticket{}, fmt.Errorf("create ticket: %w", err)
	}
	return fromEnt(row), nil
}

// Get returns one ticket.
func (s *Service) Get(ctx context.Context, id int) (Ticket, error) {
	row, err := s.client.Ticket.Get(ctx, id)
	if ent.IsNotFound(err) {
		return Ticket{}, ErrNotFound
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("get ticket %d: %w", id, err)
	}
	return fromEnt(row), nil
}

// previous is the only status a ticket may move to each status from.
var previous = map[Status]Status{Doing: Open, Done: Doing}

// ChangeStatus moves a ticket to `to` when the move is OPEN→DOING or
// DOING→DONE. The move is a compare-and-set on the current status, so of
// two concurrent identical moves exactly one succeeds.
func (s *Service) ChangeStatus(ctx context.Context, id int, to Status) (Ticket, error) {
	if err := entticket.StatusValidator(to); err != nil {
		return Ticket{}, errs.Invalid("", "status must be one of OPEN, DOING, DONE")
	}
	from, ok := previous[to]
	if ok {
		n, err := s.client.Ticket.Update().
			Where(entticket.ID(id), entticket.StatusEQ(from)).
			SetStatus(to).
			Save(ctx)
		if err != nil {
			return Ticket{}, fmt.Errorf("change status of ticket %d: %w", id, err)
		}
		if n == 1 {
			return s.Get(ctx, id)
		}
	}
	// Nothing moved: tell a missing ticket from a forbidden move.
	cur, err := s.Get(ctx, id)
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{}, fmt.Errorf("%w: %s to %s is not allowed (only OPEN to DOING and DOING to DONE)", ErrInvalidTransition, cur.Status, to)
}

func fromEnt(r *ent.Ticket) Ticket {
	return Ticket{ID: r.ID, Title: r.Title, Status: r.Status, CreatedAt: r.CreatedAt.UTC()}
}
