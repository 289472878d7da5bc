DROP TABLE mcp_request_states;
