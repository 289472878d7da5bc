package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/notebooks"
)

type notebookJSON struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	TrustLevel string `json:"trust_level"`
	// Environment is where its calls take effect (omitted until set).
	Environment string `json:"environment,omitempty"`
	URL         string `json:"url"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func toNotebookJSON(n notebooks.Notebook) notebookJSON {
	return notebookJSON{ID: n.ID.String(), Title: n.Title, TrustLevel: string(n.TrustLevel), Environment: n.Environment,
		URL: "/notebooks/" + n.ID.String(), CreatedAt: rfc3339(n.CreatedAt), UpdatedAt: rfc3339(n.UpdatedAt)}
}

// apiCreateNotebook handles "POST /api/v1/notebooks".
func (s *Server) apiCreateNotebook(c echo.Context) error {
	var in struct {
		Title string `json:"title"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	nb, err := s.nbs.Create(c.Request().Context(), principal(c), in.Title)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toNotebookJSON(nb))
}

// apiListNotebooks handles "GET /api/v1/notebooks".
func (s *Server) apiListNotebooks(c echo.Context) error {
	list, err := s.nbs.List(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	out := make([]notebookJSON, len(list))
	for i, nb := range list {
		out[i] = toNotebookJSON(nb)
	}
	return c.JSON(http.StatusOK, map[string]any{"notebooks": out})
}

// apiGetNotebook handles "GET /api/v1/notebooks/:id".
func (s *Server) apiGetNotebook(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	nb, err := s.nbs.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toNotebookJSON(nb))
}

// apiUpdateNotebook handles "PATCH /api/v1/notebooks/:id".
func (s *Server) apiUpdateNotebook(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Title       *string `json:"title"`
		TrustLevel  *string `json:"trust_level"`
		Environment *string `json:"environment"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	nb, err := s.nbs.Update(c.Request().Context(), principal(c), id, notebooks.Update{Title: in.Title, TrustLevel: in.TrustLevel, Environment: in.Environment})
	if err != nil {
		return err
	}
	s.announce(principal(c).WorkspaceID, events.Notebook(id))
	return c.JSON(http.StatusOK, toNotebookJSON(nb))
}

// apiListCells handles "GET /api/v1/notebooks/:id/cells".
func (s *Server) apiListCells(c echo.Context) error {
	id, err := pathID(c, notebooks.ErrNotFound)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.nbs.Get(ctx, principal(c), id); err != nil {
		return err
	}
	cells, err := s.props.Cells(ctx, principal(c), id)
	if err != nil {
		return err
	}
	out := make([]proposalJSON, len(cells))
	for i, p := range cells {
		out[i] = toProposalJSON(p)
	}
	return c.JSON(http.StatusOK, map[string]any{"cells": out})
}
