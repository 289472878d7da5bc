ALTER TABLE notebooks DROP COLUMN environment;
ALTER TABLE conversations DROP COLUMN environment;
