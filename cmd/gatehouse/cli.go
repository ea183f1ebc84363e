package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/config"
)

// run builds the command tree and runs it. Every setting is a flag of the
// root command with a GATEHOUSE_* environment variable behind it, generated
// from its declaration in package config.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return rootCommand(stdin, stdout, stderr).Run(ctx, args)
}

// rootCommand is the command tree. Every flag of every command has one
// environment variable (TestEveryFlagHasAnEnvVar): the settings' are
// GATEHOUSE_<FLAG>, a subcommand's GATEHOUSE_<COMMAND>_<FLAG> unless
// another name reads better (documented in docs/configuration.md).
func rootCommand(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "gatehouse",
		Usage:     "the gateway between the company and partners, users and staff",
		Writer:    stdout,
		ErrWriter: stderr,
		Reader:    stdin,
		Flags:     config.Flags(),
		Commands: []*cli.Command{
			serveCommand(),
			migrateCommand(),
			versionCommand(),
			healthcheckCommand(),
			signCommand(),
			webhookCommand(),
			apikeyCommand(),
			userCommand(),
		},
	}
}
