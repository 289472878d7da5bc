DROP TABLE audit_events;
DROP TABLE sessions;
DROP TABLE api_tokens;
DROP TABLE workspace_members;
DROP TABLE users;
DROP TABLE workspaces;
