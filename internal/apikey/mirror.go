package apikey

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
	"gatehouse/internal/combine"
	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

// Keys are checked on every admin request, and the key rows change
// rarely: a replica keeps the rows it has read in memory (Mirror) and
// reads the database again only for a key it has not seen since the last
// change. A change must be refused by every replica from the next request
// on, as the revocations of user tokens are (internal/identity), so it
// travels the same three ways:
//
//   - the database: the key row itself is the record (a restart reads it);
//   - the shared store: after the change commits, its replica writes a new
//     change mark (ChangeMarkKey) before answering. Every check reads the
//     mark first (one Redis GET, or a map lookup in memory) and drops the
//     mirror when it differs from the one the mirror was filled under, so
//     the request after a change reads the changed row on every replica
//     sharing Redis. A mark that cannot be read sends the check to the
//     database (and the mirror is filled anew once it can);
//   - Postgres NOTIFY (ChangeChannel, sent in the change's transaction):
//     each replica's Run drops its mirror at the commit, which covers a
//     mark written to a Redis that then lost it.
//
// On the embedded database the replicas are the services of one process
// (the data directory is locked to it), so the mark lives in the process,
// one per database file. A mirror is also dropped every MirrorRefresh, for
// rows changed by hand in the database.

// ChangeMarkKey is the shared store's key of the API keys' change mark.
const ChangeMarkKey = "apikey:changed"

// ChangeChannel is the Postgres channel on which a replica announces a
// change of a key (disabled, enabled, role or scopes changed).
const ChangeChannel = "gatehouse_api_keys"

// MirrorRefresh is how often a mirror is dropped whatever the marks say:
// for changes made outside the service (by hand, in the database).
const MirrorRefresh = time.Minute

// maxMirrored bounds the rows a mirror keeps; past it, keys are read from
// the database until the next change.
const maxMirrored = 10000

// unknownMark is the mirror's mark before it has read one, and after a
// read failed: it equals no mark the store holds.
const unknownMark = "\x00unknown"

// Mirror is this process's copy of the key rows it has checked, valid
// until the next change (see the package's notes above). It is safe for
// concurrent use.
type Mirror struct {
	client *ent.Client
	db     *store.DB
	log    *slog.Logger
	marks  marks

	mu     sync.Mutex
	mark   string // the change mark rows were read under
	gen    uint64 // counts the times the mirror was dropped
	byHash map[string]*ent.APIKey
}

// marks reads and writes the change mark.
type marks interface {
	read(ctx context.Context) (string, error)
	bump(ctx context.Context) error
}

// NewMirror returns an empty mirror of db's keys whose change mark lives
// in shared (Postgres), or in this process (the embedded database).
func NewMirror(ctx context.Context, db *store.DB, shared kv.Store, log *slog.Logger) (*Mirror, error) {
	m := &Mirror{client: db.Client, db: db, log: log, mark: unknownMark, byHash: make(map[string]*ent.APIKey)}
	if db.Dialect == dialect.Postgres {
		m.marks = newSharedMarks(shared)
		return m, nil
	}
	file, err := sqliteFile(ctx, db)
	if err != nil {
		return nil, err
	}
	m.marks = processMarks(file)
	return m, nil
}

// Run keeps the mirror honest until ctx ends: on Postgres it drops it at
// every NOTIFY of a change (and when the LISTEN connection comes back),
// and on both backends every MirrorRefresh.
func (m *Mirror) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { m.db.Listen(ctx, ChangeChannel, m.drop, m.log) })
	t := time.NewTicker(MirrorRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.drop()
		}
	}
}

// drop forgets every row; the next checks read them again.
func (m *Mirror) drop() {
	m.mu.Lock()
	m.gen++
	clear(m.byHash)
	m.mu.Unlock()
}

// lookup returns the row of the key whose hash is hash (nil when there is
// none): from the mirror when no change was marked since it was read,
// else from the database.
func (m *Mirror) lookup(ctx context.Context, hash string) (*ent.APIKey, error) {
	mark, err := m.marks.read(ctx)
	if err != nil {
		// Whether a key changed is unknown: ask the record, and fill the
		// mirror anew once the mark can be read again.
		m.mu.Lock()
		m.mark = unknownMark
		m.gen++
		clear(m.byHash)
		m.mu.Unlock()
		m.log.DebugContext(ctx, "API keys: the change mark cannot be read; checking the key in the database", "err", err)
		return readKey(ctx, m.client, hash)
	}
	m.mu.Lock()
	if mark != m.mark {
		m.mark = mark
		m.gen++
		clear(m.byHash)
	}
	gen := m.gen
	row, ok := m.byHash[hash]
	m.mu.Unlock()
	if ok {
		return row, nil
	}
	row, err = readKey(ctx, m.client, hash)
	if err != nil || row == nil {
		return row, err // unknown keys are not kept: one may be created on another replica
	}
	m.mu.Lock()
	// Kept only when nothing changed since the mark was read: a row read
	// then is at least as new as the change the mark announced.
	if m.gen == gen && len(m.byHash) < maxMirrored {
		m.byHash[hash] = row
	}
	m.mu.Unlock()
	return row, nil
}

// changed announces a committed change of a key: this mirror drops its
// rows and a new mark tells the other replicas' mirrors to. A mark that
// cannot be written is logged: the change is stored, and the NOTIFY sent
// at its commit drops the other mirrors (Postgres).
func (m *Mirror) changed(ctx context.Context) {
	m.drop()
	if err := m.marks.bump(ctx); err != nil {
		m.log.WarnContext(ctx, "API keys: a key changed, but the change mark could not be written; other replicas learn of it from the database's notification", "err", err)
	}
}

// readKey reads the row of the key whose hash is hash, nil when there is
// none.
func readKey(ctx context.Context, client *ent.Client, hash string) (*ent.APIKey, error) {
	row, err := client.APIKey.Query().Where(entapikey.KeyHash(hash)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	return row, nil
}

// sharedMarks keeps the mark in the shared store: any change writes a new
// random one. Concurrent checks share their reads the way deductions
// share their statements (internal/combine): a check that finds no read
// in flight reads at once; those that arrive meanwhile wait for it and
// share the next read, which starts after they arrived, so none of them
// can miss a mark written before it began.
type sharedMarks struct {
	kv    kv.Store
	reads *combine.Combiner[*markRead]
	// downUntil (UnixNano) is when the mark may be read again after a
	// read failed: until then read fails at once (MarkRetryAfter).
	downUntil atomic.Int64
	downErr   atomic.Pointer[error]
}

// MarkRetryAfter is how long after a failed read of the change mark the
// checks skip it and go straight to the database. A read of a key whose
// Redis master is lost fails only after the client's timeout (some 100
// ms); without this every admin request would wait that long for the
// whole outage, where the database answers in a millisecond. A variable
// for the tests.
var MarkRetryAfter = time.Second

// markRead is one check waiting for the mark.
type markRead struct {
	ctx  context.Context
	mark string
	err  error
}

func markContext(r *markRead) context.Context { return r.ctx }

func newSharedMarks(shared kv.Store) *sharedMarks {
	s := &sharedMarks{kv: shared}
	s.reads = combine.New(func(batch []*markRead) {
		ctx, cancel := combine.BatchContext(batch, markContext)
		defer cancel()
		if len(batch) == 1 {
			ctx = batch[0].ctx
		}
		v, _, err := s.kv.Get(ctx, ChangeMarkKey)
		for _, r := range batch {
			// A missing mark ("") is a mark too: a flushed store drops
			// every mirror once.
			r.mark, r.err = string(v), err
		}
	}, combine.Options[*markRead]{
		Max:     1024,
		Context: markContext,
		Abandon: func(r *markRead, err error) { r.err = err },
	})
	return s
}

func (s *sharedMarks) read(ctx context.Context) (string, error) {
	if time.Now().UnixNano() < s.downUntil.Load() {
		if err := s.downErr.Load(); err != nil {
			return "", *err
		}
	}
	r := &markRead{ctx: ctx}
	s.reads.Do(r)
	if r.err != nil && ctx.Err() == nil {
		// The store failed, not this request: skip it for a moment.
		err := r.err
		s.downErr.Store(&err)
		s.downUntil.Store(time.Now().Add(MarkRetryAfter).UnixNano())
	}
	return r.mark, r.err
}

func (s *sharedMarks) bump(ctx context.Context) error {
	return s.kv.Set(ctx, ChangeMarkKey, []byte(secret.RandomToken("", 12)), 0)
}

// localMarks is the mark of one embedded database file, shared by every
// mirror of this process on it.
type localMarks struct{ n atomic.Uint64 }

func (l *localMarks) read(context.Context) (string, error) {
	return strconv.FormatUint(l.n.Load(), 10), nil
}

func (l *localMarks) bump(context.Context) error {
	l.n.Add(1)
	return nil
}

var fileMarks sync.Map // database file → *localMarks

func processMarks(file string) *localMarks {
	v, _ := fileMarks.LoadOrStore(file, &localMarks{})
	return v.(*localMarks)
}

// sqliteFile names the file of db's main database.
func sqliteFile(ctx context.Context, db *store.DB) (string, error) {
	rows, err := db.SQL.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return "", fmt.Errorf("API keys: name the database file: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if err := rows.Scan(&seq, &name, &file); err != nil {
			return "", fmt.Errorf("API keys: name the database file: %w", err)
		}
		if name == "main" {
			return file, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("API keys: name the database file: %w", err)
	}
	return "", fmt.Errorf("API keys: the database has no main file")
}
