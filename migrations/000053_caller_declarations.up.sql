-- A caller-executed tool declared on the fly (issue 29, item 1): the
-- caller sends the tool's declaration with its call (description, effect,
-- authority, action class, schema), and the call is decided under it. The
-- declaration is kept with the call, once, so every later step (the
-- owner's confirm, an approval, the caller's report, the unreported sweep)
-- decides and records it under what was declared, and the card shows it.
-- NULL for every other call. (Plain jsonb with a CHECK, not the
-- jsonb_object domain: a nullable parameter of a domain type is not
-- encoded as JSON by the driver.)
ALTER TABLE proposals ADD COLUMN caller_declaration jsonb
    CHECK (caller_declaration IS NULL OR jsonb_typeof(caller_declaration) = 'object');
