ALTER TABLE proposals DROP COLUMN caller_declaration;
