package inventory

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"gatehouse/ent"
	"gatehouse/internal/errs"
)

// Limits of the SKU fields.
const (
	// MaxNameLen is the longest SKU name after trimming, in characters.
	MaxNameLen = 200
	// MaxStock is the largest stock a SKU may be given.
	MaxStock = 1_000_000_000_000
)

// CreateSku stores a SKU. name is trimmed of surrounding white space and
// must then be 1–200 characters without
// control characters; stock must be 0–1e12. Errors: errs.Validation.
func (s *Service) CreateSku(ctx context.Context, name string, stock int64) (*ent.Sku, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return nil, err
	}
	if err := validateStock(stock); err != nil {
		return nil, err
	}
	row, err := s.db.Sku.Create().SetName(n).SetStock(stock).SetUpdateTime(s.now()).Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("create sku: %w", err)
	}
	return row, nil
}

// SetStock replaces the stock of SKU id (an administrative correction: it
// is absolute, so it wins over deductions that committed before it).
// Errors: errs.Validation for a stock outside 0–1e12, ErrNotFound.
func (s *Service) SetStock(ctx context.Context, id int, stock int64) (*ent.Sku, error) {
	if err := validateStock(stock); err != nil {
		return nil, err
	}
	if id <= 0 {
		return nil, ErrNotFound
	}
	row, err := s.db.Sku.UpdateOneID(id).SetStock(stock).SetUpdateTime(s.now()).Save(ctx)
	switch {
	case ent.IsNotFound(err):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("set stock of sku %d: %w", id, err)
	}
	return row, nil
}

// Sku returns SKU id. Errors: ErrNotFound.
func (s *Service) Sku(ctx context.Context, id int) (*ent.Sku, error) {
	row, err := s.db.Sku.Get(ctx, id)
	switch {
	case ent.IsNotFound(err):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("get sku %d: %w", id, err)
	}
	return row, nil
}

// NormalizeName trims surrounding white space and checks the name rules.
func NormalizeName(name string) (string, error) {
	n := strings.TrimSpace(name)
	switch {
	case n == "":
		return "", errs.Invalid("name", "is required and must not be blank")
	case !utf8.ValidString(n):
		return "", errs.Invalid("name", "must be valid UTF-8")
	case strings.ContainsFunc(n, unicode.IsControl):
		return "", errs.Invalid("name", "must not contain control characters")
	case utf8.RuneCountInString(n) > MaxNameLen:
		return "", errs.Invalid("name", "must be at most %d characters", MaxNameLen)
	}
	return n, nil
}

func validateStock(stock int64) error {
	if stock < 0 || stock > MaxStock {
		return errs.Invalid("stock", "must be an integer from 0 to %d", int64(MaxStock))
	}
	return nil
}
