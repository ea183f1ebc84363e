package audit_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent/auditevent"
	"gatehouse/internal/audit"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// TestRefusedEventsLimitedPerKey: a key's refused events are stored up to
// RefusedBurst at once, then RefusedPerMinute a minute; the rest are
// counted in one WARN a minute. Another key, and successful events of the
// same key, are not held back.
func TestRefusedEventsLimitedPerKey(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		var mu sync.Mutex
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		logs := &syncWriter{w: &bytes.Buffer{}}
		log := slog.New(slog.NewTextHandler(logs, nil))
		svc := newService(t, db, log, audit.Options{Now: clock})
		ctx := context.Background()
		refuse := func(key, n int) {
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					if err := svc.Record(ctx, audit.Event{APIKeyID: key, APIKeyName: "ro", Mutation: "disableApp",
						Outcome: audit.Refused, ErrorCode: "FORBIDDEN"}); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		count := func(key int, o audit.Outcome) int {
			return db.AuditEvent.Query().Where(auditevent.APIKeyID(key), auditevent.OutcomeEQ(o)).CountX(ctx)
		}
		refuse(1, 3*audit.RefusedBurst)
		if n := count(1, audit.Refused); n != audit.RefusedBurst {
			t.Fatalf("%d refused events stored, want the burst %d", n, audit.RefusedBurst)
		}
		if n := strings.Count(logs.String(), "exceeds its rate of refused admin requests"); n != 1 {
			t.Fatalf("%d WARN lines, want 1:\n%s", n, logs.String())
		}
		refuse(2, 10)
		seed(t, svc, 5, now)
		if count(2, audit.Refused) != 10 || count(1, audit.Success) != 5 {
			t.Fatal("another key's refusals or a successful event were held back")
		}
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
		refuse(1, 2*audit.RefusedPerMinute)
		if n := count(1, audit.Refused); n != audit.RefusedBurst+audit.RefusedPerMinute {
			t.Fatalf("after a minute %d refused events stored, want %d", n, audit.RefusedBurst+audit.RefusedPerMinute)
		}
		if !strings.Contains(logs.String(), "not_stored=") || strings.Count(logs.String(), "exceeds its rate") != 2 {
			t.Fatalf("logs:\n%s", logs.String())
		}
	})
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
