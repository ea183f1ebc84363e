package ticket

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"entgo.io/ent/dialect/sql"

	entticket "gatehouse/ent/ticket"
	"gatehouse/internal/errs"
)

// Paging bounds of List.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// ListParams selects a page of tickets, newest first.
type ListParams struct {
	Status *Status // only tickets in this status
	Limit  int     // 0 means DefaultLimit
	Cursor string  // opaque, from a previous Page.Next
}

// Page is one page of tickets; Next is empty on the last page.
type Page struct {
	Tickets []Ticket
	Next    string
}

// cursor is the position after the last ticket of a page. It carries the
// status filter so a cursor cannot silently be reused with another one.
type cursor struct {
	CreatedAt int64  `json:"t"` // unix milliseconds
	ID        int    `json:"i"`
	Status    string `json:"s,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 256 || json.Unmarshal(b, &c) != nil || c.ID <= 0 {
		return cursor{}, errs.Invalid("", "cursor is not valid; use the one from the Link header")
	}
	return c, nil
}

// List returns tickets ordered by created_at then id, both descending.
func (s *Service) List(ctx context.Context, p ListParams) (Page, error) {
	limit := p.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return Page{}, errs.Invalid("", "limit must be between 1 and %d", MaxLimit)
	}
	status := ""
	if p.Status != nil {
		if err := entticket.StatusValidator(*p.Status); err != nil {
			return Page{}, errs.Invalid("", "status must be one of OPEN, DOING, DONE")
		}
		status = string(*p.Status)
	}
	q := s.client.Ticket.Query()
	if p.Status != nil {
		q = q.Where(entticket.StatusEQ(*p.Status))
	}
	if p.Cursor != "" {
		c, err := decodeCursor(p.Cursor)
		if err != nil {
			return Page{}, err
		}
		if c.Status != status {
			return Page{}, errs.Invalid("", "cursor was issued for another status filter")
		}
		at := time.UnixMilli(c.CreatedAt).UTC()
		q = q.Where(entticket.Or(
			entticket.CreatedAtLT(at),
			entticket.And(entticket.CreatedAtEQ(at), entticket.IDLT(c.ID)),
		))
	}
	rows, err := q.
		Order(entticket.ByCreatedAt(sql.OrderDesc()), entticket.ByID(sql.OrderDesc())).
		Limit(limit + 1).
		All(ctx)
	if err != nil {
		return Page{}, fmt.Errorf("list tickets: %w", err)
	}
	page := Page{Tickets: make([]Ticket, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			last := rows[limit-1]
			page.Next = cursor{CreatedAt: last.CreatedAt.UnixMilli(), ID: last.ID, Status: status}.encode()
			break
		}
		page.Tickets = append(page.Tickets, fromEnt(r))
	}
	return page, nil
}
