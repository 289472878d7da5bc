package replay

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as a person reads it: a summary, a table of
// the tools and classes whose calls would change, and their examples.
func WriteText(w io.Writer, r Report, file string) error {
	where := "every workspace"
	if r.WorkspaceID != nil {
		where = "workspace " + r.WorkspaceID.String()
	}
	t := r.Totals
	fmt.Fprintf(w, "Replayed %d calls of %s, %s to %s, under %s.\n", t.Calls+r.Unreadable, where,
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), file)
	if r.StoppedEarly {
		until := "the start"
		if r.ReadUntil != nil {
			until = r.ReadUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "STOPPED EARLY: the time allowed ran out; only calls up to %s were read.\n", until)
	}
	fmt.Fprintf(w, "  %d of tools the file covers, %d decided as recorded (tools it does not cover), %d unreadable (not decided).\n",
		r.Covered, r.NotCovered, r.Unreadable)
	fmt.Fprintf(w, "  Would change %d: %d newly ask a person, %d newly allowed (%d destructive, %d a person had rejected or edited), %d newly blocked, %d restated.\n",
		t.Calls-t.Unchanged, t.NewlyAsks, t.NewlyAllowed, t.NewlyAllowedDestructive, t.Overruled, t.NewlyBlocked, t.Restated)
	fmt.Fprintf(w, "  Approvals: %d saved, %d cost (calls that would newly wait for a person).\n", t.ApprovalsSaved, t.ApprovalsCost)
	if len(r.NoAnnotations) > 0 {
		fmt.Fprintf(w, "  No pinned definition (decided as if the upstream gave no hints): %s.\n", strings.Join(r.NoAnnotations, ", "))
	}
	if len(r.UnreadableExamples) > 0 {
		ids := make([]string, len(r.UnreadableExamples))
		for i, id := range r.UnreadableExamples {
			ids[i] = id.String()
		}
		fmt.Fprintf(w, "  Unreadable, for example: %s.\n", strings.Join(ids, ", "))
	}
	var changed []Group
	for _, g := range r.Groups {
		if g.Calls > g.Unchanged {
			changed = append(changed, g)
		}
	}
	if len(changed) == 0 {
		fmt.Fprintln(w, "\nNo call would be decided differently.")
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tACTION CLASS\tCALLS\tNEWLY ASKS\tNEWLY ALLOWED\tDESTRUCTIVE\tNEWLY BLOCKED\tRESTATED\tAPPROVALS SAVED\tAPPROVALS COST")
	for _, g := range changed {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", g.Tool, g.ActionClass, g.Calls, g.NewlyAsks, g.NewlyAllowed,
			g.NewlyAllowedDestructive, g.NewlyBlocked, g.Restated, g.ApprovalsSaved, g.ApprovalsCost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, g := range changed {
		for _, k := range Kinds {
			for _, ex := range g.Examples[k] {
				note := ex.Status
				if ex.Edited {
					note += ", edited"
				}
				fmt.Fprintf(w, "  %s %s (%s): %s %s -> %s (%s)\n", g.Tool, k, g.ActionClass, ex.ID, ex.Before, ex.After, note)
			}
		}
	}
	return nil
}
