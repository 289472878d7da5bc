// Package policy holds the pure decision layers: no I/O, no clock, only
// inputs and a verdict, so every case can be tested exhaustively.
package policy

// Effect is what a tool does to the world, declared once in the registry.
type Effect string

// Effects, least to most dangerous.
const (
	EffectRead        Effect = "read"
	EffectMutate      Effect = "mutate"
	EffectDestructive Effect = "destructive"
)

// Effects lists every effect.
var Effects = []Effect{EffectRead, EffectMutate, EffectDestructive}

// PermissionMode is a conversation's durable setting for non-destructive
// changes.
type PermissionMode string

// Permission modes; approve is the default.
const (
	ModeApprove PermissionMode = "approve"
	ModeAuto    PermissionMode = "auto"
)

// PermissionModes lists every valid mode.
var PermissionModes = []PermissionMode{ModeApprove, ModeAuto}

// Valid reports whether m is a known mode.
func (m PermissionMode) Valid() bool { return m == ModeApprove || m == ModeAuto }

// Disposition is how a proposed call in a conversation reaches effect.
type Disposition string

// Dispositions.
const (
	AutoRun   Disposition = "auto-run"   // a read: runs at once
	AutoApply Disposition = "auto-apply" // a change the owner allowed in advance
	Propose   Disposition = "propose"    // waits for the owner's confirm card
)

// DecideToolDisposition is the conversation scope gate:
//
//	read        → auto-run
//	mutate      → auto-apply in auto, propose in approve
//	destructive → propose, whatever the mode (the mode is not consulted)
//
// Anything it does not know (an unknown effect or mode) is proposed: it
// fails closed, never open.
func DecideToolDisposition(effect Effect, mode PermissionMode) Disposition {
	switch effect {
	case EffectRead:
		return AutoRun
	case EffectDestructive:
		return Propose
	case EffectMutate:
		if mode == ModeAuto {
			return AutoApply
		}
		return Propose
	}
	return Propose
}
