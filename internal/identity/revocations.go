package identity

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent"
	"gatehouse/ent/tokenrevocation"
	"gatehouse/internal/store"
)

// RevocationChannel is the Postgres channel on which a replica announces
// a new revocation row: the others read it at once instead of at their
// next poll.
const RevocationChannel = "gatehouse_token_revocations"

// Defaults of Revocations.
const (
	// DefaultRevocationPoll is how often a replica on Postgres reads the
	// revocations it has not seen, whether or not a NOTIFY woke it: the
	// backstop when notifications are lost (a LISTEN connection being
	// re-established, a transaction pooler in between).
	DefaultRevocationPoll = 500 * time.Millisecond
	// DefaultRevocationGapWait is how long an id skipped by the poll (a
	// revocation whose transaction had not committed yet, or one that
	// rolled back) is looked for again. It must outlast the longest
	// transaction that inserts a revocation.
	DefaultRevocationGapWait = time.Minute
	// RevocationPruneEvery is the pause between deletions of revocations
	// that can no longer concern a valid token.
	RevocationPruneEvery = 10 * time.Minute
)

const (
	kindJTI  = tokenrevocation.KindJti
	kindUser = tokenrevocation.KindUser
	// syncPage bounds the rows read by one query of a sync.
	syncPage = 1000
	// maxGaps bounds the skipped ids a replica keeps looking for.
	maxGaps = 1000
)

var (
	mirrorGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_token_revocations",
		Help: "Revocations of signed user tokens in this process's mirror of the database: logged-out tokens (kind=jti) and users whose earlier tokens are refused (kind=user).",
	}, []string{"kind"})
	syncedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_token_revocations_synced_seconds",
		Help: "Unix time of the last successful read of new token revocations from the database (Postgres: every 500 ms and at each NOTIFY; embedded: at start).",
	})
)

func init() { prometheus.MustRegister(mirrorGauge, syncedGauge) }

// Revocations is the durable record of refused signed tokens — logged-out
// tokens (by jti) and users whose earlier tokens are all refused (a
// disable, a new password) — and this process's in-memory mirror of it.
//
// The database is the source of truth: a revocation is inserted (and, for
// a user, in the transaction that disables them) before the request that
// makes it is answered, so it survives any restart and the loss of Redis.
// Token checks read the mirror only (a map lookup, no I/O). The mirror is
// loaded at start; this process adds its own revocations to it as they
// commit; on Postgres, Run keeps it up to date with the other replicas'
// (a NOTIFY wakes it at their commit, a poll every 500 ms is the
// backstop). Rows are only inserted, so the poll follows them by id, and
// looks again for ids it skipped (a transaction that took its id before a
// later one committed). Rows whose tokens have all expired are pruned.
type Revocations struct {
	client   *ent.Client
	dialect  string
	db       *store.DB
	log      *slog.Logger
	now      func() time.Time
	poll     time.Duration
	gapWait  time.Duration
	lastSync atomic.Int64 // unix ms of the last successful sync (Postgres)

	mu    sync.RWMutex
	jtis  map[string]int64    // jti → unix ms when the token expires
	users map[int]revokedUser // user id → latest revocation

	syncMu sync.Mutex // one sync at a time; guards cursor and gaps
	cursor int
	gaps   map[int]time.Time // skipped id → when it was first skipped

	wake chan struct{}
}

// revokedUser: tokens of the user issued at or before at (unix ms), or
// carrying a security version below version, are refused; exp (unix ms)
// is when the last of them expires.
type revokedUser struct {
	at, exp int64
	version int
}

// RevocationsOption configures Revocations.
type RevocationsOption func(*Revocations)

// WithRevocationClock replaces the clock (tests).
func WithRevocationClock(now func() time.Time) RevocationsOption {
	return func(r *Revocations) { r.now = now }
}

// WithRevocationPoll sets the poll interval and how long skipped ids are
// looked for (zero keeps a default).
func WithRevocationPoll(poll, gapWait time.Duration) RevocationsOption {
	return func(r *Revocations) {
		if poll > 0 {
			r.poll = poll
		}
		if gapWait > 0 {
			r.gapWait = gapWait
		}
	}
}

// NewRevocations returns the revocations of db with an empty mirror: call
// Load before checking tokens.
func NewRevocations(db *store.DB, log *slog.Logger, opts ...RevocationsOption) *Revocations {
	r := &Revocations{
		client:  db.Client,
		dialect: db.Dialect,
		db:      db,
		log:     log,
		now:     time.Now,
		poll:    DefaultRevocationPoll,
		gapWait: DefaultRevocationGapWait,
		jtis:    make(map[string]int64),
		users:   make(map[int]revokedUser),
		gaps:    make(map[int]time.Time),
		wake:    make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Load reads every revocation into the mirror. Start-up calls it before
// serving: a process that cannot read them must not accept tokens.
func (r *Revocations) Load(ctx context.Context) error {
	return r.sync(ctx)
}

// Run keeps the mirror up to date (Postgres: LISTEN and the poll) and
// prunes expired revocations (both backends), until ctx ends.
func (r *Revocations) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var poll <-chan time.Time
	if r.dialect == dialect.Postgres {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.db.Listen(ctx, RevocationChannel, r.notified, r.log)
		}()
		t := time.NewTicker(r.poll)
		defer t.Stop()
		poll = t.C
	}
	prune := time.NewTimer(0)
	defer prune.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			if n, err := r.Prune(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("prune expired token revocations", "err", err)
			} else if n > 0 {
				r.log.Debug("pruned expired token revocations", "rows", n)
			}
			prune.Reset(RevocationPruneEvery)
			continue
		case <-poll:
		case <-r.wake:
		}
		err := r.sync(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			r.log.Warn("token revocations: cannot read new revocations; retrying every poll (Redis still carries them meanwhile)", "err", err)
		case err == nil && failing:
			failing = false
			r.log.Info("token revocations: reading new revocations again")
		}
	}
}

// notified is called for every NOTIFY on RevocationChannel (and after
// each LISTEN (re)connection).
func (r *Revocations) notified() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// LastSync is when the mirror last read the database successfully (the
// zero time before Load).
func (r *Revocations) LastSync() time.Time {
	ms := r.lastSync.Load()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// sync reads the rows this process has not seen: ids past the cursor, and
// ids it skipped that may have committed since.
func (r *Revocations) sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	now := r.now()
	for id, first := range r.gaps {
		if now.Sub(first) > r.gapWait {
			delete(r.gaps, id)
		}
	}
	for {
		pred := tokenrevocation.IDGT(r.cursor)
		if len(r.gaps) > 0 {
			ids := make([]int, 0, len(r.gaps))
			for id := range r.gaps {
				ids = append(ids, id)
			}
			pred = tokenrevocation.Or(pred, tokenrevocation.IDIn(ids...))
		}
		rows, err := r.client.TokenRevocation.Query().Where(pred).
			Order(ent.Asc(tokenrevocation.FieldID)).Limit(syncPage).All(ctx)
		if err != nil {
			return fmt.Errorf("identity: read token revocations: %w", err)
		}
		for _, row := range rows {
			delete(r.gaps, row.ID)
			if row.ID > r.cursor {
				for id := max(r.cursor+1, row.ID-maxGaps); id < row.ID && len(r.gaps) < maxGaps; id++ {
					r.gaps[id] = now
				}
				r.cursor = row.ID
			}
			r.apply(row.Kind, row.Subject, row.RevokedAt, row.ExpiresAt, row.Version)
		}
		if len(rows) < syncPage {
			ms := r.now().UnixMilli()
			r.lastSync.Store(ms)
			syncedGauge.Set(float64(ms) / 1000)
			return nil
		}
	}
}

// apply adds one revocation to the mirror (idempotent): for a user, the
// latest instant and the highest version it has seen.
func (r *Revocations) apply(kind tokenrevocation.Kind, subject string, at, exp time.Time, version int) {
	expMS := exp.UnixMilli()
	if expMS <= r.now().UnixMilli() {
		return // every token it concerns has expired
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case kindJTI:
		if expMS > r.jtis[subject] {
			r.jtis[subject] = expMS
		}
	case kindUser:
		id, err := strconv.Atoi(subject)
		if err != nil {
			return
		}
		cur := r.users[id]
		r.users[id] = revokedUser{at: max(cur.at, at.UnixMilli()), exp: max(cur.exp, expMS), version: max(cur.version, version)}
	}
	r.gauge()
}

// gauge shows the mirror's size; r.mu is held.
func (r *Revocations) gauge() {
	mirrorGauge.WithLabelValues(string(kindJTI)).Set(float64(len(r.jtis)))
	mirrorGauge.WithLabelValues(string(kindUser)).Set(float64(len(r.users)))
}

// jtiRevoked reports whether the token with that jti was logged out.
func (r *Revocations) jtiRevoked(jti string) bool {
	r.mu.RLock()
	_, ok := r.jtis[jti]
	r.mu.RUnlock()
	return ok
}

// userRevocation returns what the revocations of user id refuse, if any.
func (r *Revocations) userRevocation(id int) (userRevocation, bool) {
	r.mu.RLock()
	u, ok := r.users[id]
	r.mu.RUnlock()
	return userRevocation{at: u.at, version: u.version}, ok
}

// Len returns how many logged-out tokens and revoked users the mirror holds.
func (r *Revocations) Len() (jtis, users int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.jtis), len(r.users)
}

// insert stores one revocation through tx (nil: the client, committed at
// once) and announces it to the other replicas (inside tx, the NOTIFY is
// delivered at the commit). The caller applies it to the mirror once it
// is committed.
func (r *Revocations) insert(ctx context.Context, tx *ent.Tx, kind tokenrevocation.Kind, subject string, at, exp time.Time, version int) error {
	var err error
	if tx != nil {
		_, err = tx.TokenRevocation.Create().SetKind(kind).SetSubject(subject).SetRevokedAt(at).SetExpiresAt(exp).SetVersion(version).Save(ctx)
		if err == nil {
			err = store.Notify(ctx, tx, r.dialect, RevocationChannel)
		}
	} else {
		_, err = r.client.TokenRevocation.Create().SetKind(kind).SetSubject(subject).SetRevokedAt(at).SetExpiresAt(exp).SetVersion(version).Save(ctx)
		if err == nil {
			if nerr := store.Notify(ctx, r.client, r.dialect, RevocationChannel); nerr != nil {
				// Stored: the other replicas find it at their next poll.
				r.log.Warn("token revocations: NOTIFY failed; other replicas read the revocation at their next poll", "err", nerr)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("identity: store the %s revocation: %w", kind, err)
	}
	return nil
}

// Prune deletes the revocations whose tokens have all expired, and drops
// them from the mirror. It returns how many rows went.
func (r *Revocations) Prune(ctx context.Context) (int, error) {
	now := r.now()
	nowMS := now.UnixMilli()
	r.mu.Lock()
	for k, exp := range r.jtis {
		if exp <= nowMS {
			delete(r.jtis, k)
		}
	}
	for k, u := range r.users {
		if u.exp <= nowMS {
			delete(r.users, k)
		}
	}
	r.gauge()
	r.mu.Unlock()
	n, err := r.client.TokenRevocation.Delete().Where(tokenrevocation.ExpiresAtLT(now)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("identity: prune token revocations: %w", err)
	}
	return n, nil
}
