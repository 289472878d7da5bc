-- name: InsertMessage :one
INSERT INTO messages (workspace_id, conversation_id, role, content, proposal_id, author_user_id)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING *;

-- name: ListMessagesBefore :many
-- A page of a conversation's lines before a position, newest first (the
-- caller turns it round): the messages' and the calls' index ranges
-- (messages_conversation_idx, proposals_conversation_idx) read backwards
-- and merged, which stops at the LIMIT however long the transcript is.
SELECT * FROM transcript_lines
WHERE workspace_id = @workspace_id AND conversation_id = @conversation_id AND id < @before
ORDER BY id DESC
LIMIT @max_lines;

-- name: ListMessagesBetween :many
-- A page of a conversation's lines after a position (and before another),
-- oldest first: the two index ranges merged, with a LIMIT.
SELECT * FROM transcript_lines
WHERE workspace_id = @workspace_id AND conversation_id = @conversation_id AND id > @after AND id < @before
ORDER BY id
LIMIT @max_lines;

-- name: PreviousMessageID :one
-- The conversation's nearest line before a position (0: none), by the
-- same index range as the pages, stopping at the first row.
SELECT coalesce((SELECT id FROM transcript_lines WHERE workspace_id = @workspace_id AND conversation_id = @conversation_id AND id < @before ORDER BY id DESC LIMIT 1), 0)::bigint;

-- name: NextMessageID :one
-- The conversation's nearest line after a position (0: none).
SELECT coalesce((SELECT id FROM transcript_lines WHERE workspace_id = @workspace_id AND conversation_id = @conversation_id AND id > @after ORDER BY id LIMIT 1), 0)::bigint;
