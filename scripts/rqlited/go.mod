// Wrapper module used by scripts/install_rqlite.sh to build rqlited.
//
// rqlite's own go.mod carries replace directives, and replace directives
// apply only in the main module, so `go install ...@version` refuses it.
// This module requires the pinned rqlite and repeats the replace lines of
// that exact tag's go.mod. When you change the pin, copy the replace block
// from the new tag's go.mod and update RQLITE_VERSION / RQLITE_COMMIT in
// scripts/install_rqlite.sh.
module taskq.local/rqlited

go 1.26

require github.com/rqlite/rqlite/v10 v10.2.7

// Copied verbatim from github.com/rqlite/rqlite v10.2.7 go.mod.
replace (
	github.com/armon/go-metrics => github.com/hashicorp/go-metrics v0.5.1
	github.com/mattn/go-sqlite3 => github.com/rqlite/go-sqlite3 v1.48.0
)

tool github.com/rqlite/rqlite/v10/cmd/rqlited
