package proposals

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// Together is one call of ProposeTogether.
type Together struct {
	P     auth.Principal
	Scope Scope
	In    Input
	// Ctx is the caller's context (nil: ProposeTogether's).
	Ctx context.Context
}

// ProposeTogether runs calls as one group transaction would, as if they
// had all queued while another was writing: each call's outcome, and
// whether it left the group to run alone (which it then does, as Propose
// would run it).
func (s *Service) ProposeTogether(ctx context.Context, calls []Together) (outs []Proposal, errs []error, alone []bool) {
	gs := make([]*grouped, len(calls))
	outs, errs, alone = make([]Proposal, len(calls)), make([]error, len(calls)), make([]bool, len(calls))
	for i, c := range calls {
		ch, err := s.check(c.In)
		if err != nil || !groupable(ch, c.In) {
			panic("ProposeTogether: not a call the group takes")
		}
		cctx := ctx
		if c.Ctx != nil {
			cctx = c.Ctx
		}
		gs[i] = &grouped{ctx: cctx, p: c.P, scope: c.Scope, c: ch, in: c.In}
	}
	s.commitGroup(gs, func() {})
	for i, g := range gs {
		outs[i], errs[i], alone[i] = g.out, g.err, g.alone
		if g.alone {
			func() {
				defer func() {
					if r := recover(); r != nil {
						errs[i] = fmt.Errorf("panic: %v", r)
					}
				}()
				outs[i], errs[i] = s.proposeAlone(g.ctx, g.p, g.scope, g.c, calls[i].In)
			}()
		}
	}
	return outs, errs, alone
}

// SetLimitSync sets how often, at most, the service shares its in-memory
// rate-limit counts (a test counting round trips wants none).
func (s *Service) SetLimitSync(every time.Duration) { s.limiter.SetSyncEvery(every) }

// HoldOutsideRecords keeps every writer of outside reads' records busy
// until release is called: records queue meanwhile, and the first writer
// released writes them together (up to maxGroup in one statement).
func (s *Service) HoldOutsideRecords() (release func()) {
	b := s.outside
	b.mu.Lock()
	held := b.writers - b.leaders
	b.leaders = b.writers
	b.mu.Unlock()
	return func() {
		for range held {
			b.handOff()
		}
	}
}

// QueuedOutsideRecords is how many outside reads' records wait.
func (s *Service) QueuedOutsideRecords() int {
	s.outside.mu.Lock()
	defer s.outside.mu.Unlock()
	return len(s.outside.queue)
}
