package outbound

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memKV is a map-backed KV recording the TTLs it was given.
type memKV struct {
	mu     sync.Mutex
	data   map[string][]byte
	ttls   map[string]time.Duration
	getErr error
}

func newMemKV() *memKV {
	return &memKV{data: map[string][]byte{}, ttls: map[string]time.Duration{}}
}

func (m *memKV) SetNX(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.data[key]; ok {
		return false, nil
	}
	m.data[key], m.ttls[key] = append([]byte(nil), value...), ttl
	return true, nil
}

func (m *memKV) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[key], m.ttls[key] = append([]byte(nil), value...), ttl
	return nil
}

func (m *memKV) Get(_ context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.getErr != nil {
		return nil, false, m.getErr
	}
	v, ok := m.data[key]
	return v, ok, nil
}

func (m *memKV) Del(_ context.Context, keys ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.data, k)
	}
	return nil
}

func (m *memKV) snapshot() (map[string][]byte, map[string]time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.data), maps.Clone(m.ttls)
}

var _ KV = (*memKV)(nil)

func TestCallOnce(t *testing.T) {
	ctx := context.Background()

	t.Run("runs once, stores 24 h, replays", func(t *testing.T) {
		kv := newMemKV()
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) { runs.Add(1); return []byte("paid"), nil }
		for i := range 3 {
			res, err := CallOnce(ctx, kv, "pay-1", fn)
			if err != nil || string(res) != "paid" {
				t.Fatalf("call %d: %q, %v", i+1, res, err)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("fn ran %d times, want 1", n)
		}
		data, ttls := kv.snapshot()
		if ttls["outbound:once:pay-1:lock"] != 5*time.Minute {
			t.Errorf("lock TTL = %s, want 5m", ttls["outbound:once:pay-1:lock"])
		}
		if ttls["outbound:once:pay-1:result"] != 24*time.Hour {
			t.Errorf("result TTL = %s, want 24h", ttls["outbound:once:pay-1:result"])
		}
		if _, held := data["outbound:once:pay-1:lock"]; held {
			t.Error("lock still held after the call finished")
		}
	})

	t.Run("in progress while another caller holds the key", func(t *testing.T) {
		kv := newMemKV()
		started, release := make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := CallOnce(ctx, kv, "pay-2", func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte("done"), nil
			})
			first <- err
		}()
		<-started
		ran := false
		_, err := CallOnce(ctx, kv, "pay-2", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
		if !errors.Is(err, ErrInProgress) || ran {
			t.Fatalf("second caller: error %v, ran %v; want ErrInProgress and not run", err, ran)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		res, err := CallOnce(ctx, kv, "pay-2", nil)
		if err != nil || string(res) != "done" {
			t.Fatalf("after completion: %q, %v", res, err)
		}
	})

	t.Run("failure releases the key and stores nothing", func(t *testing.T) {
		kv := newMemKV()
		boom := errors.New("boom")
		if _, err := CallOnce(ctx, kv, "pay-3", func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("error = %v, want boom", err)
		}
		if data, _ := kv.snapshot(); len(data) != 0 {
			t.Fatalf("store after failure = %v, want empty", data)
		}
		res, err := CallOnce(ctx, kv, "pay-3", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		if err != nil || string(res) != "ok" {
			t.Fatalf("retry after failure: %q, %v", res, err)
		}
	})

	t.Run("result stored while we raced for the lock", func(t *testing.T) {
		kv := newMemKV()
		// Another caller holds the lock but has already stored its result.
		_ = kv.Set(ctx, "outbound:once:pay-4:lock", []byte("theirs"), time.Minute)
		_ = kv.Set(ctx, "outbound:once:pay-4:result", []byte("stored"), time.Hour)
		res, err := CallOnce(ctx, kv, "pay-4", nil)
		if err != nil || string(res) != "stored" {
			t.Fatalf("got %q, %v; want the stored result", res, err)
		}
		if data, _ := kv.snapshot(); string(data["outbound:once:pay-4:lock"]) != "theirs" {
			t.Error("someone else's lock was released")
		}
	})

	t.Run("store errors are reported", func(t *testing.T) {
		kv := newMemKV()
		kv.getErr = errors.New("redis down")
		if _, err := CallOnce(ctx, kv, "pay-5", func(context.Context) ([]byte, error) { return nil, nil }); !errors.Is(err, kv.getErr) {
			t.Fatalf("error = %v, want the store error", err)
		}
	})
}
