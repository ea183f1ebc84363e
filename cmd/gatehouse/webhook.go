package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/webhook"
)

func webhookCommand() *cli.Command {
	return &cli.Command{
		Name:  "webhook",
		Usage: "webhook tools",
		Commands: []*cli.Command{{
			Name:  "listen",
			Usage: "run a small webhook receiver that verifies signatures and prints each delivery",
			Description: "Answers 204 to a delivery whose Standard Webhooks signature verifies with --secret (the app's\n" +
				"whsec_… webhook secret), 401 to one that does not. Example (make run prints the demo app's):\n" +
				"  gatehouse webhook listen --addr 127.0.0.1:9099 --secret whsec_…",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "addr", Value: "127.0.0.1:9099", Usage: "listen address"},
				&cli.StringFlag{Name: "secret", Usage: "the app's webhook secret (whsec_…); empty: print without verifying", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_SECRET")},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				out := cmd.Root().Writer
				rcv, err := webhook.NewReceiver(cmd.String("secret"), out)
				if err != nil {
					return fmt.Errorf("webhook listen: --secret: %w", err)
				}
				l, err := net.Listen("tcp", cmd.String("addr"))
				if err != nil {
					return fmt.Errorf("webhook listen: %w", err)
				}
				srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
				go func() {
					<-ctx.Done()
					sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					_ = srv.Shutdown(sctx)
				}()
				verify := "verifying signatures with the given secret"
				if cmd.String("secret") == "" {
					verify = "NOT verifying signatures (no --secret)"
				}
				fmt.Fprintf(out, "listening on http://%s/ (any path), %s; Ctrl-C stops\n", l.Addr(), verify)
				if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			},
		}},
	}
}
