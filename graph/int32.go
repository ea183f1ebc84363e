package graph

import (
	"math"
	"strconv"

	"gatehouse/internal/errs"
)

// int32Field is v for a deprecated field of GraphQL's Int, which the
// specification bounds to 32 bits: a value beyond them is a field error
// (INVALID_STATE) naming the field to read instead, never a number a
// client's Int cannot hold (9999999999 was returned as is).
func int32Field(name string, v int64, instead string) (int, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, errs.New(errs.InvalidState, name+" is "+strconv.FormatInt(v, 10)+", beyond GraphQL's 32-bit Int: read "+instead)
	}
	return int(v), nil
}
