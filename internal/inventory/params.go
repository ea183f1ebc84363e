package inventory

import (
	"encoding/json"
	"strconv"

	"gatehouse/internal/errs"
)

// Limits of a deduction request (docs/reference.md).
const (
	MaxBizNoLen = 64
	MinQuantity = 1
	MaxQuantity = 1_000_000
)

// APIPath is the endpoint recorded in idempotency records when the input
// names none.
const APIPath = "/api/v1/inventory/deduct"

// DeductInput is a validated deduction request.
type DeductInput struct {
	BizNo    string
	SkuID    int
	Quantity int64
	// Path is the endpoint called (/api/v2/inventory/deduct), kept in the
	// idempotency record; empty means APIPath. Records are shared by every
	// version: a biz_no first used on one version replays on another.
	Path string
}

// apiPath is the endpoint to record.
func (in DeductInput) apiPath() string {
	if in.Path == "" {
		return APIPath
	}
	return in.Path
}

// ParseDeduct validates the business parameters of a deduction; get
// returns a parameter's value and whether it was given. biz_no: 1–64
// printable ASCII characters (0x20–0x7E); sku_id: a positive integer;
// quantity: an integer 1–1 000 000. Integers are plain ASCII digits (no
// sign, no space, no exponent). Errors: errs.Validation.
func ParseDeduct(get func(name string) (string, bool)) (DeductInput, error) {
	var in DeductInput
	bizNo, ok := get("biz_no")
	if !ok || bizNo == "" {
		return in, errs.Invalid("biz_no", "is required")
	}
	if err := validateBizNo(bizNo); err != nil {
		return in, err
	}
	in.BizNo = bizNo

	v, ok := get("sku_id")
	if !ok || v == "" {
		return in, errs.Invalid("sku_id", "is required")
	}
	id, ok := parseDigits(v)
	if !ok || id > int64(maxInt) {
		return in, errSkuID
	}
	in.SkuID = int(id)

	v, ok = get("quantity")
	if !ok || v == "" {
		return in, errs.Invalid("quantity", "is required")
	}
	if in.Quantity, ok = parseDigits(v); !ok {
		return in, errQuantity
	}
	return in, in.validate()
}

var (
	errSkuID    = errs.Invalid("sku_id", "must be a positive integer")
	errQuantity = errs.Invalid("quantity", "must be an integer from %d to %d", MinQuantity, MaxQuantity)
)

// validate checks the rules of a deduction request.
func (in DeductInput) validate() error {
	if err := validateBizNo(in.BizNo); err != nil {
		return err
	}
	if in.SkuID < 1 {
		return errSkuID
	}
	if in.Quantity < MinQuantity || in.Quantity > MaxQuantity {
		return errQuantity
	}
	return nil
}

func validateBizNo(bizNo string) error {
	switch {
	case bizNo == "":
		return errs.Invalid("biz_no", "is required")
	case len(bizNo) > MaxBizNoLen:
		return errs.Invalid("biz_no", "must be at most %d characters", MaxBizNoLen)
	case !printableASCII(bizNo):
		return errs.Invalid("biz_no", "must be printable ASCII")
	}
	return nil
}

const maxInt = int(^uint(0) >> 1)

// parseDigits reads 1–19 ASCII digits as a non-negative int64.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// snapshot is the canonical JSON of a request's business parameters stored
// as request_params: keys in ascending order, integers as numbers.
type snapshot struct {
	BizNo    string `json:"biz_no"`
	Quantity int64  `json:"quantity"`
	SkuID    int    `json:"sku_id"`
}

func (in DeductInput) snapshot() string {
	b, _ := json.Marshal(snapshot{BizNo: in.BizNo, Quantity: in.Quantity, SkuID: in.SkuID}) // cannot fail
	return string(b)
}

// sameRequest reports whether the stored snapshot names the same SKU and
// quantity as in.
func (in DeductInput) sameRequest(stored string) (bool, error) {
	var s snapshot
	if err := json.Unmarshal([]byte(stored), &s); err != nil {
		return false, err
	}
	return s.SkuID == in.SkuID && s.Quantity == in.Quantity, nil
}
