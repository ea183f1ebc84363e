package apikey_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/apikey"
	"gatehouse/internal/errs"
	"gatehouse/internal/kv"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// mirrorReplica is one process's key service with its mirror, over its
// own connections to the shared database and shared store, counting the
// key rows it reads.
type mirrorReplica struct {
	svc   *apikey.Service
	reads atomic.Int64
}

func newMirrorReplica(t *testing.T, b testenv.Backend, dbURL string, shared kv.Store) *mirrorReplica {
	t.Helper()
	db := storetest.OpenURL(t, dbURL)
	r := &mirrorReplica{}
	db.Client.APIKey.Intercept(ent.InterceptFunc(func(next ent.Querier) ent.Querier {
		return ent.QuerierFunc(func(ctx context.Context, q ent.Query) (ent.Value, error) {
			r.reads.Add(1)
			return next.Query(ctx, q)
		})
	}))
	m, err := apikey.NewMirror(context.Background(), db, shared, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	r.svc = apikey.NewService(db.Client, nil, apikey.WithMirror(m))
	return r
}

// sharedStore opens b's shared store: Redis with the test's prefix, or a
// store of this replica's own in memory (the embedded backend's, whose
// replicas are the services of one process).
func sharedStore(t *testing.T, b testenv.Backend) kv.Store {
	t.Helper()
	var opts []kv.Option
	if b.RedisURL != "" {
		opts = append(opts, kv.WithPrefix(b.KeyPrefix))
	}
	s, err := kv.Open(context.Background(), b.RedisURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mirrorDBURL(t *testing.T, b testenv.Backend) string {
	if b.Embedded() {
		return "sqlite:" + filepath.Join(t.TempDir(), "keys.db")
	}
	return b.DatabaseURL
}

// TestMirrorRevocationReachesReplicas: a key is read from the database
// once, then checked without reading it; a disable, a role change (the
// bootstrap key) or an enable made on one replica holds on the other from its very next check.
func TestMirrorRevocationReachesReplicas(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		url := mirrorDBURL(t, b)
		a := newMirrorReplica(t, b, url, sharedStore(t, b))
		other := newMirrorReplica(t, b, url, sharedStore(t, b))
		ctx := context.Background()
		row, key, err := a.svc.CreateScoped(ctx, "publisher", apikey.RolePublisher, []string{"invoice.*"})
		if err != nil {
			t.Fatal(err)
		}
		check := func(r *mirrorReplica, wantRole apikey.Role) {
			t.Helper()
			got, err := r.svc.Authenticate(ctx, key)
			if wantRole == "" {
				if !errors.Is(err, apikey.ErrInvalid) {
					t.Fatalf("a disabled key: %v, %v", got, err)
				}
				return
			}
			if err != nil || got.ID != row.ID || got.Role != wantRole {
				t.Fatalf("Authenticate: %+v, %v; want role %s", got, err, wantRole)
			}
		}
		for _, r := range []*mirrorReplica{a, other} {
			check(r, apikey.RolePublisher)
		}
		before := other.reads.Load()
		for range 20 {
			check(other, apikey.RolePublisher)
		}
		// At most one read: the LISTEN connection, once it is up, drops
		// the mirror (notifications sent before it were missed).
		if n := other.reads.Load() - before; n > 1 {
			t.Fatalf("20 checks of a known key read the database %d times", n)
		}

		if _, err := a.svc.Disable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		check(other, "")
		check(a, "")
		if _, err := a.svc.Enable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		check(other, apikey.RolePublisher)
		// The one role change a user can make: the key named as
		// GATEHOUSE_BOOTSTRAP_API_KEY at a replica's start becomes ADMIN.
		if _, err := a.svc.Ensure(ctx, "bootstrap", key); err != nil {
			t.Fatal(err)
		}
		check(other, apikey.RoleAdmin)
		// A key created on one replica works on the other at once.
		_, fresh, err := a.svc.Create(ctx, "fresh", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		mustAuth(t, other.svc, fresh)
		if _, err := other.svc.Disable(ctx, 999999); !errors.Is(err, apikey.ErrNotFound) {
			t.Fatalf("Disable of an unknown key: %v", err)
		}
	})
}

func mustAuth(t *testing.T, svc *apikey.Service, key string) *ent.APIKey {
	t.Helper()
	row, err := svc.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// failingGets is a shared store whose reads fail while failing is set.
type failingGets struct {
	kv.Store
	failing atomic.Bool
	failed  atomic.Int64 // Gets refused
}

func (f *failingGets) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if f.failing.Load() {
		f.failed.Add(1)
		return nil, false, errs.New(errs.Unavailable, "test: the store is down")
	}
	return f.Store.Get(ctx, key)
}

// TestMirrorWithoutTheMark: while the change mark cannot be read, keys are
// checked in the database (a disable made meanwhile holds at once), and
// the mirror is used again once the mark can be read.
func TestMirrorWithoutTheMark(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("the embedded database's change mark lives in the process and cannot fail")
		}
		url := mirrorDBURL(t, b)
		store := &failingGets{Store: sharedStore(t, b)}
		r := newMirrorReplica(t, b, url, store)
		ctx := context.Background()
		row, key, err := r.svc.Create(ctx, "ops", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		mustAuth(t, r.svc, key)
		apikey.MarkRetryAfter = 300 * time.Millisecond
		t.Cleanup(func() { apikey.MarkRetryAfter = time.Second })
		store.failing.Store(true)
		before := r.reads.Load()
		mustAuth(t, r.svc, key)
		if r.reads.Load() == before {
			t.Fatal("with the mark unreadable, the key was not read from the database")
		}
		// A failed read is not repeated by every check: for a moment the
		// checks go to the database at once (each would otherwise wait out
		// the store's timeout), then one tries the store again.
		for range 5 {
			mustAuth(t, r.svc, key)
		}
		if n := store.failed.Load(); n != 1 {
			t.Fatalf("the store was asked for the mark %d times within MarkRetryAfter, want 1", n)
		}
		time.Sleep(apikey.MarkRetryAfter)
		mustAuth(t, r.svc, key)
		if n := store.failed.Load(); n != 2 {
			t.Fatalf("the store was not asked again after MarkRetryAfter: %d reads", n)
		}
		// Disabled behind this replica's back (another replica whose mark
		// did not reach the store): the database says so.
		other := apikey.NewService(storetest.OpenURL(t, url).Client, nil)
		if _, err := other.Disable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.Authenticate(ctx, key); !errors.Is(err, apikey.ErrInvalid) {
			t.Fatalf("a key disabled while the mark was unreadable: %v", err)
		}
		if _, err := other.Enable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		store.failing.Store(false)
		time.Sleep(apikey.MarkRetryAfter)
		mustAuth(t, r.svc, key)
		before = r.reads.Load()
		mustAuth(t, r.svc, key)
		if n := r.reads.Load() - before; n != 0 {
			t.Fatalf("the mirror is not used again once the mark is readable: %d reads", n)
		}
	})
}

// TestMirrorDropsAtNotify: on Postgres a change announced only by its
// NOTIFY (its mark lost) still drops the other replicas' mirrors.
func TestMirrorDropsAtNotify(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("Postgres only: LISTEN/NOTIFY")
		}
		url := mirrorDBURL(t, b)
		shared := sharedStore(t, b)
		a := newMirrorReplica(t, b, url, shared)
		other := newMirrorReplica(t, b, url, shared)
		ctx := context.Background()
		row, key, err := a.svc.Create(ctx, "ops", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		mustAuth(t, other.svc, key)
		mark, _, err := shared.Get(ctx, apikey.ChangeMarkKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.svc.Disable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		// The store loses the new mark (a failover to a replica that had
		// not received it): only the NOTIFY tells the other mirror.
		if err := shared.Set(ctx, apikey.ChangeMarkKey, mark, 0); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := other.svc.Authenticate(ctx, key)
			if errors.Is(err, apikey.ErrInvalid) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the disabled key is still accepted after the NOTIFY: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
