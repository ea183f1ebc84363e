package catalogue

import (
	"entgo.io/ent/dialect"

	"gatehouse/ent/webhookeventtype"
)

// The catalogue's lock: createWebhookEventType counts the custom types and
// inserts one in a transaction that begins with it, so that concurrent
// declarations (over all replicas) take turns and cannot pass
// MaxCustomTypes together. Neither statement has parameters.
const (
	// lockCataloguePostgres takes the transaction-level advisory lock
	// 0x67682d74797065 ("gh-type"): it ends with the transaction, also
	// through a transaction pooler.
	lockCataloguePostgres = `SELECT pg_advisory_xact_lock(29106467038130277)`
	// lockCatalogueSQLite is a write that changes nothing, which takes the
	// database's one write lock at once, before the count reads: a read
	// alone would not, and another writer could insert between the count
	// and the insert. The store's transactions begin IMMEDIATE and hold
	// that lock already; this keeps the turns if one did not.
	lockCatalogueSQLite = `UPDATE ` + webhookeventtype.Table + ` SET ` + webhookeventtype.FieldID + ` = ` + webhookeventtype.FieldID + ` WHERE 0`
)

// lockCatalogue is the catalogue's lock on backend d (a dialect name).
func lockCatalogue(d string) string {
	if d == dialect.Postgres {
		return lockCataloguePostgres
	}
	return lockCatalogueSQLite
}
