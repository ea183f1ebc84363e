// Package phases holds the load phases of the harness: each starts what it
// measures (gatehouse, a floor), drives it, and records the figures with
// their ratio to a floor measured in the same run. The command's main
// decides which phases run and in what order.
package phases

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
	"gatehouse/cmd/gatehouse-bench/internal/report"
)

// bareName names the first baseline.
const bareName = "bare net/http JSON handler"

// Bare is the first baseline, the bare net/http JSON handler: its load
// sizes the other phases (enough pre-signed requests for its rate).
type Bare struct {
	Load    load.Result
	RSS     int64
	Startup time.Duration
}

// MeasureBare measures the bare net/http JSON handler and stops it.
func MeasureBare(ctx context.Context, o bench.Options, rep *report.Report, client *http.Client, self, tmp string) (Bare, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return Bare{}, err
	}
	bare, err := proc.Start(ctx, "baseline bare", self, []string{"baseline", "-mode", "bare", "-addr", addr}, nil, addr, tmp)
	if err != nil {
		return Bare{}, err
	}
	b := Bare{Load: load.Measure(ctx, o, client, load.Repeat(bare.Base+"/q?order_no="+gatehouse.OrderNo)), Startup: bare.Startup}
	b.RSS, _ = bare.PeakRSS()
	if err := bare.Stop(); err != nil {
		return Bare{}, err
	}
	rep.Baselines[bareName] = b.Load
	return b, nil
}

// EmbeddedWebhooks measures the webhook phases alone on the embedded
// gatehouse (-webhooks-only), or only the fan-out (-fanout-only).
func EmbeddedWebhooks(ctx context.Context, o bench.Options, rep *report.Report, self, tmp string) error {
	emb, err := gatehouse.Start(ctx, o, "gatehouse embedded", tmp, []string{"GATEHOUSE_DATA_DIR=" + tmp + "/data"})
	if err != nil {
		return err
	}
	floorArgs := []string{"-mode", "outbox-sqlite", "-sqlite", tmp + "/floor-outbox.db", "-sqlite-sync", o.SQLiteSync}
	if o.WebhooksOnly {
		err = webhookPhases(ctx, rep, emb, "sqlite:"+tmp+"/data/gatehouse.db", "SQLite", self, tmp, 200, floorArgs)
	} else {
		err = fanoutPhase(ctx, rep, emb, "sqlite:"+tmp+"/data/gatehouse.db", "SQLite", self, tmp, floorArgs)
	}
	if serr := emb.Proc.Stop(); err == nil {
		err = serr
	}
	return err
}

// Embedded measures gatehouse embedded (SQLite + in-process store): the
// signed query in turns with its floor (nonce in memory, one SQLite
// SELECT of the order row), traced too; with -signed-only nothing more;
// else ticket creation and list, deductions and the webhook phases, then
// its start-up time and peak RSS against the bare handler's.
func Embedded(ctx context.Context, o bench.Options, rep *report.Report, client *http.Client, self, tmp string, bare Bare) error {
	dataDir := tmp + "/data"
	emb, err := embeddedSigned(ctx, o, rep, client, self, tmp, dataDir, bare.Load)
	if err != nil {
		return err
	}
	embStart := emb.Proc.Startup
	if o.SignedOnly {
		return emb.Proc.Stop()
	}
	if err := embeddedRest(ctx, o, rep, client, emb, self, tmp, dataDir, bare.Load); err != nil {
		_ = emb.Proc.Stop()
		return err
	}
	embRSS, err := emb.Proc.PeakRSS()
	if err != nil {
		return err
	}
	if err := emb.Proc.Stop(); err != nil {
		return fmt.Errorf("gatehouse embedded did not stop cleanly: %w", err)
	}
	rep.Scalar("embedded start-up time (exec to /healthz 200, fresh data dir)", float64(embStart.Microseconds())/1000, "ms",
		bareName, float64(bare.Startup.Microseconds())/1000)
	rep.Scalar("peak RSS, gatehouse embedded after its load phases", float64(embRSS)/(1<<20), "MiB",
		bareName, float64(bare.RSS)/(1<<20))
	return nil
}

// embeddedSigned starts gatehouse embedded on dataDir and measures its
// signed query in turns with the embedded floor, then with tracing on (a
// process of its own, a data dir of its own, seeded alike) against the
// same floor measured anew. It returns the running gatehouse.
func embeddedSigned(ctx context.Context, o bench.Options, rep *report.Report, client *http.Client, self, tmp, dataDir string, bare load.Result) (*gatehouse.Process, error) {
	selectFloor, selectSrc, err := startSQLiteSelectFloor(ctx, o, self, tmp, bare.RPS)
	if err != nil {
		return nil, err
	}
	emb, err := gatehouse.Start(ctx, o, "gatehouse embedded", tmp, []string{"GATEHOUSE_DATA_DIR=" + dataDir})
	if err != nil {
		_ = selectFloor.Stop()
		return nil, err
	}
	signedList, err := emb.Presign(int(bare.RPS*(o.Phase+o.Warmup).Seconds()) + 1000)
	if err != nil {
		_ = selectFloor.Stop()
		_ = emb.Proc.Stop()
		return nil, err
	}
	selectLoad, embLoad := load.MeasurePair(ctx, o, client, selectSrc, load.URLs(signedList))
	rep.Baselines[sqliteSelectFloor] = selectLoad
	rep.Add("signed v1 order query, SQLite + memory", embLoad, sqliteSelectFloor, selectLoad)
	const embTraced = "signed v1 order query, SQLite + memory" + tracedSuffix
	if err := tracedPhase(ctx, o, client, embTraced, func(env []string) (*gatehouse.Process, error) {
		return gatehouse.Start(ctx, o, "gatehouse embedded traced", tmp, append([]string{"GATEHOUSE_DATA_DIR=" + tmp + "/data-traced"}, env...))
	}, func() load.Source {
		fresh := make([]string, len(signedList))
		for i := range fresh {
			fresh[i] = selectFloor.Base + "/q?order_no=" + gatehouse.OrderNo + "&nonce=" + bench.RandomHex(16)
		}
		return load.URLs(fresh)
	}, len(signedList), sqliteSelectFloor, rep); err != nil {
		rep.Skip(embTraced, err.Error())
	}
	if err := selectFloor.Stop(); err != nil {
		_ = emb.Proc.Stop()
		return nil, err
	}
	return emb, nil
}

// embeddedRest measures ticket creation and list, the deductions and the
// webhook phases on the embedded gatehouse emb.
func embeddedRest(ctx context.Context, o bench.Options, rep *report.Report, client *http.Client, emb *gatehouse.Process, self, tmp, dataDir string, bare load.Result) error {
	if err := ticketPhases(ctx, o, rep, emb, client, self, tmp, "SQLite", []string{"-mode", "insert-sqlite", "-sqlite", tmp + "/baseline-insert.db", "-sqlite-sync", o.SQLiteSync},
		bareName, bare); err != nil {
		return err
	}
	if err := deductPhases(ctx, o, rep, emb, client, bare, self, tmp, "SQLite", []string{"-mode", "update-sqlite", "-sqlite", tmp + "/baseline-update.db", "-sqlite-sync", o.SQLiteSync}, nil); err != nil {
		return err
	}
	return webhookPhases(ctx, rep, emb, "sqlite:"+dataDir+"/gatehouse.db", "SQLite", self, tmp, 200,
		[]string{"-mode", "outbox-sqlite", "-sqlite", tmp + "/floor-outbox.db", "-sqlite-sync", o.SQLiteSync})
}
