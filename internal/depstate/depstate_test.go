package depstate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"gatehouse/internal/depstate"
	"gatehouse/internal/errs"
)

// lines is the log's lines at level (e.g. "level=ERROR").
func lines(buf *bytes.Buffer, level string) []string {
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, level) {
			out = append(out, l)
		}
	}
	return out
}

// TestStateChangesLoggedOnce: a state is logged at ERROR when it changes
// and only then (a first ok is not a change worth an ERROR); the line
// names the dependency, the new and the former state.
func TestStateChangesLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	tr := depstate.New(slog.New(slog.NewTextHandler(&buf, nil)))
	ctx := context.Background()
	down := errors.New("dial tcp: connection refused")
	for _, s := range []depstate.State{depstate.OK, depstate.OK, depstate.Unavailable, depstate.Unavailable, depstate.Unavailable, depstate.Degraded, depstate.OK, depstate.OK} {
		tr.Set(ctx, errs.KV, s, "", down)
	}
	got := lines(&buf, "level=ERROR")
	want := []string{"state=unavailable was=ok", "state=degraded was=unavailable", "state=ok was=degraded"}
	if len(got) != len(want) {
		t.Fatalf("%d ERROR lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(got[i], "dependency=kv") || !strings.Contains(got[i], w) {
			t.Errorf("line %d: %s, want %s", i, got[i], w)
		}
	}
	if tr.State(errs.KV) != depstate.OK || tr.State(errs.Database) != "" {
		t.Fatalf("states: kv %q, database %q", tr.State(errs.KV), tr.State(errs.Database))
	}
}

// TestRefusalsSummed: refused requests write nothing themselves; Flush
// writes one WARN line with the counts per dependency since the last
// Flush, and nothing when there were none. A refusal on a dependency
// believed ok asks for a check; one on a dependency known down does not.
func TestRefusalsSummed(t *testing.T) {
	var buf bytes.Buffer
	tr := depstate.New(slog.New(slog.NewTextHandler(&buf, nil)))
	var suspected atomic.Int64
	tr.OnSuspect(func() { suspected.Add(1) })
	ctx := context.Background()
	tr.Set(ctx, errs.KV, depstate.OK, "", nil)
	tr.Set(ctx, errs.Database, depstate.Unavailable, "", nil)
	kvErr := errors.New("kv down")
	for range 500 {
		tr.Refused(errs.KV, kvErr)
	}
	for range 20 {
		tr.Refused(errs.Database, errors.New("db down"))
	}
	tr.Refused("", errors.New("no dependency named"))
	if n := len(strings.Split(strings.TrimSpace(buf.String()), "\n")); n != 1 { // the database's change
		t.Fatalf("refusals were logged one by one:\n%s", buf.String())
	}
	if suspected.Load() != 501 {
		t.Fatalf("%d checks asked for, want 501 (the kv store and the unnamed one were believed ok; the database known down)", suspected.Load())
	}
	tr.Flush(ctx)
	tr.Flush(ctx)
	got := lines(&buf, "level=WARN")
	if len(got) != 1 {
		t.Fatalf("%d summary lines after two flushes, want 1:\n%s", len(got), buf.String())
	}
	for _, w := range []string{"refused_database=20", "refused_kv=500", "refused_other=1", "refused=521"} {
		if !strings.Contains(got[0], w) {
			t.Errorf("summary %s lacks %s", got[0], w)
		}
	}
}
