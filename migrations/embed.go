// Package migrations holds the golang-migrate SQL files, embedded so the one
// binary can migrate any database it is pointed at.
package migrations

import "embed"

// FS holds every NNNNNN_name.{up,down}.sql file of this folder.
//
//go:embed *.sql
var FS embed.FS
