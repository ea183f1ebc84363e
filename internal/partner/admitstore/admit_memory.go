package admitstore

import (
	"context"
	"fmt"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/partner"

	"github.com/cespare/xxhash/v2"
)

// appState is everything Admit keeps for one app, under its shard's lock,
// which is what makes check-and-record atomic.
type appState struct {
	nonces map[nonceKey]int64 // nonce → expiry tick
	window int64              // the window last used, so the sweep can prune idle apps
	times  ring               // tick of every counted admission still in the window, oldest first
}

func (s *memoryStore) Admit(ctx context.Context, r partner.AdmitRequest) (partner.Admission, error) {
	if err := r.Validate(); err != nil {
		return partner.Admission{}, err
	}
	if err := s.check(ctx); err != nil {
		return partner.Admission{}, err
	}
	if start := s.replayStart(); !r.SignedAt.IsZero() && r.SignedAt.Before(start) {
		return partner.Admission{BeforeStart: true, Start: start}, nil
	}
	a, full, err := s.admit(r)
	if full {
		// Expired entries wait for the sweep; take them out now (at most
		// once a second) before refusing.
		s.reclaim()
		if a, full, err = s.admit(r); full {
			s.refuseFull()
			return partner.Admission{}, partner.ErrNonceMemoryFull
		}
	}
	return a, err
}

// admit is Admit under the app's shard lock; full reports a new nonce that
// the bounded replay memory has no room for (nothing was recorded).
func (s *memoryStore) admit(r partner.AdmitRequest) (a partner.Admission, full bool, err error) {
	a = partner.Admission{Limit: r.Limit}
	sh := s.shard(r.App)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Checked again under the lock: Close saves each shard under its lock
	// after setting closed, so nothing is recorded after its shard was saved.
	if s.closed.Load() {
		return partner.Admission{}, false, fmt.Errorf("%w: admission memory store is closed", errs.Unavailable)
	}
	// The tick is read under the lock so each app's ring stays in time order.
	now := s.tick()
	st := sh.apps[r.App]
	nk := s.nonceKey(r.Nonce)
	stale := false
	if st != nil {
		exp, ok := st.nonces[nk]
		if ok && now < exp {
			a.DuplicateNonce = true
			return a, false, nil
		}
		stale = ok
	}
	if !r.Verified {
		return a, false, nil
	}
	// A new entry takes a place in the bounded memory; an expired one of
	// the same nonce is reused.
	if !stale && !s.takePlace() {
		return partner.Admission{}, true, nil
	}
	if st == nil {
		st = &appState{nonces: make(map[nonceKey]int64)}
		sh.apps[r.App] = st
	}
	st.nonces[nk] = now + int64(r.NonceTTL)
	window := int64(r.Window)
	st.window = window
	st.times.dropUpTo(now - window)
	if n := st.times.len(); n >= r.Limit {
		// Normally n == Limit and this is the oldest entry; after the limit
		// was lowered it is the one whose departure brings n below Limit.
		a.Limited = true
		a.RetryAfter = time.Duration(st.times.at(n-r.Limit) + window - now)
		return a, false, nil
	}
	st.times.push(now, r.Limit)
	a.Remaining = r.Limit - st.times.len()
	return a, false, nil
}

// nonceKey stands for a nonce in an app's set: 64 bits of a hash keyed
// with this process's random seed (xxHash64 seeded with a secret; the seed
// is saved with the nonces at a graceful stop, so that the next process
// finds them: nonces.go). Every nonce is remembered for at least
// five minutes, so the set holds every request of the last five minutes:
// as strings, each cost a separate allocation (about 67 heap bytes per
// nonce all told) that the garbage collector scanned on every cycle; as
// one 64-bit hash, about 24 that it never scans.
// The same nonce always has the same key, so a replay is never missed.
// Two different nonces of one app share a key with a chance of 2⁻⁶⁴ per
// pair: with a million nonces remembered (over 3 000 requests a second
// for five minutes), a fresh nonce is taken for a used one with a chance
// of about 5·10⁻¹⁴, and the partner, refused with "nonce already used",
// signs again with a new one. The seed is secret, so a partner cannot aim
// for a collision (which would only refuse its own request).
type nonceKey uint64

func (s *memoryStore) nonceKey(nonce string) nonceKey {
	var d xxhash.Digest
	d.ResetWithSeed(s.nonceSeed)
	_, _ = d.WriteString(nonce)
	return nonceKey(d.Sum64())
}

// ring is a FIFO of ticks in time order. It grows on demand up to the
// app's limit and never beyond, because a full window refuses (and does not
// record) further requests.
type ring struct {
	buf  []int64
	head int
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) int64 { return r.buf[(r.head+i)%len(r.buf)] }

// dropUpTo removes the entries at or before cutoff: they left the window.
func (r *ring) dropUpTo(cutoff int64) {
	for r.n > 0 && r.buf[r.head] <= cutoff {
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
	if r.n == 0 {
		r.head = 0
	}
}

// push appends v; the caller guarantees r.len() < limit.
func (r *ring) push(v int64, limit int) {
	if r.n == len(r.buf) {
		size := min(max(2*len(r.buf), 8), limit)
		buf := make([]int64, size)
		for i := range r.n {
			buf[i] = r.at(i)
		}
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}
