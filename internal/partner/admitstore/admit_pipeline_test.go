package admitstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// pipelineCase runs 40 Admits that queue behind a held first one (app z)
// and checks that they were sent as one batch with exact outcomes: app a,
// limit 10, 20 fresh nonces → 10 admitted, 10 limited; app b, one nonce 10
// times → 1 admitted, 9 duplicates; app c, 10 unverified → nothing recorded.
// during runs just before the batch of 40 is sent.
func pipelineCase(t *testing.T, during func(s *redisStore)) {
	s := open(t, &backend{URL: testenv.RedisURL(t), Prefix: testenv.KeyPrefix(t)}, "").(*redisStore)
	for _, app := range []string{"a", "b", "c", "z"} {
		primeEpoch(t, s, app)
	}
	var (
		mu    sync.Mutex
		sizes []int
	)
	const queued = 40
	s.onAdmitBatch = func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		first := len(sizes) == 1
		mu.Unlock()
		if !first {
			during(s)
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		for s.admits.Queued() < queued {
			if time.Now().After(deadline) {
				t.Errorf("%d Admits queued, want %d", s.admits.Queued(), queued)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	base := AdmitRequest{NonceTTL: time.Minute, Verified: true, Limit: 10, Window: time.Minute}
	var reqs []AdmitRequest
	for i := range 20 {
		r := base
		r.App, r.Nonce = "a", fmt.Sprint("a", i)
		reqs = append(reqs, r)
	}
	for range 10 {
		r := base
		r.App, r.Nonce = "b", "same"
		reqs = append(reqs, r)
	}
	for i := range 10 {
		r := base
		r.App, r.Nonce, r.Verified = "c", fmt.Sprint("c", i), false
		reqs = append(reqs, r)
	}

	held := make(chan struct{})
	go func() {
		defer close(held)
		r := base
		r.App, r.Nonce = "z", "first"
		if _, err := s.Admit(context.Background(), r); err != nil {
			t.Errorf("held Admit: %v", err)
		}
	}()
	for s.admits.Queued() == 0 && len(sizesOf(&mu, &sizes)) == 0 {
		time.Sleep(time.Millisecond) // the first Admit is running
	}
	got := make([]Admission, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			a, err := s.Admit(context.Background(), r)
			if err != nil {
				t.Errorf("Admit %s/%s: %v", r.App, r.Nonce, err)
			}
			got[i] = a
		})
	}
	wg.Wait()
	<-held

	if sz := sizesOf(&mu, &sizes); !slices.Equal(sz, []int{1, queued}) {
		t.Fatalf("batches of %v, want [1 %d]", sz, queued)
	}
	count := func(app string, f func(Admission) bool) int {
		n := 0
		for i, r := range reqs {
			if r.App == app && f(got[i]) {
				n++
			}
		}
		return n
	}
	admitted := func(a Admission) bool { return !a.DuplicateNonce && !a.Limited }
	if n, l := count("a", admitted), count("a", func(a Admission) bool { return a.Limited }); n != 10 || l != 10 {
		t.Errorf("app a: %d admitted, %d limited; want 10 and 10", n, l)
	}
	if n, d := count("b", admitted), count("b", func(a Admission) bool { return a.DuplicateNonce }); n != 1 || d != 9 {
		t.Errorf("app b: %d admitted, %d duplicates; want 1 and 9", n, d)
	}
	if n := count("c", admitted); n != 10 {
		t.Errorf("app c (unverified): %d answered as new, want 10", n)
	}
	for app, want := range map[string]int{"a": 10, "b": 1, "c": 0, "z": 1} {
		if n := liveCount(t, s, app, time.Minute); n != want {
			t.Errorf("app %s: %d counted in the window, want %d", app, n, want)
		}
	}
}

func sizesOf(mu *sync.Mutex, sizes *[]int) []int {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(*sizes)
}

// Admits that arrive while one is on its way to Redis go together in one
// pipeline, each with the outcome it would have had alone.
func TestAdmitPipelinesQueuedCalls(t *testing.T) {
	t.Parallel()
	pipelineCase(t, func(*redisStore) {})
}

// A pipeline sent after Redis lost its scripts (restart, SCRIPT FLUSH):
// every Admit of it still gets its outcome (loaded again with EVAL).
func TestAdmitPipelineAfterScriptFlush(t *testing.T) {
	t.Parallel()
	pipelineCase(t, func(s *redisStore) {
		if err := s.c.ScriptFlush(context.Background()).Err(); err != nil {
			t.Errorf("SCRIPT FLUSH: %v", err)
		}
	})
}

// TestAdmitManyMatchesOneByOne: a pipeline's calls of one app run in one
// script (admitManyScript); their outcomes are those of the same calls run
// one by one with admitScript, in the same order: duplicates (also within
// the batch), unverified probes, the limit reached before and inside the
// batch, the remaining count. Retry-after is checked on its own (the one by
// one calls read the clock each).
func TestAdmitManyMatchesOneByOne(t *testing.T) {
	url := testenv.RedisURL(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 30 {
		prefix := testenv.KeyPrefix(t) + fmt.Sprint(round, ":")
		many := open(t, &backend{URL: url, Prefix: prefix + "many:"}, "").(*redisStore)
		one := open(t, &backend{URL: url, Prefix: prefix + "one:"}, "").(*redisStore)
		primeEpoch(t, many, "app")
		primeEpoch(t, one, "app")
		limit := 1 + rng.IntN(6)
		// Some admissions already in the window, on both; in some rounds
		// under a higher limit, lowered since.
		earlier := limit
		if rng.IntN(3) == 0 {
			earlier += 1 + rng.IntN(4)
		}
		inWindow := 0 // entries in many's window before the batch
		for i := range rng.IntN(earlier + 2) {
			r := AdmitRequest{App: "app", Nonce: fmt.Sprint("pre", i), NonceTTL: time.Minute, Verified: true, Limit: earlier, Window: time.Minute}
			for _, s := range []*redisStore{many, one} {
				a, err := s.Admit(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				if s == many && !a.Limited {
					inWindow++
				}
			}
		}
		var batch, alone []*admitCall
		for range 2 + rng.IntN(12) {
			r := AdmitRequest{App: "app", Nonce: fmt.Sprint("n", rng.IntN(6)), NonceTTL: time.Minute, Verified: rng.IntN(4) > 0, Limit: limit, Window: time.Minute}
			if rng.IntN(5) == 0 {
				r.Nonce = fmt.Sprint("pre", rng.IntN(3))
			}
			batch = append(batch, many.newAdmitCall(context.Background(), r, "", ""))
			alone = append(alone, one.newAdmitCall(context.Background(), r, "", ""))
		}
		many.runAdmits(batch)
		for _, c := range alone {
			one.runAdmits([]*admitCall{c})
		}
		for i := range batch {
			b, a := batch[i], alone[i]
			if b.err != nil || a.err != nil {
				t.Fatalf("round %d call %d: %v / %v", round, i, b.err, a.err)
			}
			if !slices.Equal(b.res[:3], a.res[:3]) {
				t.Fatalf("round %d (limit %d) call %d (%v): in one script %v, one by one %v", round, limit, i, b.args, b.res, a.res)
			}
			if b.res[1] == 1 && (b.res[3] <= 0 || b.res[3] > time.Minute.Microseconds()) {
				t.Fatalf("round %d call %d: limited with retry-after %d µs", round, i, b.res[3])
			}
			// A refusal waits for the entry whose departure brings the count
			// below the limit: one made before the batch leaves sooner than
			// a whole window; one made by the batch itself, a whole window.
			admittedBefore := 0
			for _, p := range batch[:i] {
				if p.res[0] == 0 && p.res[1] == 0 && p.args[1] == "1" {
					admittedBefore++
				}
			}
			if b.res[1] == 1 {
				fromBefore := inWindow+admittedBefore-limit < inWindow
				if fromBefore != (b.res[3] < time.Minute.Microseconds()) {
					t.Fatalf("round %d call %d: retry-after %d µs; want less than the window: %v", round, i, b.res[3], fromBefore)
				}
			}
		}
	}
}

// TestAdmitManyRetryAfterInsideTheBatch: when the calls of one batch fill
// an empty window, the ones after the limit wait the whole window (the
// entries that fill it were made now).
func TestAdmitManyRetryAfterInsideTheBatch(t *testing.T) {
	s := open(t, &backend{URL: testenv.RedisURL(t), Prefix: testenv.KeyPrefix(t)}, "").(*redisStore)
	primeEpoch(t, s, "app")
	var batch []*admitCall
	for i := range 5 {
		batch = append(batch, s.newAdmitCall(context.Background(), AdmitRequest{App: "app", Nonce: fmt.Sprint(i), NonceTTL: time.Minute, Verified: true, Limit: 3, Window: time.Second}, "", ""))
	}
	s.runAdmits(batch)
	for i, c := range batch {
		want := []int64{0, 0, int64(2 - i), 0}
		if i >= 3 {
			want = []int64{0, 1, 0, time.Second.Microseconds()}
		}
		if c.err != nil || !slices.Equal(c.res, want) {
			t.Fatalf("call %d: %v %v, want %v", i, c.res, c.err, want)
		}
	}
}

// primeEpoch has Admit record app's epoch key (an unverified call records
// nothing else), so that calls run straight through runAdmits find it.
func primeEpoch(t *testing.T, s *redisStore, app string) {
	t.Helper()
	if _, err := s.Admit(context.Background(), AdmitRequest{App: app, Nonce: "prime", NonceTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
}
