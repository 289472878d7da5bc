DROP TABLE cursor_keys;
DROP INDEX proposals_conversation_open_idx;
