package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/views"
)

// notebooksPage handles "GET /notebooks".
func (s *Server) notebooksPage(c echo.Context) error {
	list, err := s.nbs.List(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	items := make([]views.NotebookItem, len(list))
	for i, nb := range list {
		items[i] = views.NotebookItem{ID: nb.ID.String(), Title: nb.Title, Trust: string(nb.TrustLevel), Updated: nb.UpdatedAt.Format("2006-01-02 15:04")}
	}
	return render(c, http.StatusOK, views.NotebooksPage(s.shell(c, "Notebooks", "notebooks"), items))
}

// createNotebook handles "POST /notebooks".
func (s *Server) createNotebook(c echo.Context) error {
	nb, err := s.nbs.Create(c.Request().Context(), principal(c), c.FormValue("title"))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/notebooks/"+nb.ID.String())
}

// notebookPage handles "GET /notebooks/:id".
func (s *Server) notebookPage(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	nb, err := s.nbs.Get(ctx, principal(c), id)
	if err != nil {
		return err
	}
	cells, err := s.props.Cells(ctx, principal(c), id)
	if err != nil {
		return err
	}
	v := views.NotebookView{ID: nb.ID.String(), Title: nb.Title, Trust: string(nb.TrustLevel), Environment: nb.Environment, Form: s.cellForm(nb.ID.String(), "")}
	v.Form.Trust = string(nb.TrustLevel)
	if next := nextTrustLevel(nb.TrustLevel); next != "" {
		if v.Hints, err = s.graduationHints(c, proposals.InNotebook(nb.ID), "/notebooks/"+nb.ID.String()+"/trust", "trust_level", string(next), string(next)); err != nil {
			return err
		}
	}
	for _, p := range cells {
		v.Cells = append(v.Cells, s.toCard(c.Request().Context(), p))
	}
	return render(c, http.StatusOK, views.NotebookPage(s.shell(c, nb.Title, "notebooks"), v))
}

// setTrustLevel handles "POST /notebooks/:id/trust" (the header selector).
func (s *Server) setTrustLevel(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	trust := c.FormValue("trust_level")
	nb, err := s.nbs.Update(c.Request().Context(), principal(c), id, notebooks.Update{TrustLevel: &trust})
	if err != nil {
		return err
	}
	s.announce(principal(c).WorkspaceID, events.Notebook(id))
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/notebooks/"+nb.ID.String())
	}
	return render(c, http.StatusOK, views.TrustSelector(nb.ID.String(), string(nb.TrustLevel)))
}

// cellForm is an empty "add a cell" form with the tool selected (or the
// first one).
func (s *Server) cellForm(notebookID, toolName string) views.CellForm {
	f := views.CellForm{NotebookID: notebookID, IdempotencyKey: newFormKey()}
	var selected *tools.Tool
	// Without a choice, the picker starts on the first read tool, never on
	// one that changes or destroys data.
	for _, t := range s.props.Tools() {
		if t.Caller {
			continue // its caller runs it, never a notebook cell
		}
		f.Tools = append(f.Tools, views.ToolOption{Name: t.Name, Effect: string(t.Effect), Description: t.Description,
			Irreversible: views.IrreversibleNote(t.Name, string(t.Effect), string(t.Contract.Authority), t.Contract.ActionClass)})
		switch {
		case t.Name == toolName:
			selected = t
		case toolName == "" && t.Effect == policy.EffectRead && (selected == nil || selected.Effect != policy.EffectRead):
			selected = t
		}
	}
	if selected == nil && len(f.Tools) > 0 {
		selected, _ = s.props.Tool(f.Tools[0].Name)
	}
	if selected != nil {
		f.Tool, f.Fields = selected.Name, formFields(selected, nil, nil)
	}
	return f
}

// cellFields handles "GET /notebooks/:id/cell-fields?tool=…": the inputs
// for the tool just picked.
func (s *Server) cellFields(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	nb, err := s.nbs.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	f := s.cellForm(id.String(), c.QueryParam("tool"))
	f.Trust = string(nb.TrustLevel)
	return render(c, http.StatusOK, views.CellFields(f))
}

// addCell handles "POST /notebooks/:id/cells": the owner adds a cell. It
// runs at once or asks, as the trust level decides; either way the cell
// reaches the page through the poller (told to look now), and the form
// comes back empty. A refused cell re-renders the form as it was typed,
// with the reasons.
func (s *Server) addCell(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return apperr.Errorf(apperr.EBADREQ, "The form could not be read.")
	}
	name, rationale, key := form.Get("tool"), form.Get("rationale"), form.Get("idempotency_key")
	tool, ok := s.props.Tool(name)
	if !ok {
		f := s.cellForm(id.String(), "")
		f.Error = "Pick a tool from the list."
		return render(c, http.StatusUnprocessableEntity, views.AddCellForm(f))
	}
	// A notebook that runs the cell at once (autonomous) runs a tool that
	// cannot be undone only after the second confirmation.
	nb, err := s.nbs.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	if note := views.IrreversibleNote(tool.Name, string(tool.Effect), string(tool.Contract.Authority), tool.Contract.ActionClass); note != "" &&
		nb.TrustLevel == policy.TrustAutonomous && form.Get("irreversible_ack") != "1" {
		f := s.cellForm(id.String(), name)
		f.Trust = string(nb.TrustLevel)
		f.Fields, f.Rationale, f.IdempotencyKey = formFieldsFromInput(tool, form, nil), rationale, key
		f.Error = note + " This notebook runs it as soon as it is added: confirm it a second time to go ahead; nothing ran."
		return render(c, http.StatusUnprocessableEntity, views.AddCellForm(f))
	}
	// The form carries an idempotency key of its own, so a double submit
	// (or a retry after a lost response) adds the cell once.
	args, err := argumentsFromForm(tool, form)
	if err == nil {
		in := proposals.Input{Tool: name, Arguments: args, Rationale: rationale, IdempotencyKey: key}
		var begun proposals.Begun
		begun, err = s.beginIdempotent(c, proposals.InNotebook(id), in)
		if err == nil && begun.Replay == nil && begun.Recorded == nil {
			idem := begun.Held
			defer idem.Release(c.Request().Context())
			in.Idem = idem
			var p proposals.Proposal
			if p, err = s.props.Propose(c.Request().Context(), principal(c), proposals.InNotebook(id), in); err == nil {
				err = idem.Store(c.Request().Context(), proposals.StoredResponse{Status: http.StatusOK, ContentType: "text/plain", Body: []byte(p.ID.String())})
			}
		}
	}
	if err != nil {
		if apperr.Code(err) != apperr.EINVALID {
			return err
		}
		f := s.cellForm(id.String(), name)
		f.Trust = string(nb.TrustLevel)
		f.Fields, f.Rationale, f.IdempotencyKey = formFieldsFromInput(tool, form, err), rationale, key
		f.RationaleError = fieldError(err, "rationale")
		f.Error = apperr.Message(err)
		return render(c, http.StatusUnprocessableEntity, views.AddCellForm(f))
	}
	c.Response().Header().Set("HX-Trigger", "cells-changed")
	f := s.cellForm(id.String(), name)
	f.Trust = string(nb.TrustLevel)
	return render(c, http.StatusOK, views.AddCellForm(f))
}

// newCells handles "GET /notebooks/:id/cells?after=N&card=<version>…":
// for the page's live feed, the cells after the first N and the cells the
// page shows (by version) that changed since.
func (s *Server) newCells(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	after, err := strconv.Atoi(c.QueryParam("after"))
	if err != nil || after < 0 {
		return apperr.Invalid("after must be a count of cells.", apperr.FieldError{Field: "after", Message: "must be a whole number, 0 or more"})
	}
	ctx := c.Request().Context()
	nb, err := s.nbs.Get(ctx, principal(c), id)
	if err != nil {
		return err
	}
	cells, err := s.props.Cells(ctx, principal(c), id)
	if err != nil {
		return err
	}
	cards := make([]views.ProposalCard, len(cells))
	for i, p := range cells {
		cards[i] = s.toCard(ctx, p)
	}
	shown := min(after, len(cards))
	trust, shownTrust := string(nb.TrustLevel), c.QueryParam("trust")
	return render(c, http.StatusOK, views.CellsUpdate(cards[shown:], changedCards(cards[:shown], c.QueryParams()["card"]), len(cards), s.navCounts(c),
		id.String(), trust, shownTrust != "" && shownTrust != trust))
}

// newFormKey is a fresh idempotency key for one rendering of a form.
func newFormKey() string { return "form-" + strings.ReplaceAll(uuid.NewString(), "-", "") }

// setNotebookEnvironment handles "POST /notebooks/:id/environment" (the
// header's picker): the owner says where its cells take effect.
func (s *Server) setNotebookEnvironment(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	env := c.FormValue("environment")
	nb, err := s.nbs.Update(c.Request().Context(), principal(c), id, notebooks.Update{Environment: &env})
	action := "/notebooks/" + id.String() + "/environment"
	if apperr.Code(err) == apperr.EINVALID {
		return render(c, http.StatusUnprocessableEntity, views.EnvironmentPicker(action, "", apperr.Message(err)))
	}
	if err != nil {
		return err
	}
	s.announce(principal(c).WorkspaceID, events.Notebook(id))
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/notebooks/"+nb.ID.String())
	}
	return render(c, http.StatusOK, views.EnvironmentPicker(action, nb.Environment, ""))
}
