package dispatch

import (
	"context"
	"sync"

	"gatehouse/ent"
	"gatehouse/ent/hook"
	"gatehouse/internal/store"
)

// NotifyChannel is the Postgres channel on which replicas announce new
// webhook work (a delivery queued or re-queued, an app enabled again).
const NotifyChannel = "gatehouse_webhook_work"

// WakeOnCommit registers on c (the process's Ent client) the commit hooks
// that wake dispatchers when work appears through it: a delivery created,
// an app changed (enabled again, its expire date moved), or an endpoint
// changed (enabled again, a secret rotated: its cached secrets are dropped
// too). The app calls it once, where it wires the service.
//
// In a transaction the wake-up waits for the commit (a dispatcher must not
// look before the row is visible): the NOTIFY is sent inside the
// transaction just before it commits — Postgres delivers it to every
// listening replica at the commit, once per transaction however many rows
// it queued — and this process is woken right after the commit.
//
// A transaction is remembered by its Key, not by its *Tx: each call of a
// mutation's Tx method makes a new *Tx, so a set of *Tx never recognised
// a transaction's second row (one more hook and NOTIFY per row) and never
// forgot one (the commit removed the *Tx it was called on, not the ones
// added), keeping every transaction that queued a delivery, and its
// request, in memory for good.
func (s *Dispatcher) WakeOnCommit(c *ent.Client) {
	pending := &s.announcing
	after := func(ctx context.Context, m interface {
		Tx() (*ent.Tx, error)
		Client() *ent.Client
	}, epID int) {
		if epID != 0 {
			s.apps.forget(epID)
		}
		tx, err := m.Tx()
		if err != nil {
			// Outside a transaction the row is committed already.
			if err := store.Notify(ctx, m.Client(), s.db.Dialect, NotifyChannel); err != nil {
				s.log.Warn("webhook: NOTIFY failed; other replicas find the work by polling", "err", err)
			}
			s.Notify()
			return
		}
		if !pending.add(tx.Key()) {
			return // this transaction already announces its work
		}
		tx.OnCommit(func(next ent.Committer) ent.Committer {
			return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
				defer pending.remove(tx.Key())
				if err := store.Notify(ctx, tx, s.db.Dialect, NotifyChannel); err != nil {
					return err
				}
				if err := next.Commit(ctx, tx); err != nil {
					return err
				}
				if epID != 0 {
					s.apps.forget(epID) // a load that raced the commit
				}
				s.Notify()
				return nil
			})
		})
		tx.OnRollback(func(next ent.Rollbacker) ent.Rollbacker {
			return ent.RollbackFunc(func(ctx context.Context, tx *ent.Tx) error {
				pending.remove(tx.Key())
				return next.Rollback(ctx, tx)
			})
		})
	}
	c.WebhookDelivery.Use(func(next ent.Mutator) ent.Mutator {
		return hook.WebhookDeliveryFunc(func(ctx context.Context, m *ent.WebhookDeliveryMutation) (ent.Value, error) {
			v, err := next.Mutate(ctx, m)
			if err == nil && m.Op().Is(ent.OpCreate) {
				after(ctx, m, 0)
			}
			return v, err
		})
	})
	c.PartnerApp.Use(func(next ent.Mutator) ent.Mutator {
		return hook.PartnerAppFunc(func(ctx context.Context, m *ent.PartnerAppMutation) (ent.Value, error) {
			v, err := next.Mutate(ctx, m)
			if err == nil && m.Op().Is(ent.OpUpdateOne|ent.OpUpdate) {
				after(ctx, m, 0) // enabled again, or its expire date moved
			}
			return v, err
		})
	})
	c.WebhookEndpoint.Use(func(next ent.Mutator) ent.Mutator {
		return hook.WebhookEndpointFunc(func(ctx context.Context, m *ent.WebhookEndpointMutation) (ent.Value, error) {
			v, err := next.Mutate(ctx, m)
			if err != nil || m.Op().Is(ent.OpCreate) {
				return v, err
			}
			if id, ok := m.ID(); ok {
				after(ctx, m, id)
			} else {
				s.apps.forgetAll()
				after(ctx, m, 0)
			}
			return v, err
		})
	})
}

// Kick announces re-queued work (resend): to this process at once, and on
// Postgres to every replica. Call it after the change committed.
func (s *Dispatcher) Kick(ctx context.Context) {
	if err := store.Notify(ctx, s.client, s.db.Dialect, NotifyChannel); err != nil {
		s.log.Warn("webhook: NOTIFY failed; other replicas find the work by polling", "err", err)
	}
	s.Notify()
}

// txSet remembers the transactions (by ent.Tx.Key) that already announce
// their work.
type txSet struct {
	mu sync.Mutex
	m  map[any]bool
}

func (t *txSet) add(key any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[any]bool)
	}
	if t.m[key] {
		return false
	}
	t.m[key] = true
	return true
}

func (t *txSet) remove(key any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}
