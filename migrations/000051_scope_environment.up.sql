-- Where a conversation's or notebook's calls take effect (issue 31, item
-- 6): production, staging, development or test, set by its owner and
-- shown in its header; NULL until they say. The staging_only constraint
-- holds only where it is staging (it could never hold before: nothing
-- named an environment).
ALTER TABLE conversations ADD COLUMN environment text CHECK (environment IN ('production', 'staging', 'development', 'test'));
ALTER TABLE notebooks ADD COLUMN environment text CHECK (environment IN ('production', 'staging', 'development', 'test'));
