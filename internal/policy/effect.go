package policy

import "fmt"

// Path is a way a call reaches effect. The decision taken when the call
// was proposed tells the caller what to expect; the one taken again at the
// moment of effect, on the arguments that will actually run and the rows as
// they are then, is the one that counts, and each path may run only up to
// its ceiling.
type Path string

// Paths to effect.
const (
	// PathAuto runs a call without a person: at propose time.
	PathAuto Path = "auto"
	// PathOwner is the scope owner's confirm (Apply, Run), possibly with
	// edited arguments.
	PathOwner Path = "owner"
	// PathApproval is approvers resolving an approval packet.
	PathApproval Path = "approval"
	// PathPerformed is the principal recording that they performed a
	// human-only action themselves.
	PathPerformed Path = "performed"
)

// Paths lists every path.
var Paths = []Path{PathAuto, PathOwner, PathApproval, PathPerformed}

// Ceiling is the strictest effect-time state the path may run; false for
// an unknown path, which may run nothing.
func (p Path) Ceiling() (State, bool) {
	switch p {
	case PathAuto:
		return StateAllowedWithConstraints, true
	case PathOwner:
		return StateReviewRequired, true
	case PathApproval:
		return StateDeferred, true
	case PathPerformed:
		return StateHumanOnly, true
	}
	return "", false
}

// Outcome is what happens to a call at the moment of effect.
type Outcome string

// Outcomes.
const (
	// OutcomeRun: the call runs.
	OutcomeRun Outcome = "run"
	// OutcomeConfirm: the call waits for its scope owner (a confirm card).
	OutcomeConfirm Outcome = "confirm"
	// OutcomeEscalate: the call waits for an approver (an approval packet
	// for the call as it will run).
	OutcomeEscalate Outcome = "escalate"
	// OutcomeRefuse: nothing runs; the caller gets the new decision.
	OutcomeRefuse Outcome = "refuse"
)

// AtEffect decides what happens when a call reaches effect on path, given
// the state decided when it was proposed and the state decided now on what
// will run. A call runs only when the effect-time state is within the
// path's ceiling (a human-only action only as the principal's own
// performance of an action proposed as human-only); blocked never runs.
// Above the ceiling, a call that needs the scope's owner or an approver
// waits for them, and anything else is refused. It fails closed: an
// unknown path or state is refused.
func AtEffect(path Path, proposed, now State) Outcome {
	ceiling, ok := path.Ceiling()
	if !ok || !known(now) || now == StateBlocked {
		return OutcomeRefuse
	}
	if path == PathPerformed && proposed != StateHumanOnly {
		return OutcomeRefuse // only a call proposed as human-only is performed by hand
	}
	if now.Rank() <= ceiling.Rank() {
		return OutcomeRun
	}
	switch now {
	case StateReviewRequired:
		return OutcomeConfirm
	case StateDeferred:
		return OutcomeEscalate
	}
	return OutcomeRefuse
}

func known(s State) bool {
	for _, k := range States {
		if s == k {
			return true
		}
	}
	return false
}

// String names the path for messages.
func (p Path) String() string {
	switch p {
	case PathAuto:
		return "the automatic path"
	case PathOwner:
		return "the owner's confirm"
	case PathApproval:
		return "an approval"
	case PathPerformed:
		return "the principal's own performance"
	}
	return fmt.Sprintf("path %q", string(p))
}
