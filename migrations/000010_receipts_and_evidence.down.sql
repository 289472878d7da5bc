ALTER TABLE proposals DROP COLUMN decision_input;
DROP TABLE trust_thresholds;
DROP TABLE trust_violations;
DROP TABLE evidence;
DROP TABLE receipts;
