-- /trust and /admin/intent read aggregates that a roll-up keeps, instead
-- of scanning history (issue 32, part 3).
--
-- Why: the posterior summed every evidence row of the workspace, the
-- approval rate counted them again, the latest evidence ranked all of them
-- in a window, the median time to a decision sorted every decided call of
-- 90 days, and the intent view counted every call of 30 days. Each page's
-- time grew with history: at 100,000 calls /trust took 139 ms and
-- /admin/intent 218 ms.
--
-- What the pages read now:
-- - evidence_totals: each class's evidence summed (numeric sums, so the
--   order rows are added in cannot change the posterior), per workspace
--   and class. Evidence is never updated, so a row is added once.
-- - call_days: each day's calls (by the proposal's UTC day), per action
--   class and tool: how many, refused, edited, warned about their
--   rationale, and decided by a person, with a log-scale histogram of the
--   seconds to that decision (for the median).
-- - call_days_open: what call_days counted for each call not yet finished
--   (pending, waiting for an approver, applying), so that when it changes
--   the roll-up adds the difference.
-- - Plus what the roll-up has not folded yet: the rows after its
--   watermark (seconds of rows), read with the aggregates in one snapshot.
--
-- The roll-up (internal/rollup) reads two insert-ordered feeds, the
-- evidence ids and the audit_events ids, off the call path: a worker on
-- every instance, one at a time (the feed's row, FOR UPDATE SKIP LOCKED).
-- An id is folded only once every transaction that was writing the table
-- when a larger id was already visible has ended, so an id committed late
-- is never skipped (see rollup_feeds). Every call writes its
-- proposal.created audit row with its proposal, and every change of a
-- call writes an audit row naming the call or its approval packet: the
-- audit log is the calls' feed. Nothing is added to a call's own work but
-- an index entry for the calls refused at the gate (about 2 % of calls).

-- Backfilled from the rows as they are: nothing writes them meanwhile.
LOCK TABLE proposals, audit_events, evidence IN SHARE MODE;

-- A feed's watermark: every row with id <= folded_to is folded. next_to
-- is the largest id visible when next_writers (the virtual transaction
-- ids writing the table at that moment, from pg_locks) were read; once
-- none of them is left, every id <= next_to that will ever commit has.
CREATE TABLE rollup_feeds (
    feed         text PRIMARY KEY CHECK (feed IN ('evidence', 'audit_events')),
    folded_to    bigint NOT NULL CHECK (folded_to >= 0),
    next_to      bigint NOT NULL,
    next_writers text[] NOT NULL DEFAULT '{}',
    folded_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (next_to >= folded_to)
);

-- The transactions of this database writing a table now (their virtual
-- transaction ids): each took its RowExclusiveLock before it drew an id
-- from the table's sequence, and holds it until it ends.
CREATE FUNCTION gatehouse_table_writers(tbl regclass) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT l.virtualtransaction ORDER BY l.virtualtransaction), '{}')
    FROM pg_locks l
    WHERE l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND l.relation = tbl
      AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
      AND l.pid IS DISTINCT FROM pg_backend_pid()
$$;

-- Whether every one of these transactions has ended.
CREATE FUNCTION gatehouse_writers_gone(writers text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.virtualtransaction = ANY (writers))
$$;

-- One evidence row's part of its class's totals: the posterior's sums,
-- the approval rate's judgments and the graduation hint's counts. The
-- backfill, the roll-up and the pages' tail all read it.
CREATE VIEW evidence_contributions AS
SELECT id, workspace_id, action_class,
       CASE WHEN weight > 0 THEN weight::numeric ELSE 0 END                                  AS positive,
       CASE WHEN weight < 0 THEN (-weight)::numeric ELSE 0 END                               AS negative,
       (weight <> 0)::int                                                                    AS samples,
       (provenance IN ('receipt', 'principal') AND label IN ('approved', 'minor_edit'))::int AS judged_approvals,
       (provenance IN ('receipt', 'principal')
            AND label IN ('approved', 'minor_edit', 'edited', 'heavy_rewrite', 'rejected'))::int AS judgments,
       (label IN ('approved', 'sent'))::int                                                  AS approvals,
       (label IN ('minor_edit', 'edited', 'heavy_rewrite'))::int                             AS edits,
       (label IN ('rejected', 'dropped', 'violation'))::int                                  AS rejections
FROM evidence;

CREATE TABLE evidence_totals (
    workspace_id     uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    action_class     text NOT NULL,
    positive         numeric NOT NULL DEFAULT 0,
    negative         numeric NOT NULL DEFAULT 0,
    samples          bigint NOT NULL DEFAULT 0,
    rows             bigint NOT NULL DEFAULT 0,
    judged_approvals bigint NOT NULL DEFAULT 0,
    judgments        bigint NOT NULL DEFAULT 0,
    approvals        bigint NOT NULL DEFAULT 0,
    edits            bigint NOT NULL DEFAULT 0,
    rejections       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, action_class)
);

-- The bucket of a decision's seconds: 0 below a second, then four per
-- doubling (bucket b >= 1 holds [2^((b-1)/4), 2^(b/4)) seconds), the last
-- (127) everything from about 2^31.5 s. internal/intent reads it back.
CREATE FUNCTION gatehouse_decision_bucket(seconds double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN seconds IS NULL OR seconds < 1 THEN 0
                ELSE least(127, 1 + floor(4 * ln(seconds) / ln(2)))::integer END
$$;

-- Histograms are int arrays, bucket b at index b + 1; added element-wise.
CREATE FUNCTION gatehouse_hist_add(a integer[], b integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(coalesce(a[i], 0) + coalesce(b[i], 0) ORDER BY i), '{}')
    FROM generate_series(1, greatest(coalesce(cardinality(a), 0), coalesce(cardinality(b), 0))) AS i
$$;

CREATE AGGREGATE gatehouse_hist_sum(integer[]) (SFUNC = gatehouse_hist_add, STYPE = integer[], INITCOND = '{}');

-- What a proposal counts for on its day: the backfill, the roll-up and
-- the pages' tail all read it. A call is refused when rejected or failed
-- (or refused at the gate, which leaves no proposal), edited when it ran
-- or waits with arguments other than its own, and decided by a person
-- when an owner or approver claimed it or a person rejected it.
CREATE VIEW proposal_call_facts AS
SELECT id, workspace_id, (created_at AT TIME ZONE 'UTC')::date AS day, coalesce(action_class, '')::text AS action_class, tool,
       status IN ('pending', 'pending_approval', 'applying') AS open,
       status IN ('rejected', 'failed')                      AS refused,
       applied_arguments IS NOT NULL                         AS edited,
       (action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND (apply_path IN ('human', 'approval') OR status = 'rejected')
            AND coalesce(claimed_at, resolved_at) IS NOT NULL) AS decided,
       gatehouse_decision_bucket(extract(epoch FROM coalesce(claimed_at, resolved_at) - created_at)::double precision) AS decision_bucket
FROM proposals;

CREATE TABLE call_days (
    workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    day           date NOT NULL,
    action_class  text NOT NULL, -- '' for a call that could not be classified
    tool          text NOT NULL,
    calls         bigint NOT NULL DEFAULT 0,
    refused       bigint NOT NULL DEFAULT 0,
    edited        bigint NOT NULL DEFAULT 0,
    warned        bigint NOT NULL DEFAULT 0,
    decisions     bigint NOT NULL DEFAULT 0,
    decision_hist integer[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (workspace_id, day, action_class, tool)
);

-- No foreign key to proposals: the roll-up would lock the call's row
-- (KEY SHARE) against the FOR UPDATE of its decision. A call deleted by
-- hand is dropped from here by the roll-up's sweep.
CREATE TABLE call_days_open (
    proposal_id     uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    day             date NOT NULL,
    action_class    text NOT NULL,
    tool            text NOT NULL,
    refused         boolean NOT NULL,
    edited          boolean NOT NULL,
    decided         boolean NOT NULL,
    decision_bucket integer NOT NULL
);

-- The intent view lists the latest calls refused at the gate of a
-- period; only those calls pay for the index.
CREATE INDEX audit_events_refused_idx ON audit_events (workspace_id, created_at) WHERE action = 'proposal.refused';

-- The backfill.
INSERT INTO evidence_totals (workspace_id, action_class, positive, negative, samples, rows, judged_approvals, judgments, approvals, edits, rejections)
SELECT workspace_id, action_class, sum(positive), sum(negative), sum(samples), count(*), sum(judged_approvals), sum(judgments),
       sum(approvals), sum(edits), sum(rejections)
FROM evidence_contributions
GROUP BY workspace_id, action_class;

INSERT INTO call_days (workspace_id, day, action_class, tool, calls, refused, edited, decisions, decision_hist)
SELECT workspace_id, day, action_class, tool, count(*), count(*) FILTER (WHERE refused), count(*) FILTER (WHERE edited),
       count(*) FILTER (WHERE decided),
       coalesce(gatehouse_hist_sum(array_fill(0, ARRAY[decision_bucket]) || 1) FILTER (WHERE decided), '{}')
FROM proposal_call_facts
GROUP BY workspace_id, day, action_class, tool;

-- Calls refused at the gate, and the rationale warnings (of proposal.created
-- and proposal.refused rows, on the audit row's day).
INSERT INTO call_days AS d (workspace_id, day, action_class, tool, calls, refused, warned)
SELECT workspace_id, (created_at AT TIME ZONE 'UTC')::date, coalesce(data->>'action_class', ''), coalesce(data->>'tool', ''),
       count(*) FILTER (WHERE action = 'proposal.refused'), count(*) FILTER (WHERE action = 'proposal.refused'),
       count(*) FILTER (WHERE data->'rationale_warning' = 'true'::jsonb)
FROM audit_events
WHERE action = 'proposal.refused' OR (action = 'proposal.created' AND data->'rationale_warning' = 'true'::jsonb)
GROUP BY 1, 2, 3, 4
ON CONFLICT (workspace_id, day, action_class, tool) DO UPDATE
    SET calls = d.calls + EXCLUDED.calls, refused = d.refused + EXCLUDED.refused, warned = d.warned + EXCLUDED.warned;

INSERT INTO call_days_open (proposal_id, workspace_id, day, action_class, tool, refused, edited, decided, decision_bucket)
SELECT id, workspace_id, day, action_class, tool, refused, edited, decided, decision_bucket
FROM proposal_call_facts
WHERE open;

INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'evidence', coalesce(max(id), 0), coalesce(max(id), 0) FROM evidence
UNION ALL
SELECT 'audit_events', coalesce(max(id), 0), coalesce(max(id), 0) FROM audit_events;
