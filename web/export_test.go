package web

// MCPLiveSessions counts the MCP sessions this instance holds (tests of
// sessions across instances).
func (s *Server) MCPLiveSessions() int { return s.gateway.LiveSessions() }
