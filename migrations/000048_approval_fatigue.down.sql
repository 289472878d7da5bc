-- The view as migration 30 made it (a view's columns cannot be dropped
-- by CREATE OR REPLACE), then the counts' columns.
DROP VIEW proposal_call_facts;
CREATE VIEW proposal_call_facts AS
SELECT id, workspace_id, (created_at AT TIME ZONE 'UTC')::date AS day, coalesce(action_class, '')::text AS action_class, tool,
       status IN ('pending', 'pending_approval', 'applying') AS open,
       status IN ('rejected', 'failed')                      AS refused,
       applied_arguments IS NOT NULL                         AS edited,
       (action_class IS NOT NULL AND resolved_by_user_id IS NOT NULL AND (apply_path IN ('human', 'approval') OR status = 'rejected')
            AND coalesce(claimed_at, resolved_at) IS NOT NULL) AS decided,
       gatehouse_decision_bucket(extract(epoch FROM coalesce(claimed_at, resolved_at) - created_at)::double precision) AS decision_bucket
FROM proposals;

ALTER TABLE call_days_open DROP COLUMN fast_approval, DROP COLUMN rejected;
ALTER TABLE call_days DROP COLUMN fast_approvals, DROP COLUMN rejections;
