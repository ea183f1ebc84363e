// Package archtest holds the tests that keep the layout honest: the layers
// import only downwards, infrastructure knows no domain entity, and no
// hand-written package grows past what one person can hold in mind. The
// package has no code of its own.
package archtest
