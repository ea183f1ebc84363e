// Package ent holds the generated Ent client. Only ent/schema, ent/template,
// entc.go and this file are written by hand.
package ent

//go:generate go run -C .. -mod=mod ./ent/entc.go
