DELETE FROM messages WHERE role = 'notice';
ALTER TABLE messages
    DROP CONSTRAINT messages_role_check,
    ADD CONSTRAINT messages_role_check CHECK (role IN ('user', 'assistant', 'tool'));
DROP TABLE chat_tool_calls;
DROP TABLE chat_turns;
DROP TABLE chat_settings;
