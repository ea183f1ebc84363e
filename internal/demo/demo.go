// Package demo seeds demonstration data (idempotently) for `gatehouse serve
// --demo` and prints credentials and ready-to-run example commands.
//
// Each capability contributes a section from its own file by calling
// register in an init function; sections print in order.
package demo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"sort"
	"strings"

	"gatehouse/internal/app"
)

// Env is what a section needs: the app and the base URLs of the listeners.
type Env struct {
	App       *app.App
	PublicURL string
	AdminURL  string
}

type section struct {
	order int
	seed  func(ctx context.Context, e Env, out *strings.Builder) error
}

var sections []section

// register adds a section; lower order prints first.
func register(order int, seed func(ctx context.Context, e Env, out *strings.Builder) error) {
	sections = append(sections, section{order, seed})
}

// Seed creates the demo data if missing and prints how to use it.
func Seed(ctx context.Context, a *app.App, ls *app.Listeners, w io.Writer) error {
	scheme := "http://"
	if a.Cfg.TLS.Cert != "" {
		scheme = "https://"
	}
	e := Env{App: a, PublicURL: scheme + ls.Public.Addr().String(), AdminURL: scheme + ls.Admin.Addr().String()}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== gatehouse demo ===\n")
	fmt.Fprintf(&b, "public listener: %s   admin listener (GraphQL Playground): %s/\n", e.PublicURL, e.AdminURL)
	fmt.Fprintf(&b, "admin console: %s/console/ (sign in with the admin API key below)\n", e.AdminURL)
	fmt.Fprintf(&b, "storage: %s\n", redact(a.Cfg.Database.URL))
	sort.SliceStable(sections, func(i, j int) bool { return sections[i].order < sections[j].order })
	for _, s := range sections {
		b.WriteString("\n")
		if err := s.seed(ctx, e, &b); err != nil {
			return err
		}
	}
	fmt.Fprintf(&b, "======================\n\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// redact hides a password in a database URL.
func redact(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if at := strings.LastIndex(u, "@"); at > i {
			if c := strings.Index(u[i+3:at], ":"); c >= 0 {
				return u[:i+3+c+1] + "***" + u[at:]
			}
		}
	}
	return u
}

// derived is a demo credential for a shared database: stable for one
// master key (seeding stays idempotent across replicas and restarts) and
// never a published constant. label tells the credentials apart.
func derived(e Env, label string) []byte {
	m := hmac.New(sha256.New, e.App.Cfg.MasterKey)
	m.Write([]byte(label))
	return m.Sum(nil)
}
