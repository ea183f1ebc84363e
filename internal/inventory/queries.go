package inventory

import (
	"strconv"
	"strings"

	"gatehouse/ent/idempotencyrecord"
	"gatehouse/ent/sku"
)

// queries are the statements of a deduction. They are hand-written rather
// than built with Ent because the deduction needs what Ent's builders do
// not offer together in one transaction: a conditional UPDATE … RETURNING,
// INSERT … ON CONFLICT DO NOTHING RETURNING, and a savepoint. Both SQLite
// (3.35+) and Postgres accept every statement; only the placeholders differ.
type queries struct {
	// insertRecord adds the record in status 0, or nothing when the biz_no
	// exists. On Postgres an INSERT that meets an uncommitted row with the
	// same biz_no waits for that transaction to end; on SQLite the
	// transaction itself waits (BEGIN IMMEDIATE). Either way a concurrent
	// request sees the first one's committed outcome.
	insertRecord string
	selectRecord string
	finishRecord string
	// decrement is the only statement that lowers stock: the condition
	// keeps it non-negative, and on Postgres a concurrent update of the row
	// is waited for and the condition re-checked against its result.
	decrement string
	skuExists string
}

func newQueries(postgres bool) queries {
	rec, r := idempotencyrecord.Table, idempotencyrecord.FieldBizNo
	cols := strings.Join([]string{
		idempotencyrecord.FieldBizNo, idempotencyrecord.FieldAppKey, idempotencyrecord.FieldAPIPath,
		idempotencyrecord.FieldRequestParams, idempotencyrecord.FieldStatus,
		idempotencyrecord.FieldCreateTime, idempotencyrecord.FieldUpdateTime,
	}, ", ")
	q := queries{
		insertRecord: "INSERT INTO " + rec + " (" + cols + ") VALUES (?, ?, ?, ?, " + strconv.Itoa(StatusProcessing) + ", ?, ?) " +
			"ON CONFLICT (" + r + ") DO NOTHING RETURNING " + idempotencyrecord.FieldID,
		selectRecord: "SELECT " + strings.Join([]string{
			idempotencyrecord.FieldAppKey, idempotencyrecord.FieldRequestParams,
			idempotencyrecord.FieldResponseResult, idempotencyrecord.FieldStatus,
		}, ", ") + " FROM " + rec + " WHERE " + r + " = ?",
		finishRecord: "UPDATE " + rec + " SET " + idempotencyrecord.FieldStatus + " = ?, " +
			idempotencyrecord.FieldResponseResult + " = ?, " + idempotencyrecord.FieldUpdateTime + " = ? WHERE " +
			idempotencyrecord.FieldID + " = ?",
		decrement: "UPDATE " + sku.Table + " SET " + sku.FieldStock + " = " + sku.FieldStock + " - ?, " +
			sku.FieldUpdateTime + " = ? WHERE " + sku.FieldID + " = ? AND " + sku.FieldStock + " >= ? RETURNING " + sku.FieldStock,
		skuExists: "SELECT 1 FROM " + sku.Table + " WHERE " + sku.FieldID + " = ?",
	}
	if postgres {
		for _, p := range []*string{&q.insertRecord, &q.selectRecord, &q.finishRecord, &q.decrement, &q.skuExists} {
			*p = dollarPlaceholders(*p)
		}
	}
	return q
}

// dollarPlaceholders turns the i-th "?" into "$i" (the statements above
// hold no "?" inside literals).
func dollarPlaceholders(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Savepoint statements around the business work of a deduction.
const (
	savepoint         = "SAVEPOINT deduct"
	rollbackSavepoint = "ROLLBACK TO SAVEPOINT deduct"
)
