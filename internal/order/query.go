package order

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gatehouse/internal/errs"
)

// Paging of the order query (docs/reference.md).
const (
	DefaultPage     = 1
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// Query is a validated order query. Page and PageSize are validated and
// echo the caller's paging; the query names one order, so they select
// nothing today.
type Query struct {
	OrderNo  string
	Page     int
	PageSize int
}

// ParseQuery validates the parameters of the order query; get returns a
// parameter's value and whether it was given.
func ParseQuery(get func(name string) (string, bool)) (Query, error) {
	q := Query{Page: DefaultPage, PageSize: DefaultPageSize}
	no, ok := get("order_no")
	switch {
	case !ok || no == "":
		return Query{}, errs.Invalid("order_no", "is required")
	case !utf8.ValidString(no) || strings.ContainsFunc(no, unicode.IsControl):
		return Query{}, errs.Invalid("order_no", "must be text without control characters")
	case utf8.RuneCountInString(no) > MaxOrderNoLen:
		return Query{}, errs.Invalid("order_no", "must be at most %d characters", MaxOrderNoLen)
	}
	q.OrderNo = no
	if v, ok := get("page"); ok {
		n, err := positive(v)
		if err != nil {
			return Query{}, errs.Invalid("page", "must be an integer >= 1")
		}
		q.Page = n
	}
	if v, ok := get("page_size"); ok {
		n, err := positive(v)
		if err != nil || n > MaxPageSize {
			return Query{}, errs.Invalid("page_size", "must be an integer from 1 to %d", MaxPageSize)
		}
		q.PageSize = n
	}
	return q, nil
}

// positive reads 1–9 ASCII digits as an integer >= 1.
func positive(s string) (int, error) {
	if s == "" || len(s) > 9 || !digits(s) {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, strconv.ErrRange
	}
	return n, nil
}
