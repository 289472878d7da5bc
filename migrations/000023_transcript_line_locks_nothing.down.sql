CREATE OR REPLACE FUNCTION gatehouse_user_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_events SET actor_user_id = NULL WHERE actor_user_id = OLD.id;
    RETURN NULL;
END $$;
DROP TRIGGER proposals_delete_lines ON proposals;
DROP FUNCTION gatehouse_proposals_deleted();
DROP TRIGGER conversations_delete_lines ON conversations;
DROP FUNCTION gatehouse_conversations_deleted();

-- Lines written while the keys were gone may name rows deleted since:
-- they are dropped or cleared first, as the keys would have done.
DELETE FROM messages m WHERE NOT EXISTS (SELECT 1 FROM conversations c WHERE c.id = m.conversation_id);
DELETE FROM messages m WHERE m.proposal_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM proposals p WHERE p.id = m.proposal_id);
UPDATE messages m SET author_user_id = NULL
WHERE author_user_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = m.author_user_id);

ALTER TABLE messages
    ADD CONSTRAINT messages_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations (id) ON DELETE CASCADE,
    ADD CONSTRAINT messages_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES proposals (id) ON DELETE CASCADE,
    ADD CONSTRAINT messages_author_user_id_fkey FOREIGN KEY (author_user_id) REFERENCES users (id) ON DELETE SET NULL;
