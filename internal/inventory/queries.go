package inventory

import (
	"strconv"
	"strings"

	"gatehouse/ent/idempotencyrecord"
	"gatehouse/ent/sku"
)

// queries are the statements of a deduction. They are hand-written rather
// than built with Ent because a deduction needs what Ent's builders do not
// offer: a conditional UPDATE … RETURNING guarded by a subquery, INSERT …
// ON CONFLICT DO NOTHING RETURNING, and on Postgres a call of the function
// gatehouse_deduct (created by the migration
// internal/store/migrations/postgres/20261124220000_deduct_function.sql).
type queries struct {
	// deduct (Postgres) is the whole deduction in one statement: the
	// record, the conditional decrement and the outcome, or the record of
	// an earlier request with the biz_no.
	deduct string
	// deductBatch (Postgres) is several deductions in one statement and
	// one transaction (the function gatehouse_deduct_batch, created by
	// …_deduct_batch_function.sql): one row per deduction, ord its
	// position in the arrays.
	deductBatch string

	// decrement (SQLite) lowers the stock only if enough remains and the
	// biz_no has no record yet; it is the only statement that lowers stock
	// on SQLite, and runs while this process holds the write turn and the
	// transaction holds the database's write lock.
	decrement string
	// insertSucceeded (SQLite) records the success with its result, after
	// decrement returned a row, in the same transaction.
	insertSucceeded string
	// insertFailed (SQLite) records a business failure when decrement
	// returned no row; no row back means the biz_no has a record. It
	// returns whether the SKU exists (unknown SKU or insufficient stock).
	insertFailed string

	// recordFailure records an unexpected failure (2) after the
	// deduction's own statement or transaction rolled back, unless the
	// biz_no was decided meanwhile.
	recordFailure string
	selectRecord  string
}

func newQueries(postgres bool) queries {
	rec := idempotencyrecord.Table
	cols := strings.Join([]string{
		idempotencyrecord.FieldBizNo, idempotencyrecord.FieldAppKey, idempotencyrecord.FieldAPIPath,
		idempotencyrecord.FieldRequestParams, idempotencyrecord.FieldStatus, idempotencyrecord.FieldResponseResult,
		idempotencyrecord.FieldCreateTime, idempotencyrecord.FieldUpdateTime,
	}, ", ")
	onConflict := " ON CONFLICT (" + idempotencyrecord.FieldBizNo + ") DO NOTHING"
	q := queries{
		deduct: "SELECT fresh, app_key, request_params, response_result, status, remaining_stock, sku_exists " +
			"FROM gatehouse_deduct($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		deductBatch: "SELECT ord, fresh, app_key, request_params, response_result, status, remaining_stock, sku_exists " +
			"FROM gatehouse_deduct_batch($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		decrement: "UPDATE " + sku.Table + " SET " + sku.FieldStock + " = " + sku.FieldStock + " - ?, " +
			sku.FieldUpdateTime + " = ? WHERE " + sku.FieldID + " = ? AND " + sku.FieldStock + " >= ? AND NOT EXISTS (SELECT 1 FROM " +
			rec + " WHERE " + idempotencyrecord.FieldBizNo + " = ?) RETURNING " + sku.FieldStock,
		insertSucceeded: "INSERT INTO " + rec + " (" + cols + ") VALUES (?, ?, ?, ?, " + strconv.Itoa(StatusSucceeded) + ", ?, ?, ?)",
		insertFailed: "INSERT INTO " + rec + " (" + cols + ") VALUES (?, ?, ?, ?, " + strconv.Itoa(StatusFailed) + ", NULL, ?, ?)" +
			onConflict + " RETURNING (SELECT count(*) FROM " + sku.Table + " WHERE " + sku.FieldID + " = ?)",
		recordFailure: "INSERT INTO " + rec + " (" + cols + ") VALUES (?, ?, ?, ?, " + strconv.Itoa(StatusFailed) + ", NULL, ?, ?)" + onConflict,
		selectRecord: "SELECT " + strings.Join([]string{
			idempotencyrecord.FieldAppKey, idempotencyrecord.FieldRequestParams,
			idempotencyrecord.FieldResponseResult, idempotencyrecord.FieldStatus,
		}, ", ") + " FROM " + rec + " WHERE " + idempotencyrecord.FieldBizNo + " = ?",
	}
	if postgres {
		for _, p := range []*string{&q.recordFailure, &q.selectRecord} {
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
