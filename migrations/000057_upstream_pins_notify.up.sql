-- Every change to a pin is announced on the events channel, whichever
-- code path (and instance) makes it: each instance keeps the pins it
-- checks calls against in memory (internal/mcp, checkPin) and reads them
-- again when it hears this ('upstreams:pins', mcp.PinsChangedEvent). Before,
-- only an admin's acceptance was announced and every forwarded call read
-- its pin from the database, twice. A statement-level trigger: one
-- notification per statement, sent when its transaction commits.
CREATE FUNCTION upstream_tools_announce() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gatehouse_events', 'upstreams:pins');
    RETURN NULL;
END
$$;

CREATE TRIGGER upstream_tools_announce
AFTER INSERT OR UPDATE OR DELETE ON upstream_tools
FOR EACH STATEMENT EXECUTE FUNCTION upstream_tools_announce();
