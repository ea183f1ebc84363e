package main

import (
	"context"
	"fmt"
	"os"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/overload"
	"gatehouse/cmd/gatehouse-bench/internal/phases"
	"gatehouse/cmd/gatehouse-bench/internal/report"
)

// benchmark runs the phases o selects, in their order, and fills rep:
// the bare handler first (its rate sizes the others), then gatehouse
// embedded, the overload phases, the -before binary, and gatehouse on
// Postgres + Redis. The -…-only flags keep one part.
func benchmark(ctx context.Context, o bench.Options, rep *report.Report) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.Gatehouse); err != nil {
		return fmt.Errorf("gatehouse binary: %w (run make build)", err)
	}
	tmp, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.OverloadOnly {
		return overload.Phases(ctx, o, rep, self, tmp)
	}
	client := load.NewClient(o.Workers)
	bare, err := phases.MeasureBare(ctx, o, rep, client, self, tmp)
	if err != nil {
		return err
	}
	// gatehouse on Postgres + Redis, against the one-Redis-one-Postgres baseline.
	external := func() {
		if err := phases.External(ctx, o, rep, self, tmp, client, bare.Load); err != nil {
			rep.Skip("Postgres + Redis figures", err.Error())
		}
	}
	if o.FanoutOnly || o.WebhooksOnly {
		if err := phases.EmbeddedWebhooks(ctx, o, rep, self, tmp); err != nil {
			return err
		}
	}
	if o.DeductOnly || o.PublishOnly || o.FanoutOnly || o.WebhooksOnly {
		external()
		return nil
	}
	if err := phases.Embedded(ctx, o, rep, client, self, tmp, bare); err != nil {
		return err
	}
	if o.SignedOnly {
		external()
		return nil
	}
	if err := overload.Phases(ctx, o, rep, self, tmp); err != nil {
		rep.Skip("overload phases", err.Error())
	}
	if o.Before != "" {
		if err := phases.Before(ctx, o, rep, self, tmp); err != nil {
			rep.Skip("webhook figures of the -before binary", err.Error())
		}
	}
	external()
	return nil
}
