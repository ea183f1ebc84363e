package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app"
	"gatehouse/internal/config"
	"gatehouse/internal/identity"
	"gatehouse/internal/store"
)

// openStore reads the configuration and opens the migrated database.
func openStore(ctx context.Context, cmd *cli.Command) (*store.DB, error) {
	cfg, err := config.FromCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("configuration:\n%w", err)
	}
	db, err := store.Open(ctx, cfg.Database.URL, app.StoreOptions(cfg)...)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func apikeyCommand() *cli.Command {
	return &cli.Command{
		Name:  "apikey",
		Usage: "manage admin API keys (the X-API-Key of the GraphQL admin)",
		Commands: []*cli.Command{{
			Name:  "create",
			Usage: "create an enabled API key and print it (it is shown only this once)",
			Description: "The key alone goes to standard output, details to standard error, so that\n" +
				"  KEY=$(gatehouse apikey create --name ops)\nkeeps just the key. A READ_ONLY key may query but not change anything:\n" +
				"  gatehouse apikey create --name dashboard --role READ_ONLY",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "name", Usage: "what the key is for (1-128 characters)", Required: true, Sources: cli.EnvVars("GATEHOUSE_APIKEY_NAME")},
				&cli.StringFlag{Name: "role", Value: string(apikey.RoleAdmin), Usage: "ADMIN (query and change), READ_ONLY (query only) or PUBLISHER (publish events only; scopes: createAPIKey)", Sources: cli.EnvVars("GATEHOUSE_APIKEY_ROLE")},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				role, err := apikey.ParseRole(cmd.String("role"))
				if err != nil {
					return fmt.Errorf("apikey create: %w", err)
				}
				db, err := openStore(ctx, cmd)
				if err != nil {
					return err
				}
				defer db.Close()
				row, key, err := apikey.NewService(db.Client, nil).Create(ctx, cmd.String("name"), role)
				if err != nil {
					return fmt.Errorf("apikey create: %w", err)
				}
				fmt.Fprintf(cmd.Root().ErrWriter, "created %s API key %d %q (prefix %s); store it now, it cannot be shown again\n", row.Role, row.ID, row.Name, row.Prefix)
				_, err = fmt.Fprintln(cmd.Root().Writer, key)
				return err
			},
		}},
	}
}

func userCommand() *cli.Command {
	return &cli.Command{
		Name:  "user",
		Usage: "manage users (JWT login, OAuth approval)",
		Commands: []*cli.Command{{
			Name:  "create",
			Usage: "create an enabled user; the password is read from standard input (one line)",
			Description: "Example:\n  printf '%s\\n' \"$PASSWORD\" | gatehouse user create --username alice --role admin --role ops\n" +
				"On a terminal the password is read as typed, and shown while typing: prefer a pipe.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "username", Usage: "1-64 of [A-Za-z0-9._-]", Required: true, Sources: cli.EnvVars("GATEHOUSE_USER_USERNAME")},
				&cli.StringSliceFlag{Name: "role", Usage: "a role of the user (repeat for more; the variable: comma-separated)", Sources: cli.EnvVars("GATEHOUSE_USER_ROLES")},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				in := cmd.Root().Reader
				if f, ok := in.(*os.File); ok {
					if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
						fmt.Fprint(cmd.Root().ErrWriter, "password (8-72 bytes; shown as you type): ")
					}
				}
				pw, err := readLine(in)
				if err != nil {
					return fmt.Errorf("user create: read password from standard input: %w", err)
				}
				// Check the input before touching the database.
				if err := identity.ValidateUsername(cmd.String("username")); err != nil {
					return fmt.Errorf("user create: %w", err)
				}
				if err := identity.ValidatePassword(pw); err != nil {
					return fmt.Errorf("user create: %w", err)
				}
				db, err := openStore(ctx, cmd)
				if err != nil {
					return err
				}
				defer db.Close()
				u, err := identity.NewUsers(db.Client).Create(ctx, identity.NewUser{
					Username: cmd.String("username"),
					Password: pw,
					Roles:    cmd.StringSlice("role"),
				})
				if err != nil {
					return fmt.Errorf("user create: %w", err)
				}
				_, err = fmt.Fprintf(cmd.Root().Writer, "created user %d %q with roles [%s]\n", u.ID, u.Username, strings.Join(u.Roles, ", "))
				return err
			},
		}},
	}
}

// readLine reads one line (without its line ending) from r.
func readLine(r io.Reader) (string, error) {
	if r == nil {
		return "", errors.New("no standard input")
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		if errors.Is(err, io.EOF) {
			return "", errors.New("nothing to read: pipe the password in")
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
