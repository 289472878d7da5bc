package main

import (
	"math/rand/v2"
	"slices"
	"time"
)

// volumePlan is what the volume phase writes for a number of calls: the
// proportions of issue 32's million (1,000 conversations, one of them
// holding a fifth of the calls; 10,000 pending approval packets; 50,000
// evidence rows), scaled to the calls asked for. Feedback (one item per
// 200 calls) and notebooks (one per ten conversations) are this bench's
// own guesses, so that their pages read something.
type volumePlan struct {
	Calls          int
	Conversations  int // the hot one and the small one among them
	HotCalls       int // in the hot conversation
	PendingPackets int // approval packets waiting for an approver
	Evidence       int
	Feedback       int
	Notebooks      int
}

// minVolume is the smallest volume the phase takes: below it the
// proportions round to nothing.
const minVolume = 1000

func planVolume(calls int) volumePlan {
	return volumePlan{
		Calls:          calls,
		Conversations:  max(2, calls/1000),
		HotCalls:       calls / 5,
		PendingPackets: calls / 100,
		Evidence:       calls / 20,
		Feedback:       calls / 200,
		Notebooks:      max(1, calls/10_000),
	}
}

// The mix of the other calls, by what they leave behind. A refused call
// leaves an audit row and a refusal receipt but no proposal; an approved
// packet a proposal applied by an approver; in an approve-mode
// conversation some changes are never confirmed and stay pending cards.
const (
	shareRefused        = 0.02
	shareApprovedPacket = 0.01
	shareRead           = 0.50
	shareCardsOfWrites  = 0.05 // in approve-mode conversations
	// Every tenth conversation (besides the small one) is in approve
	// mode. Its changes are confirmed by the owner, and a person's
	// judgment is evidence the server records itself (as it does for an
	// approved packet): with one in ten, those come to about the
	// issue's 5 % of the calls.
	approveModeEvery = 10
)

// fillKind is what one event of the fill is: a call of some outcome, or
// a conversation, notebook or feedback item.
type fillKind uint8

const (
	kindRead           fillKind = iota // records.get, auto-run
	kindWrite                          // records.put: auto-applied, or confirmed by the owner in approve mode
	kindCard                           // records.put waiting for the owner's confirm (approve mode)
	kindRefused                        // webhook.post to a host off the allowlist (auto mode)
	kindPacketPending                  // email.send waiting for an approver
	kindPacketApproved                 // email.send approved and sent
	kindConversation                   // a conversation created
	kindNotebook                       // a notebook created
	kindFeedback                       // an agent's feedback
)

var kindNames = [...]string{"read", "write", "card", "refused", "packet-pending", "packet-approved", "conversation", "notebook", "feedback"}

func (k fillKind) String() string { return kindNames[k] }

// isCall says whether the event is a tool call (counted in the volume).
func (k fillKind) isCall() bool { return k <= kindPacketApproved }

// fillEvent is one thing the fill writes, at a time.
type fillEvent struct {
	at       int64 // unix nanoseconds
	conv     int32 // the conversation (an index; -1: none), or the conversation or notebook created
	kind     fillKind
	evidence bool // a judgment of the call is recorded too
}

// Where the fill puts its events in time, before now: calls over half a
// year, pending packets within the approval window (an approval packet
// lives a day; older ones would have expired), conversations and
// notebooks before their calls.
const (
	callSpan        = 180 * 24 * time.Hour
	callSpanEnd     = time.Hour
	packetSpan      = 20 * time.Hour
	packetSpanEnd   = 5 * time.Minute
	createdSpan     = 20 * 24 * time.Hour // conversations and notebooks: the 20 days before the calls
	fillRandomState = 32                  // the fill is the same in every run
)

// approveMode says whether the conversation at index i is in approve
// mode: the hot one (0) is in auto mode, the small one (1) in approve
// mode, and every tenth of the others.
func approveMode(i int) bool { return i == 1 || (i > 1 && i%approveModeEvery == 0) }

// timeline is every event of the fill in time order, the same for the same
// plan, now and random state. The hot conversation gets exactly HotCalls
// of the calls, the others share the rest evenly; exactly PendingPackets
// calls are pending packets. No judgment is marked yet (markEvidence).
func (p volumePlan) timeline(now time.Time, rng *rand.Rand) []fillEvent {
	events := make([]fillEvent, 0, p.Calls+p.Conversations+p.Notebooks+p.Feedback)
	between := func(from, to time.Duration) int64 { // a time between now-from and now-to
		return now.Add(-from).UnixNano() + rng.Int64N(int64(from-to))
	}
	for i := 2; i < p.Conversations; i++ { // 0 and 1 are the seeded conversations
		events = append(events, fillEvent{at: between(callSpan+createdSpan, callSpan), conv: int32(i), kind: kindConversation})
	}
	for i := range p.Notebooks {
		events = append(events, fillEvent{at: between(callSpan+createdSpan, callSpan), conv: int32(i), kind: kindNotebook})
	}
	for range p.Feedback {
		events = append(events, fillEvent{at: between(callSpan, callSpanEnd), conv: -1, kind: kindFeedback})
	}

	convs := make([]int32, p.Calls)
	others := int32(max(1, p.Conversations-1))
	for i := range convs {
		if i >= p.HotCalls {
			convs[i] = 1 + int32(i-p.HotCalls)%others
		}
	}
	rng.Shuffle(len(convs), func(i, j int) { convs[i], convs[j] = convs[j], convs[i] })
	for i, conv := range convs {
		e := fillEvent{conv: conv}
		approve := approveMode(int(conv))
		if i < p.PendingPackets { // convs is shuffled: any calls will do
			e.kind, e.at = kindPacketPending, between(packetSpan, packetSpanEnd)
		} else {
			e.at = between(callSpan, callSpanEnd)
			switch x := rng.Float64(); {
			case x < shareRefused && !approve:
				e.kind = kindRefused
			case x < shareRefused+shareApprovedPacket:
				e.kind = kindPacketApproved
			case x < shareRefused+shareApprovedPacket+shareRead:
				e.kind = kindRead
			case approve && rng.Float64() < shareCardsOfWrites:
				e.kind = kindCard
			default:
				e.kind = kindWrite
			}
		}
		events = append(events, e)
	}
	slices.SortStableFunc(events, func(a, b fillEvent) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return events
}

// markEvidence marks calls whose judgment is recorded too (an agent's or
// the owner's, through the API), at random among the changes and
// approved packets, until the evidence rows come to want: auto says how
// many rows an event writes by itself (the server records a person's
// confirm or approval as evidence) and judged how many a marked one adds.
// It returns the rows the events will write.
func markEvidence(events []fillEvent, want int, auto, judged func(fillEvent) int, rng *rand.Rand) int {
	rows := 0
	var judgeable []int
	for i, e := range events {
		rows += auto(e)
		if (e.kind == kindWrite || e.kind == kindPacketApproved) && judged(e) > 0 {
			judgeable = append(judgeable, i)
		}
	}
	for i := 0; i < len(judgeable) && rows < want; i++ {
		j := i + rng.IntN(len(judgeable)-i)
		judgeable[i], judgeable[j] = judgeable[j], judgeable[i]
		events[judgeable[i]].evidence = true
		rows += judged(events[judgeable[i]])
	}
	return rows
}
