package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/db"
)

// UpstreamStatus is what an admin sees of an upstream.
type UpstreamStatus struct {
	Name     string
	Endpoint string // without secrets
	// Transport is "http" or "stdio"; HeaderNames the headers sent (never
	// their values).
	Transport   string
	HeaderNames []string
	Timeout     time.Duration
	// Available is false when the last listing failed; Problem says why.
	Available bool
	Problem   string
	ListedAt  time.Time
	Tools     []UpstreamToolStatus
}

// UpstreamToolStatus is one upstream tool: its pin, and what changed.
type UpstreamToolStatus struct {
	Upstream string
	Name     string // the upstream's name for it
	Declared string // <upstream>.<tool>
	// Status: accepted, held (new, or changed since it was accepted),
	// unavailable (listed but not declarable: Problem says why) or gone
	// (no longer listed).
	Status       string
	Changed      bool
	Problem      string
	Description  string
	Hash         string
	AcceptedHash string
	AcceptedBy   string // "policy file", an admin's id, "" when never
	AcceptedAt   *time.Time
	// Diff is the accepted definition against the current one, line by
	// line ("-" removed, "+" added, " " kept).
	Diff []DiffLine
}

// DiffLine is one line of a definition's difference.
type DiffLine struct {
	Op   string
	Text string
}

// Status is every upstream and its tools, for the admin pages.
func (u *Upstreams) Status(ctx context.Context) ([]UpstreamStatus, error) {
	if u == nil {
		return nil, nil
	}
	list := u.all()
	if len(list) == 0 {
		return nil, nil
	}
	rows, err := u.q.ListUpstreamTools(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp: list pins: %w", err)
	}
	pins := map[string]db.UpstreamTool{}
	for _, r := range rows {
		pins[key(r.Upstream, r.Name)] = r
	}
	var out []UpstreamStatus
	for _, up := range list {
		st := UpstreamStatus{Name: up.cfg.Name, Endpoint: up.cfg.Endpoint(), Transport: "http", HeaderNames: up.cfg.HeaderNames(), Timeout: up.cfg.Timeout}
		if up.cfg.URL == "" {
			st.Transport = "stdio"
		}
		up.mu.Lock()
		st.ListedAt, st.Problem = up.listedAt, up.err
		st.Available = up.err == "" && !up.listedAt.IsZero()
		if st.Problem == "" && up.listedAt.IsZero() {
			st.Problem = "not listed yet"
		}
		listed := map[string]listedTool{}
		for k, v := range up.listed {
			listed[k] = v
		}
		up.mu.Unlock()
		names := map[string]bool{}
		for n := range listed {
			names[n] = true
		}
		for _, r := range rows {
			if r.Upstream == up.cfg.Name {
				names[r.Name] = true
			}
		}
		sorted := make([]string, 0, len(names))
		for n := range names {
			sorted = append(sorted, n)
		}
		slices.Sort(sorted)
		for _, n := range sorted {
			lt, isListed := listed[n]
			row, pinned := pins[key(up.cfg.Name, n)]
			ts := UpstreamToolStatus{Upstream: up.cfg.Name, Name: n, Declared: up.cfg.Name + "." + n, Description: lt.def.Description}
			switch {
			case isListed && lt.why() != "":
				ts.Status, ts.Problem = "unavailable", lt.why()
			case !isListed && st.Available:
				ts.Status = "gone"
			case pinned:
				ts.Status = row.Status
			default:
				ts.Status = "held"
			}
			if pinned {
				ts.Hash, ts.AcceptedHash, ts.AcceptedAt = row.DefinitionHash, row.AcceptedHash.String, row.AcceptedAt
				if row.AcceptedAt != nil {
					ts.AcceptedBy = "policy file"
					if row.AcceptedBy.Valid {
						ts.AcceptedBy = row.AcceptedBy.UUID.String()
					}
				}
				ts.Changed = row.AcceptedHash.Valid && row.AcceptedHash.String != row.DefinitionHash
				ts.Diff = diffLines(pretty(row.AcceptedDefinition), pretty(row.Definition))
				if ts.Description == "" {
					var d struct {
						Description string `json:"description"`
					}
					json.Unmarshal(row.Definition, &d)
					ts.Description = d.Description
				}
			}
			st.Tools = append(st.Tools, ts)
		}
		out = append(out, st)
	}
	return out, nil
}

// Tool is the status of one upstream tool by its declared name.
func (u *Upstreams) Tool(ctx context.Context, declared string) (UpstreamToolStatus, bool) {
	all, err := u.Status(ctx)
	if err != nil {
		return UpstreamToolStatus{}, false
	}
	for _, up := range all {
		for _, t := range up.Tools {
			if t.Declared == declared {
				return t, true
			}
		}
	}
	return UpstreamToolStatus{}, false
}

// pretty indents a definition for reading, one field a line; nothing when
// there is none.
func pretty(raw []byte) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return strings.Split(string(raw), "\n")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

// diffLines is a line diff of a against b (longest common subsequence;
// definitions are small).
func diffLines(a, b []string) []DiffLine {
	if len(a) == 0 {
		out := make([]DiffLine, len(b))
		for i, l := range b {
			out[i] = DiffLine{"+", l}
		}
		return out
	}
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []DiffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, DiffLine{" ", a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, DiffLine{"-", a[i]})
			i++
		default:
			out = append(out, DiffLine{"+", b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, DiffLine{"-", a[i]})
	}
	for ; j < m; j++ {
		out = append(out, DiffLine{"+", b[j]})
	}
	return out
}
