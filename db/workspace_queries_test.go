package db_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// distributionKeys are the hot tables (they grow with calls, or are
// written on every call) and the column each would be distributed by on
// Citus (docs/operations.md, "Past one PostgreSQL"). Every query that
// reads or writes one of them must constrain that column, so that it
// routes to one shard group. Not here: workspaces, users, api_tokens,
// workspace_members, approver_roles, sessions, upstream_tools,
// trust_thresholds, chat_settings, cursor_keys (small, read by key or
// workspace, reference tables or coordinator-local), and conversations
// and notebooks (per workspace, but one row per scope, not per call).
var distributionKeys = map[string]string{
	"proposals":             "workspace_id",
	"messages":              "workspace_id", // migration 34
	"receipts":              "workspace_id",
	"transcript_lines":      "workspace_id", // the view of messages and calls' lines (migration 34)
	"audit_events":          "workspace_id",
	"audit_hours":           "workspace_id", // the audit page's hour map (migration 37)
	"evidence":              "workspace_id",
	"records":               "workspace_id",
	"approvals":             "workspace_id",
	"approval_votes":        "workspace_id", // migration 34
	"feedback":              "workspace_id",
	"chat_turns":            "workspace_id",
	"chat_tool_calls":       "workspace_id", // migration 34
	"idempotency_keys":      "workspace_id",
	"receipt_verifications": "workspace_id",
	"call_days":             "workspace_id",
	"call_days_open":        "workspace_id",
	"evidence_totals":       "workspace_id",
	"trust_violations":      "workspace_id",
	"outbox":                "workspace_id",
	"mcp_sessions":          "workspace_id", // migration 40
	"mcp_request_states":    "workspace_id", // migration 42
	"notifications":         "workspace_id", // migration 44
	"action_links":          "workspace_id", // migration 44
	"rationale_alerts":      "workspace_id", // migration 50
	"shadow_counts":         "workspace_id", // migration 55
	// Sign-in counters have no workspace (the account and address are
	// counted before anyone is in one): distributed by their own bucket.
	"rate_counters": "bucket",
}

// crossWorkspace are the queries that touch a hot table without naming
// one workspace, on purpose: each reason says why it must stay so. They run
// on the coordinator, fanned out to every shard (docs/operations.md).
var crossWorkspace = map[string]string{
	// Background maintenance and workers, over every workspace.
	"DeleteExpiredIdempotencyKeys":  "purge by expiry across workspaces (background sweeper)",
	"DeleteExpiredRateCounters":     "purge by expiry across buckets (background sweeper)",
	"DeleteIdleMCPSessions":         "forgets idle MCP sessions across workspaces (background sweeper)",
	"DeleteExpiredMCPRequestStates": "forgets expired requestState nonces across workspaces (background sweeper)",
	"DeleteExpiredActionLinks":      "forgets expired one-time links across workspaces (background sweeper)",
	"DeleteOldRationaleAlerts":      "forgets which callers were alerted, a week on, across workspaces (background sweeper)",
	"ClaimNotifications":            "the notifications sender claims what is due, in any workspace",
	"FoldNotifications":             "folds a span of the audit log's global feed into every workspace's notifications",
	"ListAuditSpan":                 "the audit export's global feed: a span of every workspace's rows, once each",
	"ExpireApprovals":               "the sweeper expires every workspace's overdue packets",
	"EscalateApprovals":             "the sweeper escalates every workspace's packets that are due",
	"ReconcileApprovedButNotRun":    "start-up repair across workspaces (crash recovery)",
	"ReconcileRejectedOrExpired":    "start-up repair across workspaces (crash recovery)",
	"ReconcileOrphanedPackets":      "start-up repair across workspaces (crash recovery)",
	"ReplayCallsPage":               "the policy replay command line over every workspace: a period's calls, a window of the primary key at a time (read-only operator tool)",
	"ListUnreportedCalls":           "the sweeper marks every workspace's caller-executed calls whose execution ticket expired unreported",
	"ClaimTurn":                     "the chat worker claims the next turn with work, in any workspace",
	"ReleaseLeases":                 "a stopping instance releases its own chat leases, in any workspace",
	"ClaimReceiptVerification":      "the verify worker claims the next queued run, in any workspace",
	// The evidence roll-up is one feed with one watermark over every
	// workspace's rows (rollup_feeds); per-workspace feeds would remove it.
	"EvidenceHead":     "the evidence roll-up's global head",
	"EvidenceBatchEnd": "a batch of the evidence roll-up's global feed",
	"FoldEvidence":     "folds a batch of the global feed into each workspace's totals",
	// The shadow rules' roll-up folds the audit log's global feed, as the
	// calls' roll-up does.
	"FoldShadowCounts": "folds a batch of the audit log's global feed into each workspace's shadow rule counts",
	// So is the calls' roll-up (audit_events' feed, internal/intent).
	"AuditHead":       "the calls' roll-up's global head",
	"CallEvents":      "a batch of the calls' roll-up's global feed, with each row's call",
	"AddCallDays":     "adds a batch's counts to each workspace's days, by their key",
	"OpenCallsAfter":  "the roll-up's sweep of unfinished calls, across workspaces",
	"DeleteOpenCalls": "forgets finished calls by their ids, across workspaces",
	"FoldAuditHours":  "folds the audit rows below the roll-up's watermark into every workspace's hour map",
	// And the conversations' activity roll-up (internal/conversations):
	// messages' ids and the audit log's.
	"MessagesHead":             "the messages roll-up's global head",
	"FoldConversationMessages": "folds a span of the messages' global feed into each conversation's activity",
	"FoldConversationCalls":    "folds a span of the audit log's global feed into each conversation's activity",
}

var (
	queryName  = regexp.MustCompile(`(?m)^-- name: (\w+) :\w+`)
	lineNote   = regexp.MustCompile(`--[^\n]*`)
	tableRef   = regexp.MustCompile(`\b(from|join|into|update)\s+(?:only\s+)?([a-z_][a-z0-9_]*)(?:\s+(?:as\s+)?([a-z_][a-z0-9_]*))?`)
	insertCols = regexp.MustCompile(`^\s*\(([^)]*)\)`)
	notAlias   = map[string]bool{
		"where": true, "set": true, "on": true, "join": true, "left": true, "right": true, "inner": true,
		"full": true, "cross": true, "natural": true, "using": true, "values": true, "returning": true,
		"order": true, "group": true, "limit": true, "for": true, "select": true, "union": true,
		"offset": true, "having": true, "window": true, "default": true, "overriding": true, "lateral": true,
		"except": true, "intersect": true, "fetch": true, "tablesample": true, "with": true,
	}
)

// hotQuery is one named query's use of one hot table that does not
// constrain its distribution column.
type hotQuery struct{ file, name, table string }

// unconstrained returns the hot tables that sql (comments stripped,
// lower case) reads or writes without constraining their distribution
// column: an alias's or the table's column compared with = or IN (a value,
// ANY of an array, or another table's column, as in a join), a USING
// join on it, or, for an INSERT, the column in its column list.
func unconstrained(sql string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range tableRef.FindAllStringSubmatchIndex(sql, -1) {
		verb, table := sql[m[2]:m[3]], sql[m[4]:m[5]]
		key, hot := distributionKeys[table]
		if !hot {
			continue
		}
		ok := false
		if verb == "into" {
			if cols := insertCols.FindStringSubmatch(sql[m[5]:]); cols != nil {
				ok = regexp.MustCompile(`\b` + key + `\b`).MatchString(cols[1])
			}
		} else {
			names := []string{regexp.QuoteMeta(table)}
			if m[6] >= 0 && !notAlias[sql[m[6]:m[7]]] {
				names = append(names, regexp.QuoteMeta(sql[m[6]:m[7]]))
			}
			col := `(?:\b(?:` + strings.Join(names, "|") + `)\.|[^.\w]|^)` + key + `\b`
			cmp := regexp.MustCompile(col + `\s*(?:=|in\b)|(?:=|\bin)\s*\(?\s*` + col + `[^(]` +
				`|\busing\s*\([^)]*\b` + key + `\b`)
			ok = cmp.MatchString(sql)
		}
		if !ok && !seen[table] {
			seen[table] = true
			out = append(out, table)
		}
	}
	return out
}

// Every query on a hot table names the workspace (or, for rate counters,
// the bucket), so that the schema can be distributed by workspace on Citus
// without a redesign: each query routes to one shard group. The exceptions
// are listed with their reasons above.
func TestQueries_FilterHotTablesByWorkspace(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries: %v", err)
	}
	var failures []hotQuery
	named := map[string]bool{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		locs := queryName.FindAllStringSubmatchIndex(string(text), -1)
		for i, loc := range locs {
			end := len(text)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			name := string(text[loc[2]:loc[3]])
			named[name] = true
			if _, ok := crossWorkspace[name]; ok {
				continue
			}
			sql := strings.ToLower(lineNote.ReplaceAllString(string(text[loc[1]:end]), " "))
			for _, table := range unconstrained(sql) {
				failures = append(failures, hotQuery{base, name, table})
			}
		}
	}
	sort.Slice(failures, func(i, j int) bool {
		if failures[i].file != failures[j].file {
			return failures[i].file < failures[j].file
		}
		return failures[i].name < failures[j].name
	})
	for _, f := range failures {
		t.Errorf("%s: %s reads or writes %s without constraining %s", f.file, f.name, f.table, distributionKeys[f.table])
	}
	for name := range crossWorkspace {
		if !named[name] {
			t.Errorf("allow-list names %s, which is no query of queries/*.sql", name)
		}
	}
}

// The check itself: what it accepts and what it refuses.
func TestUnconstrained(t *testing.T) {
	for _, c := range []struct {
		name, sql string
		want      []string
	}{
		{"filter", "select * from proposals where id = $1 and workspace_id = $2", nil},
		{"any", "select * from proposals where workspace_id = any($1::uuid[])", nil},
		{"no filter", "select * from proposals where id = $1", []string{"proposals"}},
		{"alias", "select * from approvals a join proposals p on p.id = a.proposal_id and p.workspace_id = a.workspace_id where a.workspace_id = $1", nil},
		{"alias unconstrained", "select * from approvals a join proposals p on p.id = a.proposal_id where a.workspace_id = $1", []string{"proposals"}},
		{"returned only", "update proposals set status = $2 where id = $1 returning workspace_id", []string{"proposals"}},
		{"insert", "insert into messages (workspace_id, conversation_id) values ($1, $2)", nil},
		{"insert without", "insert into messages (conversation_id) values ($1)", []string{"messages"}},
		{"using", "select * from call_days join evidence_totals using (workspace_id, action_class) where workspace_id = $1", nil},
		{"bucket", "select count from rate_counters where bucket = $1", nil},
		{"cold", "select * from users where id = $1", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := unconstrained(c.sql)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("unconstrained(%q) = %v, want %v", c.sql, got, c.want)
			}
		})
	}
}
