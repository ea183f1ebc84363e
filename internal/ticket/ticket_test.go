package ticket_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"gatehouse/internal/errs"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/ticket"
)

func openService(t *testing.T, b testenv.Backend) *ticket.Service {
	t.Helper()
	return ticket.NewService(storetest.Open(t, b).Client)
}

func TestNormalizeTitle(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"  hello  ", "hello", true},
		{"\u3000wide space\u3000", "wide space", true},
		{strings.Repeat("a", 200), strings.Repeat("a", 200), true},
		{strings.Repeat("字", 200), strings.Repeat("字", 200), true},
		{strings.Repeat("a", 201), "", false},
		{"", "", false},
		{" \t\n ", "", false},
		{"tab\tinside", "", false},
		{"nul\x00", "", false},
		{"del\x7f", "", false},
		{"c1\u0080", "", false},
		{"bad utf8 \xff", "", false},
	}
	for _, c := range cases {
		got, err := ticket.NormalizeTitle(c.in)
		if c.ok != (err == nil) || (err != nil && errs.KindOf(err) != errs.Validation) || got != c.want {
			t.Errorf("NormalizeTitle(%q) = %q, %v", c.in, got, err)
		}
	}
}

func TestTransitions(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := openService(t, b)
		moves := []struct {
			from, to ticket.Status
			ok       bool
		}{
			{ticket.Open, ticket.Doing, true},
			{ticket.Open, ticket.Done, false},
			{ticket.Open, ticket.Open, false},
			{ticket.Doing, ticket.Done, true},
			{ticket.Doing, ticket.Open, false},
			{ticket.Doing, ticket.Doing, false},
			{ticket.Done, ticket.Open, false},
			{ticket.Done, ticket.Doing, false},
			{ticket.Done, ticket.Done, false},
		}
		for _, m := range moves {
			tk, err := s.Create(ctx, "m")
			if err != nil {
				t.Fatal(err)
			}
			// Walk the ticket to m.from along the allowed path.
			for _, step := range map[ticket.Status][]ticket.Status{ticket.Open: nil, ticket.Doing: {ticket.Doing}, ticket.Done: {ticket.Doing, ticket.Done}}[m.from] {
				if _, err := s.ChangeStatus(ctx, tk.ID, step); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.ChangeStatus(ctx, tk.ID, m.to)
			if m.ok && (err != nil || got.Status != m.to) {
				t.Errorf("%s→%s: %v %v", m.from, m.to, got, err)
			}
			if !m.ok {
				if !errors.Is(err, ticket.ErrInvalidTransition) {
					t.Errorf("%s→%s: err %v, want ErrInvalidTransition", m.from, m.to, err)
				}
				if cur, _ := s.Get(ctx, tk.ID); cur.Status != m.from {
					t.Errorf("%s→%s rejected but status is now %s", m.from, m.to, cur.Status)
				}
			}
		}
		if _, err := s.ChangeStatus(ctx, 424242, ticket.Doing); !errors.Is(err, ticket.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		if _, err := s.ChangeStatus(ctx, 424242, ticket.Open); !errors.Is(err, ticket.ErrNotFound) {
			t.Fatalf("unknown id, forbidden move: %v", err)
		}
		if _, err := s.ChangeStatus(ctx, 1, "CLOSED"); errs.KindOf(err) != errs.Validation {
			t.Fatalf("unknown status: %v", err)
		}
	})
}

func TestConcurrentCompareAndSet(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := openService(t, b)
		tk, err := s.Create(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.ChangeStatus(ctx, tk.ID, ticket.Doing)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ticket.ErrInvalidTransition):
					conflicts++
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != 15 {
			t.Fatalf("wins %d conflicts %d", wins, conflicts)
		}
	})
}
