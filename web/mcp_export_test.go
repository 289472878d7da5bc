package web

import "time"

// MCPDirectCalls turns the gateway's direct tools/call answers on or off
// (mcp.Gateway.SetDirectCalls), for tests that compare them with the
// SDK's.
func (s *Server) MCPDirectCalls(on bool) { s.gateway.SetDirectCalls(on) }

// MCPDirectCallCount counts the tools/call requests this instance
// answered directly.
func (s *Server) MCPDirectCallCount() int64 { return s.gateway.DirectCalls() }

// MCPSessionTimeout sets how long an MCP session may stay idle
// (mcp.Gateway.SetSessionTimeout).
func (s *Server) MCPSessionTimeout(d time.Duration) { s.gateway.SetSessionTimeout(d) }
