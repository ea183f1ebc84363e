package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/demo"
	"gatehouse/internal/webhook/receiver"
)

func webhookCommand() *cli.Command {
	return &cli.Command{
		Name:  "webhook",
		Usage: "webhook tools",
		Commands: []*cli.Command{{
			Name:  "listen",
			Usage: "run a small webhook receiver that verifies signatures and prints each delivery (and the OAuth demo's callback page)",
			Description: "Answers 204 to a delivery whose Standard Webhooks signature verifies with --secret (the app's\n" +
				"whsec_… webhook secret), 401 to one that does not. GET /callback is the OAuth demo's redirect URI: a page\n" +
				"with the code and the curl that exchanges it at --oauth-token-url as --oauth-client.\n" +
				"Example (make run prints the demo app's):\n" +
				"  gatehouse webhook listen --addr 127.0.0.1:9099 --secret whsec_… --oauth-client-secret …",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "addr", Value: "127.0.0.1:9099", Usage: "listen address", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_LISTEN_ADDR")},
				&cli.StringFlag{Name: "secret", Usage: "the app's webhook secret (whsec_…); empty: print without verifying", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_SECRET")},
				&cli.StringFlag{Name: "oauth-token-url", Value: demo.DefaultTokenURL, Usage: "the callback page's exchange command: the token endpoint", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_LISTEN_OAUTH_TOKEN_URL")},
				&cli.StringFlag{Name: "oauth-client", Value: demo.DemoAppKey, Usage: "the callback page's exchange command: the client (app key)", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_LISTEN_OAUTH_CLIENT")},
				&cli.StringFlag{Name: "oauth-client-secret", Usage: "the callback page's exchange command: the client's secret (app secret); empty: a placeholder", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_LISTEN_OAUTH_CLIENT_SECRET")},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				out := cmd.Root().Writer
				rcv, err := receiver.NewReceiver(cmd.String("secret"), out)
				if err != nil {
					return fmt.Errorf("webhook listen: --secret: %w", err)
				}
				if err := demo.CheckTokenURL(cmd.String("oauth-token-url")); err != nil {
					return fmt.Errorf("webhook listen: --oauth-token-url: %w", err)
				}
				l, err := net.Listen("tcp", cmd.String("addr"))
				if err != nil {
					return fmt.Errorf("webhook listen: %w", err)
				}
				mux := http.NewServeMux()
				mux.Handle("/", rcv)
				mux.Handle("GET "+demo.CallbackPath, &demo.Callback{
					TokenURL: cmd.String("oauth-token-url"), ClientID: cmd.String("oauth-client"), ClientSecret: cmd.String("oauth-client-secret"),
					RedirectURI: "http://" + l.Addr().String() + demo.CallbackPath, Out: out,
				})
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
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
				fmt.Fprintf(out, "listening on http://%s/ (any path), %s; OAuth demo callback page at GET http://%s%s; Ctrl-C stops\n", l.Addr(), verify, l.Addr(), demo.CallbackPath)
				if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			},
		}},
	}
}
